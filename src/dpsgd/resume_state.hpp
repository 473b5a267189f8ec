// The resume file of a DP-SGD job: the training loop's state between steps. Nothing in it is
// trusted: a versioned header and a CRC32 catch damage before parsing, then every size and
// counter is checked against the job before use. A file that fails any check is refused
// (std::runtime_error naming the file, what is wrong, and that it may be deleted to start over),
// never used, and so can neither crash filkit nor change its results.
//
// Layout (integers little-endian):
//   bytes  0..7   magic "\x89" "FKDPSGD"
//   bytes  8..11  format version (kResumeFormatVersion)
//   bytes 12..19  payload length in bytes (the rest of the file)
//   bytes 20..23  CRC32 (zlib's) of the payload
//   bytes 24..    payload: CBOR (exact doubles, compact) of {"job": the fingerprint, "run", "step",
//                 "trainer", "sums" (per snapshot: "trace_per_run", one per-example vector for
//                 each run through it, and the sums "spectral", "sampled"), "train_accuracy",
//                 "test_accuracy", "run_seeds", "parameters", "model_states" (each run's
//                 TrainableModel::resume_state(), one per run started: fim's gradient model),
//                 "training_seconds", "evaluation_seconds"}
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/dpsgd/training.hpp"

#include "dpsgd/trainer.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit::detail {

/// Version 1 was the bare CBOR payload, without header or checksum; version 2 kept only the sum
/// and the sum of squares of the runs' traces, too little for the intervals over runs; version 3
/// hashed the data in one pass, which the ranks of an MPI job cannot reproduce; version 4 had no
/// model states.
constexpr std::uint32_t kResumeFormatVersion = 5;

/// Each snapshot's accountant: every run's traces (for the means, standard errors and bootstrap
/// intervals), and sums over runs of the rest, turned into means at the end.
struct SnapshotSums {
  std::vector<VectorXd> trace_per_run;  ///< one per run through the snapshot
  VectorXd spectral, sampled;
};

/// Resuming: what identifies a job (settings and data, not where or how often it saves). On the
/// ranks of an MPI job `train` and `test` are the rank's rows; every rank gets the fingerprint of
/// the whole data, the same as one process's (collective).
nlohmann::json job_fingerprint(const Dataset& train, const Dataset& test, const DpSgdOptions& options,
                               const Communicator& comm);

/// The loop's state between steps: everything a resumed call needs besides the current run.
struct ResumeState {
  int run = 0;                          ///< the run in progress
  Index step = 0;                       ///< steps done in that run
  std::optional<TrainerState> trainer;  ///< the run's state (none when step = 0)
  std::vector<SnapshotSums> sums;
  std::vector<std::vector<double>> train_accuracy, test_accuracy;  ///< per snapshot, one per run so far
  std::vector<std::uint64_t> run_seeds;
  std::vector<VectorXd> parameters;  ///< of the finished runs
  /// TrainableModel::resume_state() of every run started (null or an object; the model checks it).
  std::vector<nlohmann::json> model_states;
  double training_seconds = 0.0, evaluation_seconds = 0.0;
};

/// What a file of this format is to the call reading it, for its messages: a resume file, or the
/// run file of one run trained alone (train_dpsgd_run), which holds the state of a call of that
/// one run once it is done.
struct StateFileKind {
  const char* name;              ///< e.g. "checkpoint", before the path
  const char* what;              ///< what a file that fails the checks is not
  const char* remedy;            ///< what to do with a file that cannot be used
  const char* other_job_remedy;  ///< what to do with a file of other settings or data
};
inline constexpr StateFileKind kCheckpointFile{"checkpoint", "a filkit DP-SGD checkpoint",
                                               "delete it to start the job over",
                                               "delete it to start afresh, or choose another path"};
inline constexpr StateFileKind kRunFile{"run file", "a run file of filkit dpsgd --run",
                                        "delete it and train that run again",
                                        "it is no run of this call: combine the runs with the settings and data "
                                        "that trained them, or train this run again with these"};

/// What a saved state of this job must agree with: its fingerprint, and the settings every size
/// and counter in it follows from. A state may be of a call whose every run is done (run = runs,
/// step 0): a run file, or a resume file left by a finished call.
struct ExpectedState {
  const StateFileKind* kind = &kCheckpointFile;
  nlohmann::json fingerprint;
  int runs = 1;
  Index steps = 1;
  Index n = 0;  ///< training examples
  Index parameter_count = 0;
  std::vector<Index> snapshot_steps;
  std::vector<std::uint64_t> run_seeds;           ///< of every run
  bool adam = false;                              ///< Adam keeps a second moment and counts its steps
  bool spectral_computed = true;                  ///< else the spectral sums hold NaN where sampled
  bool has_test = true;                           ///< else every test accuracy is NaN
  ByteSize max_memory = default_memory_budget();  ///< the resume file is read within it (issue 50)
};

/// Saves `state` to `path` (write_output_file: a regular file is replaced atomically).
void save_state(const std::string& path, const nlohmann::json& fingerprint, const ResumeState& state);

/// The saved state at `path`, or nullopt when there is no file. Throws std::runtime_error naming
/// the file when it is damaged, inconsistent with `expected`, or belongs to another job.
std::optional<ResumeState> load_state(const std::string& path, const ExpectedState& expected);

/// Throws the std::runtime_error of a checkpoint at `path` that cannot be used because of `problem`.
[[noreturn]] void refuse_checkpoint(const std::string& path, const std::string& problem);

}  // namespace filkit::detail
