#include "filkit/data/preprocessing.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/communicator.hpp"

#include "base/parallel_blocks.hpp"
#include "base/parsing.hpp"
#include "data/covariance_kernels.hpp"

#include <Spectra/MatOp/DenseSymMatProd.h>
#include <Spectra/SymEigsSolver.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace filkit {

namespace {

// ||row||, without overflow or underflow: the plain norm, or Eigen's stableNorm (scaled sums)
// when the squares overflow (values near 1e200 have squares beyond a double's range: the norm
// would be Inf, and the rows divided by it all zeros) or underflow. Both are rare, so the common
// path keeps the plain norm's speed.
template <class Row>
double row_norm(const Row& row) {
  const double norm = row.norm();
  if (std::isfinite(norm) && norm > 1e-150) return norm;
  return row.stableNorm();
}

double max_row_norm(const RowMatrix& X) {
  double largest = 0.0;
  for (Index i = 0; i < X.rows(); ++i) largest = std::max(largest, row_norm(X.row(i)));
  return largest;
}

void scale_rows(RowMatrix& X, const Preprocessor& fitted) {
  switch (fitted.options.row_scaling) {
    case RowScaling::kNone: return;
    case RowScaling::kGlobalMax: X /= fitted.global_max_norm; return;
    case RowScaling::kUnitBall:
      for (Index i = 0; i < X.rows(); ++i) {
        const double norm = row_norm(X.row(i));
        if (norm > 1.0) X.row(i) /= norm;
      }
      return;
  }
}

void check_global_max_norm(const Preprocessor& fitted) {
  if (!(fitted.global_max_norm > 0.0)) {
    throw DataError(
        "row_scaling = global-max needs a nonzero training row; every "
        "training row has norm 0");
  }
}

void fit_row_scaling(const RowMatrix& X, Preprocessor& fitted, const Communicator& comm) {
  if (fitted.options.row_scaling != RowScaling::kGlobalMax) return;
  fitted.global_max_norm = comm.max(max_row_norm(X));
  check_global_max_norm(fitted);
}

// Flips each column so that its largest-magnitude entry is positive: eigenvectors are defined
// up to sign only, and a fixed sign keeps results comparable across runs and libraries.
void fix_signs(MatrixXd& components) {
  for (Index c = 0; c < components.cols(); ++c) {
    Index largest;
    components.col(c).cwiseAbs().maxCoeff(&largest);
    if (components(largest, c) < 0) components.col(c) *= -1.0;
  }
}

using detail::kBlockRows;  // every pass goes a block of rows at a time (covariance_kernels.hpp)
// Below this many entries a pass is too short to be worth waking a second thread.
constexpr Index kParallelEntries = Index{1} << 18;

Index block_count(Index n) { return (n + kBlockRows - 1) / kBlockRows; }

int pass_threads(Index n, Index d) { return n * d >= kParallelEntries ? std::max(1, omp_get_max_threads()) : 1; }

bool standardized(const PreprocessOptions& options) { return options.standardize == Standardization::kChannel; }

// x -> (x - m_c) / s_c on the pixels of each channel c of the rows of X (already pixel-scaled).
void standardize_channels(RowMatrix& X, const Preprocessor& fitted) {
  if (!standardized(fitted.options)) return;
  const Index channels = fitted.channel_means.size(), plane = X.cols() / channels;
  for (Index c = 0; c < channels; ++c) {
    auto pixels = X.middleCols(c * plane, plane).array();
    pixels = (pixels - fitted.channel_means(c)) / fitted.channel_stds(c);
  }
}

// PCA sees the rows after pixel scaling, standardisation and, unless it follows PCA, row
// scaling. Except with standardisation or unit-ball scaling, those steps multiply every raw row
// by one factor f, so the passes of the fit read the raw rows ("unscaled rows" u_i) and apply f
// to their results (mean, covariance) rather than to every pixel in every pass. Otherwise u_i
// are computed a block at a time: the standardised pixels (then f is global-max's factor, if
// any), or PCA's rows themselves after unit-ball scaling (f = 1).
bool unit_ball_before_pca(const PreprocessOptions& options) {
  return !options.scale_after_pca && options.row_scaling == RowScaling::kUnitBall;
}

bool global_max_before_pca(const PreprocessOptions& options) {
  return !options.scale_after_pca && options.row_scaling == RowScaling::kGlobalMax;
}

bool rows_computed_before_pca(const PreprocessOptions& options) {
  return unit_ball_before_pca(options) || standardized(options);
}

// 255 when the unscaled rows are raw pixels that the pixel scaling divides, else 1.
double unscaled_pixel_divisor(const PreprocessOptions& options) {
  return options.scale_pixels && !rows_computed_before_pca(options) ? 255.0 : 1.0;
}

// Rows [start, start + count) of the unscaled rows: a view of `raw`, or computed in `scratch`.
Eigen::Ref<const RowMatrix> unscaled_rows(const RowMatrix& raw, Index start, Index count, const Preprocessor& fitted,
                                          RowMatrix& scratch) {
  const PreprocessOptions& options = fitted.options;
  if (!rows_computed_before_pca(options)) return raw.middleRows(start, count);
  scratch = raw.middleRows(start, count);
  if (options.scale_pixels) scratch /= 255.0;
  standardize_channels(scratch, fitted);
  if (unit_ball_before_pca(options)) {
    for (Index i = 0; i < scratch.rows(); ++i) {
      const double norm = row_norm(scratch.row(i));
      if (norm > 1.0) scratch.row(i) /= norm;
    }
  }
  return scratch;
}

// f: PCA's rows are f u_i (global_max_norm must be fitted already).
double pca_input_factor(const Preprocessor& fitted) {
  if (unit_ball_before_pca(fitted.options)) return 1.0;
  return 1.0 / (unscaled_pixel_divisor(fitted.options) *
                (global_max_before_pca(fitted.options) ? fitted.global_max_norm : 1.0));
}

// Whether every value is an integer in 0..255 (pixels): their covariance can be summed exactly
// in single precision (see gram_avx512_f32). Eigen's reductions, row by row, vectorise.
bool small_integers(const Eigen::Ref<const RowMatrix>& rows) {
  for (Index i = 0; i < rows.rows(); ++i) {
    const auto row = rows.row(i).array();
    // x + 2^52 - 2^52 is x rounded to an integer, for |x| < 2^51.
    if (!(row.minCoeff() >= 0.0 && row.maxCoeff() <= 255.0 &&
          ((row + 0x1p52) - 0x1p52 - row).abs().maxCoeff() == 0.0)) {
      return false;
    }
  }
  return true;
}

// Column sums and the largest row norm of the unscaled rows, and whether they are all small
// integers, in one pass. The sums of fixed runs of rows are added in row order, so the result
// is the same for any thread count (base/parallel_blocks.hpp).
struct RowStats {
  VectorXd sum;
  double max_norm = 0.0;
  bool small_integers = true;
};

// Rows a partial sum of a pass covers (kChunkBlocks blocks): the partial sums are added
// serially, in order, so a chunk must be long against that d^2 (covariance) addition; 12000
// rows still make six chunks for the threads.
constexpr Index kChunkBlocks = 16;
constexpr Index kChunkRows = kChunkBlocks * kBlockRows;

RowStats unscaled_row_stats(const RowMatrix& raw, const Preprocessor& fitted, const Communicator& comm) {
  RowStats total{VectorXd::Zero(raw.cols()), 0.0, true};
  const auto add_chunk = [&, scratch = RowMatrix()](RowStats& stats, Index first, Index rows_in_chunk) mutable {
    for (Index start = first; start < first + rows_in_chunk; start += kBlockRows) {
      const auto rows = unscaled_rows(raw, start, std::min(kBlockRows, first + rows_in_chunk - start), fitted, scratch);
      for (Index i = 0; i < rows.rows(); ++i) {  // row by row: contiguous, vectorised
        stats.sum += rows.row(i).transpose();
        stats.max_norm = std::max(stats.max_norm, row_norm(rows.row(i)));
      }
      if (stats.small_integers) stats.small_integers = small_integers(rows);
    }
  };
  const auto merge = [&total](const RowStats& stats) {
    total.sum += stats.sum;
    total.max_norm = std::max(total.max_norm, stats.max_norm);
    total.small_integers = total.small_integers && stats.small_integers;
  };
  detail::reduce_blocks_in_order(raw.rows(), kChunkRows, total, add_chunk, merge,
                                 pass_threads(raw.rows(), raw.cols()) > 1);
  comm.sum(total.sum);  // the other shards' rows
  total.max_norm = comm.max(total.max_norm);
  total.small_integers = comm.all(total.small_integers);
  return total;
}

// m_c and s_c of standardize = channel over the training pixels (after pixel scaling), in two
// passes: the sums and largest magnitudes, then the squared deviations from m_c, each scaled by a
// power of two (exact) that brings the largest possible deviation below 1, so that the squares of
// values up to kMaxInputMagnitude neither overflow nor lose the small ones. Blocks of rows are
// added in order: the statistics are the same for any thread count.
void fit_channel_statistics(const Dataset& train, Preprocessor& fitted, const Communicator& comm) {
  const Index channels = train.image->channels, plane = train.image->height * train.image->width, n = train.n();
  const Index all_rows = comm.sum(n);
  const double pixel = fitted.options.scale_pixels ? 255.0 : 1.0;
  const double count = static_cast<double>(all_rows) * static_cast<double>(plane);
  const bool parallel = pass_threads(n, train.d()) > 1;
  const auto pixels = [&](Index first, Index rows, Index c) {
    return train.X.block(first, c * plane, rows, plane).array() / pixel;
  };
  struct Sums {
    VectorXd sum, largest;
  };
  Sums first_pass{VectorXd::Zero(channels), VectorXd::Zero(channels)};
  detail::reduce_blocks_in_order(
      n, kChunkRows, first_pass,
      [&](Sums& partial, Index first, Index rows) {
        for (Index c = 0; c < channels; ++c) {
          partial.sum(c) += pixels(first, rows, c).sum();
          partial.largest(c) = std::max(partial.largest(c), pixels(first, rows, c).abs().maxCoeff());
        }
      },
      [&](const Sums& partial) {
        first_pass.sum += partial.sum;
        first_pass.largest = first_pass.largest.cwiseMax(partial.largest);
      },
      parallel);
  comm.sum(first_pass.sum);
  for (Index c = 0; c < channels; ++c) first_pass.largest(c) = comm.max(first_pass.largest(c));
  const VectorXd mean = first_pass.sum / count;
  VectorXd shrink(channels);  // |x - m_c| <= 2 max |x|
  for (Index c = 0; c < channels; ++c) {
    int exponent = 0;
    std::frexp(2.0 * first_pass.largest(c), &exponent);
    shrink(c) = std::ldexp(1.0, -exponent);
  }
  VectorXd squares = VectorXd::Zero(channels);
  detail::reduce_blocks_in_order(
      n, kChunkRows, squares,
      [&](VectorXd& partial, Index first, Index rows) {
        for (Index c = 0; c < channels; ++c)
          partial(c) += ((pixels(first, rows, c) - mean(c)) * shrink(c)).square().sum();
      },
      [&](const VectorXd& partial) { squares += partial; }, parallel);
  comm.sum(squares);
  fitted.channel_means = mean;
  fitted.channel_stds = (squares / count).cwiseSqrt().cwiseQuotient(shrink);
  for (Index c = 0; c < channels; ++c) {
    if (!(fitted.channel_stds(c) > 0.0)) {
      throw DataError("standardize = channel: channel " + std::to_string(c) + " of the training images of " +
                      train.source + " is constant (every pixel " + detail::format_number(mean(c)) +
                      "), so its standard deviation is 0 and cannot divide");
    }
  }
}

// After standardisation every value must stay loadable: a test pixel far from a nearly constant
// training channel, divided by its tiny s_c, could overflow.
void check_standardized(const Dataset& out, const Preprocessor& fitted) {
  if (!standardized(fitted.options) || (out.X.array().abs() <= kMaxInputMagnitude).all()) return;
  for (Index i = 0; i < out.n(); ++i) {
    for (Index j = 0; j < out.d(); ++j) {
      if (std::abs(out.X(i, j)) <= kMaxInputMagnitude) continue;
      throw DataError("standardize = channel: " + out.source + ", row " + std::to_string(i) + ", column " +
                      std::to_string(j) + " " + input_value_problem(out.X(i, j)) +
                      " after standardisation (its channel's training standard deviation is tiny)");
    }
  }
}

// sum_i (u_i - mean)(u_i - mean)^T / (n - 1) over the rows u_i that rows(start, count, scratch)
// returns, in the upper triangle only; `small_integers` says whether every u_i is an integer
// in 0..255. Chunks of kChunkRows rows are summed in parallel and their sums added in row
// order, so the result does not depend on the thread count. The exact single-precision kernel
// centres on the rounded mean c instead, and
// sum (u - m)(u - m)^T = sum (u - c)(u - c)^T - n (m - c)(m - c)^T.
// On several ranks n is this rank's rows, `all_rows` everyone's, `mean` theirs; the sums of the
// ranks are added before the correction.
template <class Rows>
MatrixXd covariance_upper(Index n, Index d, const VectorXd& mean, bool small_integers, const Rows& rows,
                          detail::GramKernel kernel, Index all_rows, const Communicator& comm) {
  kernel = detail::resolve_gram_kernel(kernel, small_integers);
  const VectorXd centre = kernel == detail::GramKernel::kAvx512Float ? VectorXd(mean.array().round()) : mean;
  MatrixXd C = MatrixXd::Zero(d, d);
  detail::reduce_blocks_in_order(
      n, kChunkRows, C,
      [&, work = detail::GramWorkspace()](MatrixXd& partial, Index first, Index rows_in_chunk) mutable {
        for (Index start = first; start < first + rows_in_chunk; start += kBlockRows)
          detail::add_shifted_gram(rows(start, std::min(kBlockRows, first + rows_in_chunk - start), work.scratch),
                                   centre, kernel, work, partial);
      },
      [&C](const MatrixXd& partial) { C.triangularView<Eigen::Upper>() += partial; },
      pass_threads(n, d * d / 64 + 1) > 1);  // the work grows with n d^2
  comm.sum(C);
  if (kernel == detail::GramKernel::kAvx512Float) {
    C.selfadjointView<Eigen::Upper>().rankUpdate(mean - centre, -static_cast<double>(all_rows));
  }
  return C / static_cast<double>(all_rows - 1);
}

// The k largest eigenpairs of the symmetric C (upper triangle read), by decreasing eigenvalue,
// through Spectra's restarted Lanczos; false if it does not converge.
bool top_eigenpairs_spectra(const MatrixXd& C_upper, Index k, MatrixXd& vectors, VectorXd& values) {
  const Index d = C_upper.rows();
  // Spectra's convergence test has an absolute floor (eps^(2/3)), so solve on C scaled by a
  // power of two (exact) that brings its largest diagonal entry near 1.
  const double largest = C_upper.diagonal().maxCoeff();
  if (!(largest > 0.0) || !std::isfinite(largest)) return false;
  int exponent = 0;
  std::frexp(largest, &exponent);
  const MatrixXd scaled = std::ldexp(1.0, -exponent) * C_upper;
  Spectra::DenseSymMatProd<double, Eigen::Upper> op(scaled);
  // 2k + 1 Lanczos vectors (at least k + 20) converge in a few restarts on image spectra.
  const Index ncv = std::min(d, std::max(2 * k + 1, k + 20));
  Spectra::SymEigsSolver<Spectra::DenseSymMatProd<double, Eigen::Upper>> solver(op, k, ncv);
  solver.init();
  constexpr Index kMaxRestarts = 100;
  constexpr double kTolerance = 1e-10;  // Ritz residual <= tol * |eigenvalue|
  const Index converged =
      solver.compute(Spectra::SortRule::LargestAlge, kMaxRestarts, kTolerance, Spectra::SortRule::LargestAlge);
  if (solver.info() != Spectra::CompInfo::Successful || converged < k) return false;
  vectors = solver.eigenvectors();
  values = std::ldexp(1.0, exponent) * solver.eigenvalues();
  return true;
}

void top_eigenpairs_dense(const MatrixXd& C_upper, Index k, MatrixXd& vectors, VectorXd& values) {
  // The dense solver reads the lower triangle.
  const MatrixXd C = C_upper.selfadjointView<Eigen::Upper>();
  const Eigen::SelfAdjointEigenSolver<MatrixXd> eigen(C);
  if (eigen.info() != Eigen::Success) {
    throw NumericalError("PCA: the eigen-decomposition of the training covariance failed");
  }
  // Eigen sorts eigenvalues increasingly; the last k belong to the top components.
  vectors = eigen.eigenvectors().rightCols(k).rowwise().reverse();
  values = eigen.eigenvalues().tail(k).reverse();
}

// Spectra pays off once the dense O(d^3) solve costs more than a few milliseconds and k is a
// small part of d; otherwise (or if Lanczos does not converge) the dense solver does it.
constexpr Index kSpectraMinDimension = 128;

// Rows whose norms pass this have squares whose sums could overflow (a norm of 1e150 squares to
// 1e300): their covariance is summed over the rows shrunk by a power of two.
constexpr double kLargeRowNorm = 1e100;

// 2^-e bringing the largest row norm near 1 when it is large, else 1 (multiplying by it is exact).
double covariance_shrink(double max_norm) {
  if (!(max_norm > kLargeRowNorm) || !std::isfinite(max_norm)) return 1.0;
  int exponent = 0;
  std::frexp(max_norm, &exponent);
  return std::ldexp(1.0, -exponent);
}

// PCA of the rows f u_i: mean f m and covariance f^2 C_u from the unscaled rows' mean m and
// covariance C_u (see pca_input_factor); C_u is summed over s u_i and rescaled by (f / s)^2, so
// that rows near 1e150 do not overflow it.
void fit_pca(const RowMatrix& raw, const RowStats& stats, Preprocessor& fitted, const Communicator& comm) {
  const Index k = fitted.options.pca_components, n = comm.sum(raw.rows()), d = raw.cols();
  const double factor = pca_input_factor(fitted);
  const double shrink = covariance_shrink(stats.max_norm);
  const VectorXd unscaled_mean = stats.sum / static_cast<double>(n);
  fitted.pca_mean = factor * unscaled_mean;
  MatrixXd covariance = covariance_upper(
      raw.rows(), d, shrink * unscaled_mean, stats.small_integers,
      [&](Index start, Index count, RowMatrix& scratch) -> Eigen::Ref<const RowMatrix> {
        const Eigen::Ref<const RowMatrix> rows = unscaled_rows(raw, start, count, fitted, scratch);
        if (shrink == 1.0) return rows;
        scratch = shrink * rows;
        return scratch;
      },
      detail::GramKernel::kAuto, n, comm);
  covariance *= (factor / shrink) * (factor / shrink);
  if (!covariance.allFinite()) {
    throw NumericalError(
        "PCA: the covariance of the training rows is beyond the range of a double; rescale "
        "the data (e.g. row scaling global-max before PCA)");
  }
  detail::top_eigenpairs(covariance, k, detail::EigenSolver::kAuto, fitted.pca_components, fitted.pca_variances);
  // Rounding can leave tiny negative eigenvalues of a singular covariance: variances of zero.
  fitted.pca_variances = fitted.pca_variances.cwiseMax(0.0);
  fitted.pca_total_variance = covariance.trace();
  fix_signs(fitted.pca_components);
  // Every rank has the same covariance; rank 0's components are taken by all, so that ranks on
  // different processors cannot disagree in the last bit.
  comm.broadcast(fitted.pca_components);
  comm.broadcast(fitted.pca_variances);
}

// The components for the projection kernel: row-major, zero columns up to a multiple of 8.
struct Projection {
  bool avx512 = detail::has_avx512();
  RowMatrix padded_components;
  explicit Projection(const MatrixXd& components) {
    if (!avx512) return;
    padded_components = RowMatrix::Zero(components.rows(), (components.cols() + 7) / 8 * 8);
    padded_components.leftCols(components.cols()) = components;
  }
};

// The rows projected on the fitted components (before any row scaling after PCA).
void projected_rows(const RowMatrix& raw, Index start, Index count, const Preprocessor& fitted,
                    const Projection& projection, RowMatrix& scratch, Eigen::Ref<RowMatrix> out) {
  if (rows_computed_before_pca(fitted.options)) {
    unscaled_rows(raw, start, count, fitted, scratch);  // into scratch
    if (const double factor = pca_input_factor(fitted); factor != 1.0) scratch *= factor;
    scratch.rowwise() -= fitted.pca_mean.transpose();
  } else {
    scratch.noalias() =
        (pca_input_factor(fitted) * raw.middleRows(start, count)).rowwise() - fitted.pca_mean.transpose();
  }
  if (projection.avx512) {
    detail::project_avx512(scratch.data(), count, scratch.cols(), projection.padded_components.data(),
                           projection.padded_components.cols(), out.cols(), out.data(), out.outerStride());
    return;
  }
  out.noalias() = scratch * fitted.pca_components;
}

// The rows of `raw` through every fitted step but a row scaling that follows PCA: the PCA
// output (n x k), projected a block at a time, or else the scaled copy.
RowMatrix transform_until_final_scaling(const RowMatrix& raw, const Preprocessor& fitted) {
  if (fitted.options.pca_components == 0) {
    RowMatrix X = raw;
    if (fitted.options.scale_pixels) X /= 255.0;
    standardize_channels(X, fitted);
    if (!fitted.options.scale_after_pca) scale_rows(X, fitted);
    return X;
  }
  RowMatrix out(raw.rows(), fitted.options.pca_components);
  const Projection projection(fitted.pca_components);
#pragma omp parallel num_threads(pass_threads(raw.rows(), raw.cols()))
  {
    RowMatrix scratch;
#pragma omp for schedule(static)
    for (Index b = 0; b < block_count(raw.rows()); ++b) {
      const Index start = b * kBlockRows, count = std::min(kBlockRows, raw.rows() - start);
      projected_rows(raw, start, count, fitted, projection, scratch, out.middleRows(start, count));
    }
  }
  return out;
}

void check_fit_input(const Dataset& train, const PreprocessOptions& options, Index all_rows) {
  const Index k = options.pca_components;
  if (k > train.d()) {
    option_error("pca", std::to_string(k),
                 "must be in 1.." + std::to_string(train.d()) + " (the data's dimension), or 0 for no PCA");
  }
  if (k > 0 && all_rows < 2) {
    throw DataError("PCA needs at least 2 training rows, found " + std::to_string(all_rows));
  }
  if (all_rows == 0) throw DataError("cannot fit preprocessing on 0 training rows");
  if (standardized(options) && !train.image) {
    option_error(
        "standardize", "channel",
        "needs images, but " + train.source + " has no image shape (a table, or images flattened by an earlier PCA)");
  }
}

std::vector<std::string> step_order(const PreprocessOptions& options) {
  std::vector<std::string> steps;
  if (options.scale_pixels) steps.push_back("scale_pixels");
  if (standardized(options)) steps.push_back("standardize");
  const bool scaling = options.row_scaling != RowScaling::kNone;
  const bool pca = options.pca_components > 0;
  if (scaling && !options.scale_after_pca) steps.push_back("row_scaling");
  if (pca) steps.push_back("pca");
  if (scaling && options.scale_after_pca) steps.push_back("row_scaling");
  return steps;
}

}  // namespace

