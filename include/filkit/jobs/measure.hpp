// The measurement job, load -> preprocess -> fit -> FIL -> summary, as one library call so that
// the command line (`filkit measure`) and the Python bindings compute identical numbers.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/preprocessing.hpp"
#include "filkit/jobs/job.hpp"
#include "filkit/jobs/task.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace filkit {

struct MeasureOptions {
  TaskOptions task;
  /// fil.sigma is the noise of one release.
  FilOptions fil;
  /// Number of independent releases of the model at noise fil.sigma (>= 1): their FIMs add, so
  /// FIL is reported at the composed sigma / sqrt(releases).
  int releases = 1;
  /// Attribute-level FIL: a source attribute's name (CSV/ARFF column map) or a comma-separated
  /// list of feature columns ("3,4,5"); empty = none.
  std::string attribute;
  /// Groups whose joint FIL is reported: "all" (the whole training set), "class=K" (examples of
  /// class K), "rows=FILE" (0-based row indices, one per line).
  std::vector<std::string> subsets;
  /// Seed of the output-perturbed release w' = w* + N(0, sigma^2 I) (and of any split).
  std::uint64_t seed = 0;
  void validate() const;
};

template <class Visit>
void visit_fields(MeasureOptions& o, Visit&& visit) {
  visit_fields(o.task, visit);
  visit_fields(o.fil, visit);
  visit("releases", o.releases, "Independent releases at sigma, composed (FIL grows by sqrt(releases))");
  visit("attribute", o.attribute, "Attribute-level FIL: a source attribute's name (CSV/ARFF) or feature columns 3,4,5");
  visit("subset", o.subsets,
        "Joint FIL of a group: all, class=K or rows=FILE (0-based indices, one per line); repeatable");
  visit("seed", o.seed, "Seed of every random choice: the release's noise and any train/test split");
}

struct GroupFil {
  std::string name;  ///< as given, e.g. "class=1"
  SubsetFil fil;
};

/// On several MPI ranks (`mpirun -np K filkit measure`, docs/distributed.md) every rank loads and
/// measures its shard of the examples; the per-example results (fil, loss, attribute_eta, labels)
/// are gathered at rank 0, which alone holds them all and writes the outputs.
struct MeasureResult final : JobResult {
  MeasureOptions options;  ///< as run, every auto resolved
  DatasetSplit data;       ///< after preprocessing (on several ranks: this rank's shard)
  Index n_train = 0;       ///< training examples of all ranks
  Index n_test = 0;        ///< test examples of all ranks
  int ranks = 1;           ///< MPI ranks the job ran on
  VectorXd labels;         ///< the training labels, in the order of fil (all of them at rank 0)
  Preprocessor preprocessor;
  Model model;         ///< w*
  Model release;       ///< w' = w* + N(0, sigma^2 I), seeded
  double sigma = 1.0;  ///< composed sigma of all releases
  PerExampleFil fil;   ///< per training example (on several ranks: all at rank 0, none elsewhere)
  PerExampleLoss loss;
  std::vector<Index> attribute_columns;  ///< empty without an attribute
  VectorXd attribute_eta;                ///< per-example attribute FIL (empty without one)
  SubsetFil attribute_fil;               ///< the attribute over all examples
  std::vector<GroupFil> groups;
  double train_accuracy = 0.0, test_accuracy = 0.0;  ///< NaN for regression
  double train_mse = 0.0, test_mse = 0.0;
  std::map<std::string, double> seconds;  ///< wall time of each stage

  /// The summary: n, d, every setting (resolved), eta / dFIL statistics, accuracies, groups,
  /// timings, seed, version.
  nlohmann::json to_json() const override;
  /// One row per training example: index, label, eta, dfil, the two Cramer-Rao bounds, loss,
  /// gradient norm (and attribute_eta with an attribute).
  NumericTable table() const override;
  /// "release_out": the released weights w'.
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
};

/// Runs the job: load -> preprocess -> fit -> FIL (and groups, attribute) -> release.
MeasureResult run_measure(const MeasureOptions& options, bool progress = false);

/// The job's description for the command line and Python.
struct MeasureJob {
  using Options = MeasureOptions;
  static constexpr const char* name = "measure";
  static constexpr bool runs_on_mpi_ranks = true;  // sharded (docs/distributed.md)
  static constexpr const char* description =
      "Fit a GLM and measure the Fisher information loss (FIL) of its output-perturbed release for every training "
      "example. Without options: Fashion-MNIST 0 vs 1, global-max scaling, PCA 20, logistic, lambda 8e-4, sigma 1.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the FIL paper's measurements (Hannun et al. 2021)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"label", "the FIL paper counts the label among an example's coordinates"},
            {"pca", "PCA 20 for the built-in images, as the FIL paper"},
            {"row_scaling", "rows of norm at most 1, the FIL paper's assumption"}};
  }
  static constexpr const char* out_help =
      "Per-example CSV: index, label, eta, dfil, Cramer-Rao bounds, loss, gradient norm";
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"release_out", "CSV of the released weights w' = w* + N(0, sigma^2 I), seeded by seed"}};
  }
  static MeasureResult run(const Options& options, bool progress) { return run_measure(options, progress); }
};

}  // namespace filkit
