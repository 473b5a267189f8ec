// The measurement job, load -> preprocess -> fit -> FIL -> summary, as one library call so that
// the command line (`filkit measure`) and the Python bindings compute identical numbers.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/data/preprocessing.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace filkit {

struct MeasureOptions {
  DataOptions data;
  PreprocessOptions preprocess;
  FitOptions fit;
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
  /// Show progress on stderr.
  bool progress = false;
  void validate() const;
};

/// The default job: Fashion-MNIST classes 0 vs 1, pixels /255, global-max scaling, PCA 20,
/// logistic regression with lambda 8e-4, sigma 1, label private.
MeasureOptions default_measure_options();

struct GroupFil {
  std::string name;  ///< as given, e.g. "class=1"
  SubsetFil fil;
};

struct MeasureResult {
  DatasetSplit data;          ///< after preprocessing
  Preprocessor preprocessor;
  Model model;                ///< w*
  Model release;              ///< w' = w* + N(0, sigma^2 I), seeded
  double sigma = 1.0;         ///< composed sigma of all releases
  PerExampleFil fil;
  PerExampleLoss loss;
  std::vector<Index> attribute_columns;  ///< empty without an attribute
  VectorXd attribute_eta;                ///< per-example attribute FIL (empty without one)
  SubsetFil attribute_fil;               ///< the attribute over all examples
  std::vector<GroupFil> groups;
  double train_accuracy = 0.0, test_accuracy = 0.0;  ///< NaN for regression
  double train_mse = 0.0, test_mse = 0.0;
  std::map<std::string, double> seconds;  ///< wall time of each stage

  /// The summary: n, d, every setting, eta / dFIL statistics, accuracies, groups, timings, seed,
  /// version.
  nlohmann::json summary(const MeasureOptions& options) const;
  /// One row per training example: index, label, eta, dfil, the two Cramer-Rao bounds, loss,
  /// gradient norm (and attribute_eta with an attribute).
  std::vector<std::string> table_header() const;
  std::vector<std::vector<double>> table_rows() const;
};

MeasureResult measure(const MeasureOptions& options);

/// Parses "0,1,2" into integers (throws std::invalid_argument naming `what` on bad input).
std::vector<Index> parse_index_list(const std::string& text, const std::string& what);

}  // namespace filkit