void PreprocessOptions::validate() const {
  require_non_negative("pca", pca_components);
  if (row_scaling != RowScaling::kNone && row_scaling != RowScaling::kGlobalMax && row_scaling != RowScaling::kUnitBall)
    option_error("row_scaling", std::to_string(static_cast<int>(row_scaling)), "is not a RowScaling value");
  if (standardize != Standardization::kNone && standardize != Standardization::kChannel)
    option_error("standardize", std::to_string(static_cast<int>(standardize)), "is not a Standardization value");
}

Preprocessor Preprocessor::fit(const Dataset& train, const PreprocessOptions& options, const Communicator& comm) {
  options.validate();
  check_fit_input(train, options, comm.sum(train.n()));
  Preprocessor fitted;
  fitted.options = options;
  fitted.input_dimension = train.d();
  fitted.input_image = train.image;
  if (standardized(options)) fit_channel_statistics(train, fitted, comm);
  // Each step reads the raw rows and redoes the cheap earlier steps a block at a time (see
  // kBlockRows) instead of keeping scaled copies of the data.
  if (global_max_before_pca(options) || options.pca_components > 0) {
    const RowStats stats = unscaled_row_stats(train.X, fitted, comm);
    if (global_max_before_pca(options)) {
      // The largest norm of the rows PCA sees, e.g. the norm of a raw row over 255.
      fitted.global_max_norm = stats.max_norm / unscaled_pixel_divisor(options);
      check_global_max_norm(fitted);
    }
    if (options.pca_components > 0) fit_pca(train.X, stats, fitted, comm);
  }
  if (options.scale_after_pca) fit_row_scaling(transform_until_final_scaling(train.X, fitted), fitted, comm);
  return fitted;
}

