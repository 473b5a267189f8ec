// The job behind `filkit bound`: load -> preprocess -> fit -> reconstruction bounds (the RDP bound
// and the per-example FIL/dFIL bounds, leakage/bounds.hpp; docs/mathematics.md, section 6) ->
// summary. The setting is section 7.1 of Guo, Karrer, Chaudhuri and van der Maaten (ICML 2022).
#pragma once

#include "filkit/jobs/job.hpp"
#include "filkit/jobs/task.hpp"
#include "filkit/leakage/bounds.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace filkit {

struct BoundJobOptions {
  /// Guo et al.'s setting: MNIST 0 vs 1, pixels / 255, no row scaling or PCA, logistic with an
  /// intercept, lambda = 1e-2.
  TaskOptions task{.data = {.data = "mnist", .pca = 0, .row_scaling = RowScaling::kNone},
                   .fit = {.l2 = 1e-2, .intercept = true}};
  /// sigma and norm_bound (the diameters come from `diameter`).
  ReconstructionBoundOptions bounds;
  /// Range of each private coordinate: one number for every coordinate, or a file of d numbers.
  std::string diameter = "1";
  std::uint64_t seed = 0;
  /// bounds with `diameter` read.
  ReconstructionBoundOptions bound_options() const;
  void validate() const;
};

template <class Visit>
void visit_fields(BoundJobOptions& o, Visit&& visit) {
  visit_fields(o.task, visit);
  visit("sigma", o.bounds.sigma, "Standard deviation of the output perturbation, > 0");
  visit("diameter", o.diameter,
        "Range of each private coordinate for the RDP bound and the perfect-privacy line: one number for every "
        "coordinate, or a file of d numbers");
  visit("norm_bound", o.bounds.norm_bound,
        "R of the assumption ||x~|| <= R under which eps = 4 R^2 / (n lambda sigma)^2 is stated");
  visit("seed", o.seed, "Seed of every random choice: the release's noise and any train/test split");
}

/// On several MPI ranks (docs/distributed.md) the per-example results are gathered at rank 0.
struct BoundJobResult final : JobResult {
  BoundJobOptions options;        ///< as run, autos resolved
  DatasetSplit data;              ///< after preprocessing (on several ranks: this rank's shard)
  Index n_train = 0, n_test = 0;  ///< examples of all ranks
  VectorXd labels;                ///< the training labels, in the order of the table (all of them at rank 0)
  Preprocessor preprocessor;
  Model model;    ///< w*
  Model release;  ///< w' = w* + N(0, sigma^2 I), seeded
  ReconstructionBounds bounds;
  double train_accuracy = 0.0, test_accuracy = 0.0, release_test_accuracy = 0.0;
  std::vector<std::string> warnings;      ///< e.g. the norm assumption failing
  std::map<std::string, double> seconds;  ///< wall time of each stage

  nlohmann::json to_json() const override;
  /// index, label, eta, dfil, fil_bound, dfil_bound.
  NumericTable table() const override;
  void print_summary(std::ostream& out) const override;
  void print_bounds(std::ostream& out) const;
  void print_seconds(std::ostream& out) const;
};

BoundJobResult run_bound(const BoundJobOptions& options, bool progress = false);

struct BoundJob {
  using Options = BoundJobOptions;
  static constexpr const char* name = "bound";
  static constexpr bool runs_on_mpi_ranks = true;  // sharded (docs/distributed.md)
  static constexpr const char* description =
      "Lower bounds on the MSE of reconstructing each training example from an output-perturbed logistic "
      "regression: the (2, eps)-RDP bound (Theorem 1) and the per-example dFIL and FIL bounds (Theorem 2) of Guo "
      "et al. 2022. Defaults: their setting, MNIST 0 vs 1, pixels / 255, intercept, lambda = sigma = 1e-2 (use "
      "--no-intercept to drop the intercept).";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason =
      "defaults of the reconstruction paper's output perturbation (Guo et al. 2022)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"pca", "the bounds are on the raw pixels an attacker reconstructs (Guo et al. 2022)"}};
  }
  static constexpr const char* out_help = "Per-example CSV: index, label, eta, dfil, fil_bound, dfil_bound";
  static std::vector<ExtraOutput> extra_outputs() { return {}; }
  static BoundJobResult run(const Options& options, bool progress) { return run_bound(options, progress); }
};

}  // namespace filkit
