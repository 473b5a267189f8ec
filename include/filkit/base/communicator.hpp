// The processes a job runs on: one, or the ranks of an MPI job (`mpirun -np K filkit ...`;
// docs/distributed.md). Every collective step of the library (preprocessing statistics, the fit's
// gradients and Hessians, the FIL's Hessian and group sums) goes through a Communicator, so the
// same code runs on one process and on K: on one process each collective is the identity.
//
// Sums are reduced at rank 0 and broadcast, never all-reduced: MPI does not promise that
// MPI_Allreduce gives every rank the same bits, and the ranks of a fit must take identical Newton
// steps. MPI is optional at build time (FILKIT_WITH_MPI); without it, or outside mpirun, there is
// one rank.
#pragma once

#include "filkit/base/types.hpp"

#include <cstddef>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {

/// The contiguous block of rows [begin, end) that a rank owns: K shards of n rows whose sizes
/// differ by at most one, in rank order.
struct RowShard {
  Index begin = 0;
  Index end = 0;
  Index size() const { return end - begin; }
  /// Rank `rank`'s shard of n rows split over `ranks`.
  static RowShard of(Index n, int rank, int ranks);
};

/// Thrown on the ranks other than 0 when an error stops every rank and rank 0 reports it: the
/// message is printed once, by rank 0 (the command line prints nothing for this one).
class StoppedWithRankZero : public std::runtime_error {
 public:
  StoppedWithRankZero() : std::runtime_error("stopped with rank 0, which reports why") {}
};

class Communicator {
 public:
  /// One process, no MPI: every collective is the identity.
  static const Communicator& local();
  /// The ranks of the running MPI job, started by MpiSession (the command line) or by another
  /// (Python's mpi4py: MPI_COMM_WORLD); else local(). Throws std::runtime_error when an MPI launcher
  /// started the process but nobody initialised MPI (each process would run the whole job).
  static const Communicator& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  bool distributed() const { return size_ > 1; }
  /// This rank's shard of n rows.
  RowShard shard(Index n) const { return RowShard::of(n, rank_, size_); }

  /// values <- the sum over ranks, the same bits on every rank (reduced at rank 0, broadcast).
  void sum(double* values, std::size_t count) const;
  void sum(Eigen::Ref<MatrixXd> values) const;  // vectors too
  double sum(double value) const;
  Index sum(Index value) const;
  /// The largest value over ranks.
  double max(double value) const;
  Index max(Index value) const;
  /// Whether `value` holds on every rank.
  bool all(bool value) const;
  /// The sum of `value` over the ranks before this one (0 on rank 0).
  Index exclusive_prefix_sum(Index value) const;
  /// values <- rank 0's values. Every rank must pass the same count: checked first (as by sum), so
  /// that ranks started differently stop with an error rather than truncating or hanging.
  void broadcast(double* values, std::size_t count) const;
  void broadcast(Eigen::Ref<MatrixXd> values) const;  // vectors too
  /// At rank 0: every rank's values, concatenated in rank order; elsewhere: empty.
  VectorXd gather(const VectorXd& values) const;
  /// At rank 0: every rank's text, in rank order; elsewhere: empty.
  std::vector<std::string> gather(const std::string& text) const;
  /// text <- rank 0's text.
  void broadcast(std::string& text) const;
  /// Stops every rank unless all pass the same `count` for the collective `what` (one small
  /// all-reduce): ranks started with different options or data would otherwise mismatch their
  /// buffers (MPI_ERR_TRUNCATE) or wait for each other forever. Rank 0 throws std::runtime_error
  /// with the sizes, the others StoppedWithRankZero.
  void check_same_count(std::size_t count, const char* what) const;
  /// Ends every rank when rank 0's `problem` is set (known at rank 0 only; null: none): rank 0
  /// rethrows it, the others throw StoppedWithRankZero. Collective.
  void stop_all_if(std::exception_ptr problem) const;

 private:
  Communicator(int rank, int size, void* handle) : rank_(rank), size_(size), handle_(handle) {}
  int rank_ = 0;
  int size_ = 1;
  void* handle_ = nullptr;  // the MPI_Comm, when there is one
  friend class MpiSession;
};

/// The share of every rank's rows that something holds for (correct predictions, say), from this
/// rank's share of its `rows`: the shares are turned back into counts, which add exactly. On one
/// process, `share` itself; NaN when no rank has a row. Collective.
double share_over_ranks(double share, Index rows, const Communicator& comm);

/// After a unit of work every rank did its share of (a wave of shadow models, a run): returns when
/// it failed on no rank (`failed`: on this one; one all-reduce). Otherwise ends every rank:
/// rank 0 gathers each failing rank's message ("rank r: what()"), runs `at_root` (saving what it
/// holds, say; its own error is dropped), then the failing ranks throw their own error (each
/// prints it and ends every rank), rank 0 when it did not fail throws a ResourceError of
/// `root_message(the joined messages)`, and the others StoppedWithRankZero. Collective.
void stop_all_if_any_failed(std::exception_ptr failed, const Communicator& comm, const std::function<void()>& at_root,
                            const std::function<std::string(const std::string& messages)>& root_message);

/// Whether this process was started by an MPI launcher (mpirun/mpiexec/srun set its rank in the
/// environment).
bool launched_by_mpi();

/// Starts MPI for the lifetime of the object when the process was started by an MPI launcher
/// (Communicator::world() then has every rank), and does nothing otherwise. One per program, in
/// main. Launched by mpirun without MPI support built in, it throws: K copies would each run the
/// whole job.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  /// On several ranks, ends them all at once after an error on this one (MPI_Abort): the others
  /// may be waiting in a collective that this rank will never join. Returns on one rank.
  static void abort_if_distributed(int exit_code);

 private:
  bool started_ = false;
};

}  // namespace filkit
