// Preprocessing, each step optional and recorded: pixel scaling to [0,1], per-channel
// standardisation of images, row-norm scaling (global-max as the FIL paper's scripts, or per-row
// unit-ball projection), and PCA, all fitted on the training split only.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/enum_names.hpp"
#include "filkit/data/dataset.hpp"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

namespace filkit {

/// How rows are brought inside the unit ball.
enum class RowScaling {
  kNone,       ///< leave rows as they are
  kGlobalMax,  ///< divide every row by the largest row norm of the training split
  kUnitBall,   ///< project each row with norm > 1 onto the unit sphere
};
template <>
struct EnumNames<RowScaling> {
  static constexpr const char* what = "row scaling";
  static constexpr std::pair<RowScaling, const char*> names[] = {
      {RowScaling::kNone, "none"}, {RowScaling::kGlobalMax, "global-max"}, {RowScaling::kUnitBall, "unit-ball"}};
};

/// Whether image pixels are standardised.
enum class Standardization {
  kNone,     ///< leave pixels as they are
  kChannel,  ///< per image channel: subtract the training mean, divide by the training standard deviation
};
template <>
struct EnumNames<Standardization> {
  static constexpr const char* what = "standardization";
  static constexpr std::pair<Standardization, const char*> names[] = {{Standardization::kNone, "none"},
                                                                      {Standardization::kChannel, "channel"}};
};

struct PreprocessOptions {
  bool scale_pixels = false;  ///< divide by 255 (images); default off, on for built-ins in the CLI
  /// channel: x_(c,h,w) -> (x_(c,h,w) - m_c) / s_c, with m_c and s_c the mean and the standard
  /// deviation (population: divided by the count) of channel c over every pixel of every training
  /// image, as torchvision's Normalize with a dataset's channel statistics. Needs images
  /// (Dataset::image); applied after scale_pixels (which then changes nothing but rounding) and
  /// before row scaling and PCA. Default none.
  Standardization standardize = Standardization::kNone;
  RowScaling row_scaling = RowScaling::kNone;  ///< default none
  Index pca_components = 0;                    ///< 0 = no PCA (default); else 1..d
  /// Order as in the FIL paper's scripts: pixels -> (standardisation) -> row scaling -> PCA
  /// (centred on the training mean). When `scale_after_pca` the row scaling is applied after PCA
  /// instead.
  bool scale_after_pca = false;
  /// Throws std::invalid_argument naming the field, value and rule (pca_components >= 0, a
  /// known row_scaling and standardize). The bound pca_components <= d and the images that
  /// standardisation needs are checked by Preprocessor::fit.
  void validate() const;
};

/// The help of standardize, for every front end that binds it.
inline constexpr const char* kStandardizeHelp =
    "Images: none, or channel (subtract each channel's training mean and divide by its training standard "
    "deviation, after the pixel scaling)";

/// The fields of PreprocessOptions by their Python keyword names (filkit.preprocess).
template <class Visit>
void visit_fields(PreprocessOptions& o, Visit&& visit) {
  visit("scale_pixels", o.scale_pixels, "Divide pixels by 255");
  visit("standardize", o.standardize, kStandardizeHelp);
  visit("row_scaling", o.row_scaling, "none, global-max or unit-ball");
  visit("pca", o.pca_components, "PCA to this many dimensions fitted on the training split; 0 = none");
  visit("scale_after_pca", o.scale_after_pca, "Apply the row scaling after PCA instead of before");
}

/// The fitted preprocessing: statistics of the training split, applied identically to test.
///
/// PCA: with the training rows x_i (after the steps before PCA) and their mean m, the
/// covariance C = sum_i (x_i - m)(x_i - m)^T / (n - 1) is diagonalised; the components are the
/// eigenvectors of the k largest eigenvalues (the explained variances), each signed so that
/// its largest-magnitude entry is positive. A row x becomes W^T (x - m).
struct Preprocessor {
  PreprocessOptions options;
  Index input_dimension = 0;              ///< d of the data it was fitted on; apply() requires the same
  std::optional<ImageShape> input_image;  ///< the image shape of the data it was fitted on, if any
  VectorXd channel_means;                 ///< C, standardize = channel: m_c (after pixel scaling)
  VectorXd channel_stds;                  ///< C, standardize = channel: s_c (> 0)
  double global_max_norm = 1.0;           ///< the training split's largest row norm (global-max)
  VectorXd pca_mean;                      ///< d
  MatrixXd pca_components;                ///< d x k, orthonormal columns, by decreasing variance
  VectorXd pca_variances;                 ///< k explained variances
  double pca_total_variance = 0.0;        ///< trace of C: all d variances, for explained ratios

  /// Bitwise identical for any number of OpenMP threads, as is apply(). Throws
  /// std::invalid_argument for invalid options, pca_components > d, fewer than 2 rows for PCA,
  /// all-zero training rows with global-max scaling, or, with standardize = channel, data without
  /// an image shape or a channel that is constant over the training images (s_c = 0). The channel
  /// statistics are summed without overflow for any values loaders accept (kMaxInputMagnitude).
  /// On several ranks `train` is this rank's shard and every statistic is that of all shards:
  /// a collective call, made by every rank of `comm`.
  static Preprocessor fit(const Dataset& train, const PreprocessOptions& options,
                          const Communicator& comm = Communicator::local());
  /// The data transformed with the fitted statistics; after PCA, feature_names become
  /// "pc1".."pck" and the column map and image shape are cleared (the other steps keep them).
  /// Throws std::invalid_argument if the data's dimension differs from input_dimension, or, when
  /// standardising, its image shape from input_image (an empty dataset is accepted as it is).
  Dataset apply(const Dataset& data) const;
  Index output_dimension() const;
  /// The settings and fitted scalars (not the components): every option, the effective order
  /// of the steps, input/output dimension and image shape ([C, H, W] or null), the channel means
  /// and standard deviations, global_max_norm, PCA variances and total variance.
  nlohmann::json to_json() const;
};

namespace detail {

/// The kernels of the PCA fit, exposed so that tests and benchmarks can run each path.
/// kAvx512Float sums pixels (every value an integer in 0..255) exactly in single precision.
enum class GramKernel { kAuto, kEigen, kAvx2, kAvx512, kAvx512Float };
enum class EigenSolver { kAuto, kDense, kSpectra };
/// sum_i (x_i - mean)(x_i - mean)^T / (n - 1) over the rows of X (n >= 2), both triangles.
/// kAuto takes the fastest kernel the CPU runs and the data allow (AVX-512 in single precision
/// for pixels, AVX-512, AVX2+FMA, else Eigen's rank update); kAvx512Float on other data falls
/// back to kAvx512, and a kernel the CPU lacks to kEigen.
MatrixXd covariance(const RowMatrix& X, const VectorXd& mean, GramKernel kernel = GramKernel::kAuto);
/// The k largest eigenpairs of the symmetric C (only its upper triangle is read), by decreasing
/// eigenvalue, signs as the solver leaves them. kAuto: Spectra's Lanczos when d >= 128 and
/// k <= d/2, else the dense solver; kSpectra asks for Lanczos whenever k < d. A Lanczos run that
/// does not converge falls back to the dense solver, whose failure throws std::runtime_error.
void top_eigenpairs(const MatrixXd& C, Index k, EigenSolver solver, MatrixXd& vectors, VectorXd& values);

}  // namespace detail

/// Fits on `split.train`, applies to both parts.
DatasetSplit preprocess(const DatasetSplit& split, const PreprocessOptions& options, Preprocessor* fitted = nullptr,
                        const Communicator& comm = Communicator::local());

}  // namespace filkit
