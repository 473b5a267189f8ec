// The resume file of a DP-SGD job: the training loop's state between steps, saved atomically and
// refused when it belongs to another job (other settings or data).
#pragma once

#include "filkit/dpsgd/training.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit::detail {

/// Sums over runs of each snapshot's accountant, turned into means at the end.
struct SnapshotSums {
  VectorXd trace, trace_squares, spectral, sampled;
};

/// Resuming: what identifies a job (settings and data, not where or how often it saves).
nlohmann::json job_fingerprint(const Dataset& train, const Dataset& test, const DpSgdOptions& options);

/// The loop's state between steps: everything a resumed call needs besides the current run.
struct ResumeState {
  int run = 0;           ///< the run in progress
  Index step = 0;        ///< steps done in that run
  nlohmann::json trainer;  ///< the run's Trainer::state() (null when step = 0)
  std::vector<SnapshotSums> sums;
  std::vector<std::vector<double>> train_accuracy, test_accuracy;  ///< per snapshot, one per run so far
  std::vector<std::uint64_t> run_seeds;
  std::vector<VectorXd> parameters;  ///< of the finished runs
  double training_seconds = 0.0, evaluation_seconds = 0.0;
};

/// Saves `state` to `path` atomically (CBOR: exact doubles, compact).
void save_state(const std::string& path, const nlohmann::json& fingerprint, const ResumeState& state);

/// The saved state at `path`, or nullopt when there is none. Throws when it belongs to another job.
std::optional<ResumeState> load_state(const std::string& path, const nlohmann::json& fingerprint);

}  // namespace filkit::detail