Index Preprocessor::output_dimension() const {
  return options.pca_components > 0 ? options.pca_components : input_dimension;
}

Dataset Preprocessor::apply(const Dataset& data) const {
  if (data.n() > 0 && data.d() != input_dimension) {
    throw DataError(data.source + " has " + std::to_string(data.d()) +
                    " columns, but the preprocessing was fitted on " + std::to_string(input_dimension));
  }
  if (data.n() > 0 && standardized(options) && data.image != input_image) {
    throw DataError(data.source + " holds " + (data.image ? "images " + to_string(*data.image) : "no images") +
                    ", but the channel standardisation was fitted on images " + to_string(*input_image));
  }
  // Everything but X is copied; X is computed straight into the result (no n x d copy).
  Dataset out;
  out.y = data.y;
  out.feature_names = data.feature_names;
  out.attributes = data.attributes;
  out.class_names = data.class_names;
  out.source = data.source;
  out.dropped_rows = data.dropped_rows;
  out.unseen_level_rows = data.unseen_level_rows;
  out.image = data.image;
  if (data.n() == 0) {
    out.X.resize(0, output_dimension());
  } else {
    out.X = transform_until_final_scaling(data.X, *this);
    if (options.scale_after_pca) scale_rows(out.X, *this);
    check_standardized(out, *this);
  }
  if (options.pca_components > 0) {
    out.feature_names.clear();
    for (Index c = 1; c <= options.pca_components; ++c) out.feature_names.push_back("pc" + std::to_string(c));
    out.attributes.clear();
    out.image.reset();
  }
  return out;
}

