#include "filkit/base/communicator.hpp"

#include "filkit/base/errors.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#if FILKIT_WITH_MPI
#include <mpi.h>
#endif

namespace filkit {

RowShard RowShard::of(Index n, int rank, int ranks) {
  // A rank outside the communicator is a caller's bug.
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw std::logic_error("RowShard: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  const Index base = n / ranks, extra = n % ranks;  // the first `extra` ranks take one row more
  const auto r = static_cast<Index>(rank);
  RowShard shard;
  shard.begin = r * base + std::min(r, extra);
  shard.end = shard.begin + base + (r < extra ? 1 : 0);
  return shard;
}

namespace {
Communicator* g_world = nullptr;  // set while an MpiSession with several ranks (or one) runs
}  // namespace

const Communicator& Communicator::local() {
  static const Communicator one(0, 1, nullptr);
  return one;
}

double share_over_ranks(double share, Index rows, const Communicator& comm) {
  if (!comm.distributed()) return share;
  const Index all = comm.sum(rows);
  const Index count = rows > 0 ? static_cast<Index>(std::llround(share * static_cast<double>(rows))) : 0;
  return all > 0 ? static_cast<double>(comm.sum(count)) / static_cast<double>(all)
                 : std::numeric_limits<double>::quiet_NaN();
}

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

#if FILKIT_WITH_MPI

const Communicator& Communicator::world() {
  if (g_world != nullptr) return *g_world;
  // Started by someone else (Python's mpi4py, another program linking filkit): the ranks of
  // MPI_COMM_WORLD, used as it is (duplicating it would be a collective call here).
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    static MPI_Comm world_comm = MPI_COMM_WORLD;
    static const Communicator outside = [] {
      int rank = 0, size = 1;
      MPI_Comm_rank(world_comm, &rank);
      MPI_Comm_size(world_comm, &size);
      return Communicator(rank, size, &world_comm);
    }();
    return outside;
  }
  if (launched_by_mpi())
    throw ResourceError(
        "started by an MPI launcher (mpirun), but MPI is not initialised: from Python, import mpi4py.MPI before "
        "running a job (python3 -m mpi4py script.py), so that the job runs on the ranks instead of whole on each");
  return local();
}

namespace {
MPI_Comm comm_of(void* handle) { return *static_cast<MPI_Comm*>(handle); }
// MPI counts are ints: large arrays go in pieces.
constexpr std::size_t kPiece = std::size_t{1} << 27;
}  // namespace

void Communicator::check_same_count(std::size_t count, const char* what) const {
  if (size_ == 1) return;
  // The largest count and the largest negated count: equal magnitudes when every rank agrees.
  long long mine[2] = {static_cast<long long>(count), -static_cast<long long>(count)}, most[2] = {0, 0};
  MPI_Allreduce(mine, most, 2, MPI_LONG_LONG, MPI_MAX, comm_of(handle_));
  if (most[0] == -most[1]) return;
  if (rank_ != 0) throw StoppedWithRankZero();
  throw ResourceError(std::string("the MPI ranks disagree on the size of ") + what + " (from " +
                      std::to_string(-most[1]) + " to " + std::to_string(most[0]) +
                      " values): they were started with different options or data; start every rank with "
                      "the same command");
}

void Communicator::sum(double* values, std::size_t count) const {
  if (size_ == 1) return;
  check_same_count(count, "a collective sum");
  for (std::size_t start = 0; start < count; start += kPiece) {
    const int piece = static_cast<int>(std::min(kPiece, count - start));
    MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : values + start, values + start, piece, MPI_DOUBLE, MPI_SUM, 0,
               comm_of(handle_));
  }
  broadcast(values, count);
}

void Communicator::broadcast(double* values, std::size_t count) const {
  if (size_ == 1) return;
  check_same_count(count, "a broadcast");
  for (std::size_t start = 0; start < count; start += kPiece) {
    const int piece = static_cast<int>(std::min(kPiece, count - start));
    MPI_Bcast(values + start, piece, MPI_DOUBLE, 0, comm_of(handle_));
  }
}

double Communicator::max(double value) const {
  if (size_ == 1) return value;
  double result = value;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, comm_of(handle_));  // exact: max has no rounding
  return result;
}

