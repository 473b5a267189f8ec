// Preprocessing, each step optional and recorded: pixel scaling to [0,1], row-norm scaling
// (global-max as the FIL paper's scripts, or per-row unit-ball projection), and PCA fitted on
// the training split only.
#pragma once

#include "filkit/data.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace filkit {

/// How rows are brought inside the unit ball.
enum class RowScaling {
  kNone,       ///< leave rows as they are
  kGlobalMax,  ///< divide every row by the largest row norm of the training split
  kUnitBall,   ///< project each row with norm > 1 onto the unit sphere
};
std::string to_string(RowScaling scaling);        // "none", "global-max", "unit-ball"
RowScaling row_scaling_from_string(const std::string& name);  // throws std::invalid_argument

struct PreprocessOptions {
  bool scale_pixels = false;      ///< divide by 255 (images); default off, on for built-ins in the CLI
  RowScaling row_scaling = RowScaling::kNone;
  Index pca_components = 0;       ///< 0 = no PCA; else 1..d
  /// Order as in the FIL paper's scripts: pixels -> row scaling -> PCA (centred on the training
  /// mean). When `scale_after_pca` the row scaling is applied after PCA instead.
  bool scale_after_pca = false;
  void validate() const;
};

/// The fitted preprocessing: statistics of the training split, applied identically to test.
struct Preprocessor {
  PreprocessOptions options;
  double global_max_norm = 1.0;  ///< the training split's largest row norm (global-max)
  VectorXd pca_mean;             ///< d
  MatrixXd pca_components;       ///< d x k, orthonormal columns, by decreasing variance
  VectorXd pca_variances;        ///< k explained variances

  static Preprocessor fit(const Dataset& train, const PreprocessOptions& options);
  Dataset apply(const Dataset& data) const;
  nlohmann::json to_json() const;  ///< the settings and fitted scalars (not the components)
};

/// Fits on `split.train`, applies to both parts.
DatasetSplit preprocess(const DatasetSplit& split, const PreprocessOptions& options,
                        Preprocessor* fitted = nullptr);

}  // namespace filkit