nlohmann::json Preprocessor::to_json() const {
  const auto image_json = [](const std::optional<ImageShape>& image) {
    return image ? nlohmann::json{image->channels, image->height, image->width} : nlohmann::json(nullptr);
  };
  const std::optional<ImageShape> output_image = options.pca_components > 0 ? std::nullopt : input_image;
  return {
      {"scale_pixels", options.scale_pixels},
      {"standardize", to_string(options.standardize)},
      {"channel_means", std::vector<double>(channel_means.begin(), channel_means.end())},
      {"channel_stds", std::vector<double>(channel_stds.begin(), channel_stds.end())},
      {"row_scaling", to_string(options.row_scaling)},
      {"pca_components", options.pca_components},
      {"scale_after_pca", options.scale_after_pca},
      {"order", step_order(options)},
      {"input_dimension", input_dimension},
      {"output_dimension", output_dimension()},
      {"input_image", image_json(input_image)},
      {"output_image", image_json(output_image)},
      {"global_max_norm", global_max_norm},
      {"pca_variances", std::vector<double>(pca_variances.begin(), pca_variances.end())},
      {"pca_total_variance", pca_total_variance},
  };
}

namespace detail {

MatrixXd covariance(const RowMatrix& X, const VectorXd& mean, GramKernel kernel) {
  if (X.rows() < 2 || mean.size() != X.cols()) {  // the callers check the rows first: a bug
    throw std::logic_error("covariance: needs at least 2 rows and a mean of their width");
  }
  const MatrixXd upper = covariance_upper(
      X.rows(), X.cols(), mean, small_integers(X),
      [&](Index start, Index count, RowMatrix&) -> Eigen::Ref<const RowMatrix> { return X.middleRows(start, count); },
      kernel, X.rows(), Communicator::local());
  return upper.selfadjointView<Eigen::Upper>();
}

void top_eigenpairs(const MatrixXd& C, Index k, EigenSolver solver, MatrixXd& vectors, VectorXd& values) {
  const Index d = C.rows();
  const bool spectra =
      solver == EigenSolver::kSpectra || (solver == EigenSolver::kAuto && d >= kSpectraMinDimension && 2 * k <= d);
  // Spectra needs k < d; a Lanczos run that does not converge falls back to the dense solver.
  if (spectra && k < d && top_eigenpairs_spectra(C, k, vectors, values)) return;
  top_eigenpairs_dense(C, k, vectors, values);
}

}  // namespace detail

DatasetSplit preprocess(const DatasetSplit& split, const PreprocessOptions& options, Preprocessor* fitted,
                        const Communicator& comm) {
  const Preprocessor preprocessor = Preprocessor::fit(split.train, options, comm);
  if (fitted != nullptr) *fitted = preprocessor;
  return {preprocessor.apply(split.train), preprocessor.apply(split.test)};
}

}  // namespace filkit