Index Communicator::max(Index value) const {
  if (size_ == 1) return value;
  long long mine = value, result = value;
  MPI_Allreduce(&mine, &result, 1, MPI_LONG_LONG, MPI_MAX, comm_of(handle_));
  return static_cast<Index>(result);
}

Index Communicator::sum(Index value) const {
  if (size_ == 1) return value;
  long long mine = value, result = value;
  MPI_Allreduce(&mine, &result, 1, MPI_LONG_LONG, MPI_SUM, comm_of(handle_));  // integers: exact
  return static_cast<Index>(result);
}

bool Communicator::all(bool value) const {
  if (size_ == 1) return value;
  int mine = value ? 1 : 0, result = mine;
  MPI_Allreduce(&mine, &result, 1, MPI_INT, MPI_MIN, comm_of(handle_));
  return result == 1;
}

Index Communicator::exclusive_prefix_sum(Index value) const {
  if (size_ == 1) return 0;
  long long mine = value, result = 0;
  MPI_Exscan(&mine, &result, 1, MPI_LONG_LONG, MPI_SUM, comm_of(handle_));
  return rank_ == 0 ? 0 : static_cast<Index>(result);  // MPI_Exscan leaves rank 0's undefined
}

namespace {
/// Every rank's count at rank 0, with the offsets of a concatenation in rank order (MPI_Gatherv's).
struct GatherLayout {
  std::vector<int> counts, offsets;
  int total = 0;
};

GatherLayout gather_layout(std::size_t count, bool root, int ranks, MPI_Comm comm, const char* unit) {
  if (count > INT_MAX)
    throw ResourceError(std::string("Communicator::gather: more than INT_MAX ") + unit + " on one rank");
  GatherLayout layout{std::vector<int>(root ? ranks : 0), std::vector<int>(root ? ranks : 0), 0};
  const int mine = static_cast<int>(count);
  MPI_Gather(&mine, 1, MPI_INT, layout.counts.data(), 1, MPI_INT, 0, comm);
  long long total = 0;
  for (std::size_t r = 0; r < layout.counts.size(); ++r) {
    layout.offsets[r] = static_cast<int>(total);
    total += layout.counts[r];
  }
  if (total > INT_MAX) throw ResourceError(std::string("Communicator::gather: more than INT_MAX ") + unit + " in all");
  layout.total = static_cast<int>(total);
  return layout;
}
}  // namespace

VectorXd Communicator::gather(const VectorXd& values) const {
  if (size_ == 1) return values;
  const GatherLayout layout =
      gather_layout(static_cast<std::size_t>(values.size()), rank_ == 0, size_, comm_of(handle_), "values");
  VectorXd gathered(layout.total);
  MPI_Gatherv(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, gathered.data(), layout.counts.data(),
              layout.offsets.data(), MPI_DOUBLE, 0, comm_of(handle_));
  return gathered;
}

std::vector<std::string> Communicator::gather(const std::string& text) const {
  if (size_ == 1) return {text};
  const GatherLayout layout = gather_layout(text.size(), rank_ == 0, size_, comm_of(handle_), "characters");
  std::string all(static_cast<std::size_t>(layout.total), '\0');
  MPI_Gatherv(text.data(), static_cast<int>(text.size()), MPI_CHAR, all.data(), layout.counts.data(),
              layout.offsets.data(), MPI_CHAR, 0, comm_of(handle_));
  std::vector<std::string> texts;
  for (std::size_t r = 0; r < layout.counts.size(); ++r)
    texts.push_back(
        all.substr(static_cast<std::size_t>(layout.offsets[r]), static_cast<std::size_t>(layout.counts[r])));
  return texts;
}

void Communicator::broadcast(std::string& text) const {
  if (size_ == 1) return;
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, comm_of(handle_));
  text.resize(static_cast<std::size_t>(length));
  for (std::size_t start = 0; start < text.size(); start += kPiece) {
    const int piece = static_cast<int>(std::min(kPiece, text.size() - start));
    MPI_Bcast(text.data() + start, piece, MPI_CHAR, 0, comm_of(handle_));
  }
}

namespace {
MPI_Comm g_world_comm = MPI_COMM_NULL;
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!launched_by_mpi()) return;
  int provided = 0;
  // Only the main thread calls MPI; OpenMP threads work between the calls.
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  started_ = true;
  int rank = 0, size = 1;
  MPI_Comm_dup(MPI_COMM_WORLD, &g_world_comm);
  MPI_Comm_rank(g_world_comm, &rank);
  MPI_Comm_size(g_world_comm, &size);
  g_world = new Communicator(rank, size, &g_world_comm);
}

MpiSession::~MpiSession() {
  if (!started_) return;
  delete g_world;
  g_world = nullptr;
  MPI_Comm_free(&g_world_comm);
  MPI_Finalize();
}

void MpiSession::abort_if_distributed(int exit_code) {
  if (Communicator::world().distributed()) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

#else  // without MPI: one rank

const Communicator& Communicator::world() {
  if (launched_by_mpi())
    throw ResourceError(
        "started by an MPI launcher (mpirun), but this filkit was built without MPI: every process would run the "
        "whole job alone. Install libopenmpi-dev and rebuild (scripts/setup.sh), or run without mpirun");
  return local();
}

void Communicator::sum(double*, std::size_t) const {}
void Communicator::broadcast(double*, std::size_t) const {}
double Communicator::max(double value) const { return value; }
Index Communicator::max(Index value) const { return value; }
Index Communicator::sum(Index value) const { return value; }
bool Communicator::all(bool value) const { return value; }
Index Communicator::exclusive_prefix_sum(Index) const { return 0; }
VectorXd Communicator::gather(const VectorXd& values) const { return values; }
std::vector<std::string> Communicator::gather(const std::string& text) const { return {text}; }
void Communicator::broadcast(std::string&) const {}
void Communicator::check_same_count(std::size_t, const char*) const {}

MpiSession::MpiSession(int*, char***) {
  if (launched_by_mpi())
    throw ResourceError(
        "started by an MPI launcher (mpirun), but this filkit was built without MPI: every process would run the "
        "whole job alone. Install libopenmpi-dev and rebuild (scripts/setup.sh), or run without mpirun");
}
MpiSession::~MpiSession() = default;
void MpiSession::abort_if_distributed(int) {}

#endif

void Communicator::stop_all_if(std::exception_ptr problem) const {
  double stop = problem ? 1.0 : 0.0;
  broadcast(&stop, 1);
  if (stop == 0.0) return;
  if (rank_ != 0) throw StoppedWithRankZero();
  std::rethrow_exception(problem);
}

void stop_all_if_any_failed(std::exception_ptr failed, const Communicator& comm, const std::function<void()>& at_root,
                            const std::function<std::string(const std::string& messages)>& root_message) {
  if (comm.all(!failed)) return;
  std::string error;  // "rank r: what()" of this rank's error, for rank 0's message
  if (failed) {
    try {
      std::rethrow_exception(failed);
    } catch (const std::exception& caught) {
      error = "rank " + std::to_string(comm.rank()) + ": " + caught.what();
    } catch (...) {
      error = "rank " + std::to_string(comm.rank()) + ": an exception that is not a std::exception";
    }
  }
  const std::vector<std::string> errors = comm.gather(error);
  if (comm.is_root() && at_root) {
    try {
      at_root();
    } catch (...) {  // the work's error is the one reported
    }
  }
  comm.all(true);  // rank 0 is done: the failing ranks may now end every rank
  if (failed) std::rethrow_exception(failed);
  if (!comm.is_root()) throw StoppedWithRankZero();
  std::string messages;
  for (const std::string& text : errors)
    if (!text.empty()) messages += (messages.empty() ? "" : "; ") + text;
  throw ResourceError(root_message(messages));
}

void Communicator::sum(Eigen::Ref<MatrixXd> values) const {
  if (size_ == 1) return;
  if (values.outerStride() != values.rows()) {  // not contiguous: through a copy
    MatrixXd copy = values;
    sum(copy.data(), static_cast<std::size_t>(copy.size()));
    values = copy;
    return;
  }
  sum(values.data(), static_cast<std::size_t>(values.size()));
}

double Communicator::sum(double value) const {
  sum(&value, 1);
  return value;
}

void Communicator::broadcast(Eigen::Ref<MatrixXd> values) const {
  if (size_ == 1) return;
  MatrixXd copy = values;
  broadcast(copy.data(), static_cast<std::size_t>(copy.size()));
  values = copy;
}

}  // namespace filkit
