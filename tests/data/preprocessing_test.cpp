// Preprocessing: pixel scaling, per-channel standardisation against a direct computation, row
// scaling (global-max, unit-ball), PCA against an independent SVD, the step order, the JSON
// record, and option validation.
#include "filkit/data/preprocessing.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

namespace filkit {
namespace {

using testing::random_classification;

Dataset scaled_copy(const Dataset& data, double factor) {
  Dataset copy = data;
  copy.X *= factor;
  return copy;
}

PreprocessOptions with_pca(Index k) {
  PreprocessOptions options;
  options.pca_components = k;
  return options;
}

TEST(RowScaling, RoundTripsThroughStrings) {
  for (RowScaling scaling : {RowScaling::kNone, RowScaling::kGlobalMax, RowScaling::kUnitBall}) {
    EXPECT_EQ(parse_enum<RowScaling>(to_string(scaling)), scaling);
  }
  EXPECT_INVALID_ARGUMENT(parse_enum<RowScaling>("max"), "'max'", "none, global-max, unit-ball");
}

TEST(PreprocessOptions, ValidateNamesFieldValueAndRule) {
  EXPECT_INVALID_ARGUMENT(with_pca(-2).validate(), "pca = -2", ">= 0");
  const Dataset data = random_classification(20, 5, 2, 1);
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(data, with_pca(6)), "pca = 6", "1..5");
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(data.select_rows({0}), with_pca(2)), "at least 2");
}

TEST(Preprocessor, ScalesPixelsBy255) {
  Dataset image;
  image.X = RowMatrix{{0, 51, 255}};
  image.y = VectorXd::Zero(1);
  PreprocessOptions options;
  options.scale_pixels = true;
  EXPECT_EQ(Preprocessor::fit(image, options).apply(image).X, (RowMatrix{{0, 0.2, 1}}));
}

TEST(Preprocessor, GlobalMaxGivesTheLargestTrainingRowNormOne) {
  const Dataset train = scaled_copy(random_classification(50, 4, 2, 2), 7.0);
  const Dataset test = scaled_copy(random_classification(10, 4, 2, 3), 7.0);
  PreprocessOptions options;
  options.row_scaling = RowScaling::kGlobalMax;
  Preprocessor fitted;
  const DatasetSplit out = preprocess({train, test}, options, &fitted);
  EXPECT_NEAR(out.train.X.rowwise().norm().maxCoeff(), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(fitted.global_max_norm, train.X.rowwise().norm().maxCoeff());
  // The test split is divided by the training factor, not its own.
  EXPECT_TRUE(out.test.X.isApprox(test.X / fitted.global_max_norm));
}

TEST(Preprocessor, GlobalMaxRejectsAllZeroTrainingRows) {
  Dataset zeros;
  zeros.X = RowMatrix::Zero(3, 2);
  zeros.y = VectorXd::Zero(3);
  PreprocessOptions options;
  options.row_scaling = RowScaling::kGlobalMax;
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(zeros, options), "global-max", "norm 0");
}

TEST(Preprocessor, UnitBallProjectsOnlyRowsOutsideIt) {
  Dataset data;
  data.X = RowMatrix{{3, 4}, {0.3, 0.4}, {0, 0}};
  data.y = VectorXd::Zero(3);
  PreprocessOptions options;
  options.row_scaling = RowScaling::kUnitBall;
  const RowMatrix out = Preprocessor::fit(data, options).apply(data).X;
  EXPECT_TRUE(out.row(0).isApprox(Eigen::RowVector2d(0.6, 0.8)));
  EXPECT_EQ(out.row(1), data.X.row(1));
  EXPECT_EQ(out.row(2), data.X.row(2));
  const Dataset wide = scaled_copy(random_classification(40, 6, 2, 4), 10.0);
  EXPECT_LE(Preprocessor::fit(wide, options).apply(wide).X.rowwise().norm().maxCoeff(), 1.0 + 1e-12);
}

// Top-k variances of the centred data by an independent route: singular values of the data
// itself, never forming the covariance.
VectorXd reference_variances(const RowMatrix& X, Index k) {
  const RowMatrix centred = X.rowwise() - X.colwise().mean();
  const Eigen::JacobiSVD<MatrixXd> svd(centred);
  return svd.singularValues().head(k).array().square() / static_cast<double>(X.rows() - 1);
}

TEST(Pca, ComponentsAreOrthonormalAndVariancesMatchAnSvdOfTheCentredData) {
  Dataset train = random_classification(200, 10, 3, 5);
  for (Index j = 0; j < 10; ++j) train.X.col(j) *= 1.0 + j;  // distinct variances
  train.X.array() += 3.0;                                    // an offset to be centred away
  const Preprocessor fitted = Preprocessor::fit(train, with_pca(4));
  EXPECT_TRUE((fitted.pca_components.transpose() * fitted.pca_components).isIdentity(1e-12));
  EXPECT_TRUE(fitted.pca_variances.isApprox(reference_variances(train.X, 4), 1e-10));
  // The projected training data has exactly those variances, uncorrelated, with mean zero.
  const RowMatrix projected = fitted.apply(train).X;
  const MatrixXd covariance = projected.transpose() * projected / 199.0;
  EXPECT_TRUE(covariance.isApprox(MatrixXd(fitted.pca_variances.asDiagonal()), 1e-10));
  EXPECT_NEAR(projected.colwise().mean().norm(), 0.0, 1e-12);
  EXPECT_NEAR(fitted.pca_total_variance, reference_variances(train.X, 10).sum(), 1e-10);
}

TEST(Pca, SignsMakeTheLargestEntryOfEachComponentPositive) {
  const Preprocessor fitted = Preprocessor::fit(random_classification(100, 6, 2, 6), with_pca(3));
  for (Index c = 0; c < 3; ++c) {
    Index largest;
    fitted.pca_components.col(c).cwiseAbs().maxCoeff(&largest);
    EXPECT_GT(fitted.pca_components(largest, c), 0.0);
  }
}

TEST(Pca, ProjectsTestRowsWithTheTrainingMean) {
  const Dataset train = random_classification(80, 5, 2, 7);
  Dataset test = random_classification(20, 5, 2, 8);
  test.X.array() += 2.0;
  const Preprocessor fitted = Preprocessor::fit(train, with_pca(2));
  const RowMatrix expected = (test.X.rowwise() - train.X.colwise().mean()) * fitted.pca_components;
  const RowMatrix projected = fitted.apply(test).X;
  EXPECT_TRUE(projected.isApprox(expected, 1e-12));
  // The check has teeth: centring on the test split's own mean gives something else.
  const RowMatrix wrong = (test.X.rowwise() - test.X.colwise().mean()) * fitted.pca_components;
  EXPECT_FALSE(projected.isApprox(wrong, 1e-6));
  EXPECT_EQ(fitted.apply(test).feature_names, (std::vector<std::string>{"pc1", "pc2"}));
}

TEST(Preprocessor, ScalesRowsBeforePcaByDefaultAndAfterItOnRequest) {
  const Dataset train = scaled_copy(random_classification(60, 8, 2, 9), 5.0);
  PreprocessOptions options = with_pca(3);
  options.row_scaling = RowScaling::kGlobalMax;
  const Preprocessor before = Preprocessor::fit(train, options);
  EXPECT_DOUBLE_EQ(before.global_max_norm, train.X.rowwise().norm().maxCoeff());
  options.scale_after_pca = true;
  const Preprocessor after = Preprocessor::fit(train, options);
  EXPECT_NEAR(after.apply(train).X.rowwise().norm().maxCoeff(), 1.0, 1e-12);
  EXPECT_EQ(after.to_json()["order"], nlohmann::json({"pca", "row_scaling"}));
}

TEST(Preprocessor, RejectsDataOfAnotherDimensionButAcceptsAnEmptySplit) {
  const Preprocessor fitted = Preprocessor::fit(random_classification(30, 4, 2, 10), with_pca(2));
  EXPECT_INVALID_ARGUMENT(fitted.apply(random_classification(5, 3, 2, 11)), "3 columns", "fitted on 4");
  const Dataset empty = fitted.apply(Dataset());
  EXPECT_EQ(empty.n(), 0);
  EXPECT_EQ(empty.d(), 2);
}

TEST(Preprocessor, ToJsonRecordsEverySettingAndFittedScalar) {
  PreprocessOptions options = with_pca(2);
  options.scale_pixels = true;
  options.row_scaling = RowScaling::kUnitBall;
  const Preprocessor fitted = Preprocessor::fit(random_classification(30, 4, 2, 12), options);
  const nlohmann::json json = fitted.to_json();
  EXPECT_EQ(json["scale_pixels"], true);
  EXPECT_EQ(json["row_scaling"], "unit-ball");
  EXPECT_EQ(json["pca_components"], 2);
  EXPECT_EQ(json["scale_after_pca"], false);
  EXPECT_EQ(json["order"], nlohmann::json({"scale_pixels", "row_scaling", "pca"}));
  EXPECT_EQ(json["input_dimension"], 4);
  EXPECT_EQ(json["output_dimension"], 2);
  EXPECT_EQ(json["pca_variances"].size(), 2u);
  EXPECT_DOUBLE_EQ(json["pca_variances"][0].get<double>(), fitted.pca_variances(0));
  EXPECT_TRUE(json.contains("global_max_norm"));
  EXPECT_TRUE(json.contains("pca_total_variance"));
}

// ---- The fast PCA path (blocked covariance kernels, Spectra's Lanczos) against the dense one -----

// n rows in d dimensions with covariance Q diag(spectrum) Q^T for a random orthogonal Q, plus an
// offset of 3 to be centred away. The sample covariance is then close to, not equal to, that.
RowMatrix data_with_spectrum(Index n, const VectorXd& spectrum, unsigned seed) {
  const Index d = spectrum.size();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  MatrixXd gaussian(d, d);
  for (Index i = 0; i < gaussian.size(); ++i) gaussian.data()[i] = normal(rng);
  const MatrixXd Q = Eigen::HouseholderQR<MatrixXd>(gaussian).householderQ();
  RowMatrix Z(n, d);
  for (Index i = 0; i < Z.size(); ++i) Z.data()[i] = normal(rng);
  const RowMatrix X = Z * spectrum.cwiseSqrt().asDiagonal() * Q.transpose();
  return X.array() + 3.0;
}

// The sample covariance of X with an exactly prescribed spectrum: X is replaced by its centred
// SVD with the singular values set, so that eigenvalue gaps (and near-degeneracies) are exact.
RowMatrix data_with_exact_spectrum(Index n, const VectorXd& spectrum, unsigned seed) {
  const RowMatrix X = data_with_spectrum(n, spectrum, seed);
  const RowMatrix centred = X.rowwise() - X.colwise().mean();
  const Eigen::JacobiSVD<MatrixXd> svd(centred, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const VectorXd singular = (spectrum * static_cast<double>(n - 1)).cwiseSqrt();
  const RowMatrix exact = svd.matrixU() * singular.asDiagonal() * svd.matrixV().transpose();
  return exact.array() + 3.0;
}

struct DensePca {
  MatrixXd components;  // all d, by decreasing eigenvalue, signs fixed as the library does
  VectorXd variances;
};

// The reference: centred covariance, dense eigen-decomposition, largest entry of each vector positive.
DensePca dense_pca(const RowMatrix& X) {
  const RowMatrix centred = X.rowwise() - X.colwise().mean();
  const MatrixXd covariance = centred.transpose() * centred / static_cast<double>(X.rows() - 1);
  const Eigen::SelfAdjointEigenSolver<MatrixXd> eigen(covariance);
  DensePca pca{eigen.eigenvectors().rowwise().reverse(), eigen.eigenvalues().reverse()};
  for (Index c = 0; c < pca.components.cols(); ++c) {
    Index largest;
    pca.components.col(c).cwiseAbs().maxCoeff(&largest);
    if (pca.components(largest, c) < 0) pca.components.col(c) *= -1.0;
  }
  return pca;
}

// The sine of the largest principal angle between the column spans of two orthonormal bases.
double largest_principal_angle(const MatrixXd& A, const MatrixXd& B) {
  const MatrixXd outside = B - A * (A.transpose() * B);
  return Eigen::JacobiSVD<MatrixXd>(outside).singularValues()(0);
}

double max_relative_difference(const VectorXd& a, const VectorXd& b) {
  return ((a - b).array().abs() / b.array().abs()).maxCoeff();
}

VectorXd decaying_spectrum(Index d) {
  VectorXd spectrum(d);
  for (Index j = 0; j < d; ++j) spectrum(j) = std::pow(0.9, static_cast<double>(j));
  return spectrum;
}

TEST(FastPca, MatchesTheDenseDecompositionOnADecayingSpectrum) {
  const Index d = 200, k = 12;  // d >= 128 and k <= d/2: Spectra's path
  Dataset train;
  train.X = data_with_spectrum(1000, decaying_spectrum(d), 21);
  train.y = VectorXd::Zero(train.n());
  const Preprocessor fitted = Preprocessor::fit(train, with_pca(k));
  const DensePca dense = dense_pca(train.X);
  EXPECT_LT(largest_principal_angle(dense.components.leftCols(k), fitted.pca_components), 1e-8);
  EXPECT_LT(max_relative_difference(fitted.pca_variances, dense.variances.head(k)), 1e-10);
  EXPECT_NEAR(fitted.pca_total_variance, dense.variances.sum(), 1e-10 * dense.variances.sum());
  // Same sign convention, so the same components and projected data, not just the same span.
  EXPECT_LT((fitted.pca_components - dense.components.leftCols(k)).cwiseAbs().maxCoeff(), 1e-8);
  const RowMatrix expected = (train.X.rowwise() - train.X.colwise().mean()) * dense.components.leftCols(k);
  const RowMatrix projected = fitted.apply(train).X;
  EXPECT_LT((projected - expected).cwiseAbs().maxCoeff(), 1e-8 * expected.cwiseAbs().maxCoeff());
}

TEST(FastPca, NearDegeneratePairInsideTheTopComponents) {
  const Index d = 160, k = 10;
  VectorXd spectrum = decaying_spectrum(d);
  spectrum(4) = spectrum(3) * (1.0 - 1e-9);  // components 4 and 5 (0-based 3, 4) nearly tie
  Dataset train;
  train.X = data_with_exact_spectrum(800, spectrum, 22);
  train.y = VectorXd::Zero(train.n());
  const Preprocessor fitted = Preprocessor::fit(train, with_pca(k));
  const DensePca dense = dense_pca(train.X);
  // The top-k subspace is well defined (the 10th and 11th eigenvalues are 10% apart) ...
  EXPECT_LT(largest_principal_angle(dense.components.leftCols(k), fitted.pca_components), 1e-8);
  EXPECT_LT(max_relative_difference(fitted.pca_variances, dense.variances.head(k)), 1e-10);
  // ... and so is every component but the tied pair, which is fixed only as a plane.
  for (Index c = 0; c < k; ++c) {
    if (c == 3 || c == 4) continue;
    EXPECT_LT((fitted.pca_components.col(c) - dense.components.col(c)).cwiseAbs().maxCoeff(), 1e-8) << c;
  }
  EXPECT_LT(largest_principal_angle(dense.components.middleCols(3, 2), fitted.pca_components.middleCols(3, 2)), 1e-8);
}

TEST(FastPca, NearDegeneratePairAtTheBoundaryOfTheTopComponents) {
  const Index d = 160, k = 10;
  VectorXd spectrum = decaying_spectrum(d);
  spectrum(k) = spectrum(k - 1) * (1.0 - 1e-9);  // the k-th and (k+1)-th eigenvalues nearly tie
  Dataset train;
  train.X = data_with_exact_spectrum(800, spectrum, 23);
  train.y = VectorXd::Zero(train.n());
  const Preprocessor fitted = Preprocessor::fit(train, with_pca(k));
  const DensePca dense = dense_pca(train.X);
  // Either of the tied directions (or a mix) is a valid k-th component; the variances agree and
  // the first k - 1 components are determined.
  EXPECT_LT(max_relative_difference(fitted.pca_variances, dense.variances.head(k)), 1e-10);
  EXPECT_TRUE((fitted.pca_components.transpose() * fitted.pca_components).isIdentity(1e-12));
  EXPECT_LT(largest_principal_angle(dense.components.leftCols(k - 1), fitted.pca_components.leftCols(k - 1)), 1e-8);
  EXPECT_LT(largest_principal_angle(dense.components.middleCols(k - 1, 2), fitted.pca_components.col(k - 1)), 1e-8);
}

TEST(FastPca, SpectraAndDenseSolversAgreeAndSpectraFallsBackOnAZeroMatrix) {
  const Index d = 150, k = 8;
  const RowMatrix X = data_with_spectrum(600, decaying_spectrum(d), 24);
  const VectorXd mean = X.colwise().mean();
  const MatrixXd C = detail::covariance(X, mean);
  MatrixXd lanczos, dense;
  VectorXd lanczos_values, dense_values;
  detail::top_eigenpairs(C, k, detail::EigenSolver::kSpectra, lanczos, lanczos_values);
  detail::top_eigenpairs(C, k, detail::EigenSolver::kDense, dense, dense_values);
  EXPECT_LT(max_relative_difference(lanczos_values, dense_values), 1e-10);
  for (Index c = 0; c < k; ++c) {  // each vector up to its sign
    EXPECT_NEAR(std::abs(lanczos.col(c).dot(dense.col(c))), 1.0, 1e-12) << c;
  }
  // Lanczos cannot start on a zero matrix; the dense solver answers instead.
  detail::top_eigenpairs(MatrixXd::Zero(d, d), k, detail::EigenSolver::kSpectra, lanczos, lanczos_values);
  EXPECT_EQ(lanczos_values, VectorXd::Zero(k));
  EXPECT_TRUE((lanczos.transpose() * lanczos).isIdentity(1e-12));
}

constexpr detail::GramKernel kEveryKernel[] = {detail::GramKernel::kAuto, detail::GramKernel::kEigen,
                                               detail::GramKernel::kAvx2, detail::GramKernel::kAvx512,
                                               detail::GramKernel::kAvx512Float};

TEST(FastPca, EveryCovarianceKernelMatchesTheCentredProduct) {
  // Widths around the 8- and 16-column panels and the 128-row blocks, and one below a panel.
  for (const auto& [n, d] : std::vector<std::pair<Index, Index>>{{300, 37}, {129, 200}, {50, 5}, {2, 8}}) {
    std::mt19937_64 rng(static_cast<unsigned>(n * d));
    std::normal_distribution<double> normal;
    RowMatrix X(n, d);
    for (Index i = 0; i < X.size(); ++i) X.data()[i] = 5.0 + normal(rng);
    const VectorXd mean = X.colwise().mean();
    const RowMatrix centred = X.rowwise() - mean.transpose();
    const MatrixXd expected = centred.transpose() * centred / static_cast<double>(n - 1);
    for (detail::GramKernel kernel : kEveryKernel) {  // kAvx512Float is not for these: kAvx512
      const MatrixXd C = detail::covariance(X, mean, kernel);
      EXPECT_LT((C - expected).cwiseAbs().maxCoeff(), 1e-13 * expected.cwiseAbs().maxCoeff())
          << "n " << n << ", d " << d << ", kernel " << static_cast<int>(kernel);
      EXPECT_EQ(C, C.transpose());
    }
  }
}

// On pixels (integers 0..255) the single-precision kernel's sums are exact: its covariance is
// the exact one, rounded once or twice.
TEST(FastPca, PixelCovarianceIsExact) {
  for (const auto& [n, d] : std::vector<std::pair<Index, Index>>{{300, 37}, {1000, 200}, {129, 16}}) {
    std::mt19937_64 rng(static_cast<unsigned>(n + d));
    std::uniform_int_distribution<int> pixel(0, 255);
    RowMatrix X(n, d);
    for (Index i = 0; i < X.size(); ++i) X.data()[i] = pixel(rng) * (i % 3 == 0 ? 1 : 0);  // many zeros, like images
    const VectorXd mean = X.colwise().mean();
    // Exact sums of products in integers: sum (x - m)(x - m)^T = sum x x^T - s s^T / n.
    Eigen::MatrixX<long long> products = Eigen::MatrixX<long long>::Zero(d, d);
    Eigen::VectorX<long long> sums = Eigen::VectorX<long long>::Zero(d);
    for (Index i = 0; i < n; ++i) {
      const Eigen::VectorX<long long> x = X.row(i).transpose().cast<long long>();
      products += x * x.transpose();
      sums += x;
    }
    MatrixXd exact(d, d);
    for (Index a = 0; a < d; ++a) {
      for (Index b = 0; b < d; ++b) {
        const long double centred = static_cast<long double>(products(a, b)) -
                                    static_cast<long double>(sums(a)) * static_cast<long double>(sums(b)) / n;
        exact(a, b) = static_cast<double>(centred / (n - 1));
      }
    }
    const double scale = exact.cwiseAbs().maxCoeff();
    for (detail::GramKernel kernel : kEveryKernel) {
      const double tolerance = kernel == detail::GramKernel::kAvx512Float ? 4e-16 : 1e-13;
      const MatrixXd C = detail::covariance(X, mean, kernel);
      EXPECT_LT((C - exact).cwiseAbs().maxCoeff(), tolerance * scale)
          << "n " << n << ", d " << d << ", kernel " << static_cast<int>(kernel);
    }
  }
}

// The projection kernel takes the components 24 at a time and the rows 8 at a time: k and n
// around both.
TEST(FastPca, ProjectionMatchesTheProductForEveryWidth) {
  const Dataset train = random_classification(203, 60, 2, 27);
  const Dataset test = random_classification(13, 60, 2, 28);
  for (Index k : {1, 7, 8, 20, 24, 25, 49, 60}) {
    const Preprocessor fitted = Preprocessor::fit(train, with_pca(k));
    for (const Dataset* data : {&train, &test}) {
      const RowMatrix expected = (data->X.rowwise() - fitted.pca_mean.transpose()) * fitted.pca_components;
      EXPECT_LT((fitted.apply(*data).X - expected).cwiseAbs().maxCoeff(), 1e-14 * expected.cwiseAbs().maxCoeff())
          << "k " << k << ", n " << data->n();
    }
  }
}

// The steps before PCA act on blocks of raw rows, folded into one factor where they are global
// (pixel and global-max scaling): the results equal those of scaling a whole copy first.
TEST(FastPca, ScalingBeforePcaMatchesScalingAWholeCopy) {
  std::mt19937_64 rng(25);
  std::uniform_int_distribution<int> pixel(0, 255);
  Dataset train;
  train.X = data_with_spectrum(700, decaying_spectrum(196), 26).cwiseAbs() * 20.0;
  for (Index i = 0; i < train.X.size(); ++i) train.X.data()[i] = std::min(255.0, std::round(train.X.data()[i]));
  train.y = VectorXd::Zero(train.n());
  for (RowScaling scaling : {RowScaling::kGlobalMax, RowScaling::kUnitBall, RowScaling::kNone}) {
    PreprocessOptions options = with_pca(10);
    options.scale_pixels = true;
    options.row_scaling = scaling;
    const Preprocessor fitted = Preprocessor::fit(train, options);
    RowMatrix scaled = train.X / 255.0;
    if (scaling == RowScaling::kGlobalMax) scaled /= scaled.rowwise().norm().maxCoeff();
    if (scaling == RowScaling::kUnitBall) {
      for (Index i = 0; i < scaled.rows(); ++i) scaled.row(i) /= std::max(1.0, scaled.row(i).norm());
    }
    const DensePca dense = dense_pca(scaled);
    EXPECT_LT(max_relative_difference(fitted.pca_variances, dense.variances.head(10)), 1e-10) << to_string(scaling);
    EXPECT_LT((fitted.pca_components - dense.components.leftCols(10)).cwiseAbs().maxCoeff(), 1e-8)
        << to_string(scaling);
    const RowMatrix expected = (scaled.rowwise() - scaled.colwise().mean()) * dense.components.leftCols(10);
    EXPECT_LT((fitted.apply(train).X - expected).cwiseAbs().maxCoeff(), 1e-8 * expected.cwiseAbs().maxCoeff())
        << to_string(scaling);
  }
}

// Rows near 1e200 have squares beyond a double's range: their norm was Inf and the rows divided by
// it all zeros. The norms are computed with scaled sums, so the scaled rows keep their directions.
TEST(Preprocessor, RowNormsOfHugeAndTinyValuesDoNotOverflowOrVanish) {
  Dataset data;
  data.X = RowMatrix{{3e200, 4e200}, {1e200, 0}, {-3e-200, 4e-200}};
  data.y = Eigen::Vector3d(0, 1, 0);
  PreprocessOptions options;
  options.row_scaling = RowScaling::kGlobalMax;
  const Preprocessor fitted = Preprocessor::fit(data, options);
  EXPECT_NEAR(fitted.global_max_norm / 5e200, 1.0, 1e-15);
  const RowMatrix X = fitted.apply(data).X;
  EXPECT_NEAR(X(0, 0), 0.6, 1e-15);
  EXPECT_NEAR(X(1, 0), 0.2, 1e-15);
  options.row_scaling = RowScaling::kUnitBall;
  const RowMatrix ball = Preprocessor::fit(data, options).apply(data).X;
  EXPECT_NEAR(ball(0, 1), 0.8, 1e-15);
  EXPECT_NEAR(ball(1, 0), 1.0, 1e-15);
  EXPECT_EQ(ball(2, 1), 4e-200);  // inside the ball: unchanged
}

// Rows near 1e140 (within the loaders' bound) have covariances near 1e280, whose sums overflow
// over enough rows: PCA sums them over the rows shrunk by a power of two, and finds what it finds
// on the small rows.
TEST(Preprocessor, PcaOfRowsNear1e140MatchesPcaOfTheSameRowsScaledDown) {
  const Dataset small = random_classification(300, 6, 2, 4);
  const Dataset huge = scaled_copy(small, 1e140);
  PreprocessOptions options = with_pca(3);
  options.row_scaling = RowScaling::kNone;
  const Preprocessor reference = Preprocessor::fit(small, options);
  const Preprocessor fitted = Preprocessor::fit(huge, options);
  ASSERT_TRUE(fitted.pca_components.allFinite());
  EXPECT_LT((fitted.pca_components - reference.pca_components).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_NEAR(fitted.pca_variances(0) / (reference.pca_variances(0) * 1e280), 1.0, 1e-9);
}

// ---- Images: the image shape through the steps, and per-channel standardisation --------------

// n images of 3 x 4 x 5 pixels whose channels have their own offset and spread (like raw RGB).
Dataset colour_images(Index n, unsigned seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Dataset data;
  data.image = ImageShape{3, 4, 5};
  data.X.resize(n, 60);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < 60; ++j) {
      const double channel = static_cast<double>(j / 20);
      data.X(i, j) = scale * ((1.0 + channel) * 30.0 * normal(rng) + 100.0 * channel);
    }
  data.y = VectorXd::Zero(n);
  data.source = "colour_images";
  return data;
}

TEST(Preprocessor, PixelAndRowScalingKeepTheImageShapeAndPcaClearsIt) {
  const Dataset images = colour_images(5, 12);
  PreprocessOptions options;
  options.scale_pixels = true;
  for (RowScaling scaling : {RowScaling::kNone, RowScaling::kGlobalMax, RowScaling::kUnitBall}) {
    options.row_scaling = scaling;
    const Preprocessor fitted = Preprocessor::fit(images, options);
    EXPECT_EQ(fitted.apply(images).image, images.image) << to_string(scaling);
    EXPECT_EQ(fitted.to_json()["input_image"], nlohmann::json({3, 4, 5}));
    EXPECT_EQ(fitted.to_json()["output_image"], nlohmann::json({3, 4, 5}));
  }
  options.pca_components = 2;
  const Preprocessor pca = Preprocessor::fit(images, options);
  EXPECT_FALSE(pca.apply(images).image.has_value());  // PCA's columns are no image
  EXPECT_EQ(pca.to_json()["output_image"], nullptr);
  const nlohmann::json table = Preprocessor::fit(random_classification(10, 3, 2, 1), PreprocessOptions{}).to_json();
  EXPECT_EQ(table["input_image"], nullptr);
}

PreprocessOptions channel_standardization() {
  PreprocessOptions options;
  options.standardize = Standardization::kChannel;
  return options;
}

// Mean and population standard deviation of channel c (columns 20 c .. 20 c + 19), directly.
std::pair<double, double> channel_moments(const RowMatrix& X, Index c) {
  const auto pixels = X.middleCols(20 * c, 20).array();
  const double mean = pixels.mean();
  return {mean, std::sqrt((pixels - mean).square().mean())};
}

TEST(Standardization, RoundTripsThroughStrings) {
  for (Standardization value : {Standardization::kNone, Standardization::kChannel}) {
    EXPECT_EQ(parse_enum<Standardization>(to_string(value)), value);
  }
  EXPECT_INVALID_ARGUMENT(parse_enum<Standardization>("pixel"), "'pixel'", "none, channel");
}

TEST(Standardization, GivesEachTrainingChannelMeanZeroAndStandardDeviationOne) {
  const Dataset train = colour_images(40, 1), test = colour_images(7, 2);
  Preprocessor fitted;
  const DatasetSplit out = preprocess({train, test}, channel_standardization(), &fitted);
  ASSERT_EQ(fitted.channel_means.size(), 3);
  for (Index c = 0; c < 3; ++c) {
    const auto [mean, sd] = channel_moments(train.X, c);
    EXPECT_NEAR(fitted.channel_means(c), mean, 1e-12 * std::abs(mean));
    EXPECT_NEAR(fitted.channel_stds(c), sd, 1e-12 * sd);
    const auto [out_mean, out_sd] = channel_moments(out.train.X, c);
    EXPECT_NEAR(out_mean, 0.0, 1e-12);
    EXPECT_NEAR(out_sd, 1.0, 1e-12);
    // The test split is transformed with the training statistics, not its own.
    const RowMatrix expected = (test.X.middleCols(20 * c, 20).array() - mean) / sd;
    EXPECT_LT((out.test.X.middleCols(20 * c, 20) - expected).cwiseAbs().maxCoeff(), 1e-12);
  }
  EXPECT_GT(std::abs(channel_moments(out.test.X, 2).first), 1e-3);  // a different sample
  EXPECT_EQ(out.train.image, train.image);
  EXPECT_EQ(out.test.image, train.image);
}

TEST(Standardization, FollowsPixelScalingWhoseStatisticsItRecords) {
  const Dataset train = colour_images(30, 3);
  PreprocessOptions options = channel_standardization();
  options.scale_pixels = true;
  const Preprocessor scaled = Preprocessor::fit(train, options);
  const Preprocessor raw = Preprocessor::fit(train, channel_standardization());
  EXPECT_TRUE(scaled.channel_means.isApprox(raw.channel_means / 255.0, 1e-14));
  EXPECT_TRUE(scaled.channel_stds.isApprox(raw.channel_stds / 255.0, 1e-14));
  EXPECT_TRUE(scaled.apply(train).X.isApprox(raw.apply(train).X, 1e-12));
  EXPECT_EQ(scaled.to_json()["order"], nlohmann::json({"scale_pixels", "standardize"}));
}

TEST(Standardization, StatisticsOfHugeValuesDoNotOverflow) {
  // Values near 1e159, beyond what loaders accept (1e150) so that every square overflows here: a
  // plain sum of squared deviations would be Inf. (At 1e150, 2e8 pixels a channel would do it.)
  const Dataset train = colour_images(20, 4, 1e157);
  ASSERT_TRUE(std::isinf(train.X.squaredNorm()));
  const Preprocessor fitted = Preprocessor::fit(train, channel_standardization());
  ASSERT_TRUE(fitted.channel_stds.allFinite());
  const RowMatrix out = fitted.apply(train).X;
  for (Index c = 0; c < 3; ++c) {
    const auto [mean, sd] = channel_moments(train.X / 1e157, c);
    EXPECT_NEAR(fitted.channel_stds(c) / 1e157, sd, 1e-12 * sd);
    EXPECT_NEAR(fitted.channel_means(c) / 1e157, mean, 1e-12 * std::abs(mean));
    EXPECT_NEAR(channel_moments(out, c).second, 1.0, 1e-12);
  }
}

TEST(Standardization, RefusesTablesConstantChannelsAndOtherImageShapes) {
  Dataset table = colour_images(10, 5);
  table.image.reset();
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(table, channel_standardization()), "standardize = channel: needs images",
                          "colour_images", "no image shape");
  Dataset constant = colour_images(10, 6);
  constant.X.middleCols(20, 20).setConstant(7.5);
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(constant, channel_standardization()), "channel 1", "constant", "7.5",
                          "standard deviation is 0");
  const Preprocessor fitted = Preprocessor::fit(colour_images(10, 7), channel_standardization());
  Dataset other = colour_images(2, 8);
  other.image = ImageShape{1, 6, 10};
  EXPECT_INVALID_ARGUMENT(fitted.apply(other), "holds images 1 x 6 x 10", "fitted on images 3 x 4 x 5");
  // A test pixel far from a nearly constant training channel would leave the loadable range.
  Dataset flat = colour_images(10, 9);
  flat.X.middleCols(0, 20).setZero();
  flat.X(0, 0) = 1e-200;
  const Preprocessor tiny = Preprocessor::fit(flat, channel_standardization());
  Dataset far = flat;
  far.X(1, 3) = 1e100;
  EXPECT_INVALID_ARGUMENT(tiny.apply(far), "row 1, column 3", "beyond +-1e150", "standard deviation is tiny");
}

TEST(Standardization, BeforePcaMatchesStandardizingAWholeCopy) {
  const Dataset train = colour_images(200, 10);
  for (RowScaling scaling : {RowScaling::kNone, RowScaling::kGlobalMax, RowScaling::kUnitBall}) {
    for (bool pixels : {false, true}) {
      SCOPED_TRACE(to_string(scaling) + (pixels ? ", pixels / 255" : ""));
      PreprocessOptions options = channel_standardization();
      options.scale_pixels = pixels;
      options.row_scaling = scaling;
      options.pca_components = 5;
      const Preprocessor fitted = Preprocessor::fit(train, options);
      // The same steps on a whole copy, each as its definition says.
      RowMatrix rows = train.X / (pixels ? 255.0 : 1.0);
      for (Index c = 0; c < 3; ++c) {
        const auto [mean, sd] = channel_moments(rows, c);
        rows.middleCols(20 * c, 20) = (rows.middleCols(20 * c, 20).array() - mean) / sd;
      }
      if (scaling == RowScaling::kGlobalMax) rows /= rows.rowwise().norm().maxCoeff();
      if (scaling == RowScaling::kUnitBall)
        for (Index i = 0; i < rows.rows(); ++i) rows.row(i) /= std::max(1.0, rows.row(i).norm());
      const DensePca dense = dense_pca(rows);
      EXPECT_LT(max_relative_difference(fitted.pca_variances, dense.variances.head(5)), 1e-10);
      const RowMatrix expected = (rows.rowwise() - rows.colwise().mean()) * dense.components.leftCols(5);
      const Dataset out = fitted.apply(train);
      EXPECT_LT((out.X - expected).cwiseAbs().maxCoeff(), 1e-8 * expected.cwiseAbs().maxCoeff());
      EXPECT_FALSE(out.image.has_value());  // PCA's columns are no image
    }
  }
}

TEST(Standardization, ToJsonRecordsTheStatistics) {
  PreprocessOptions options = channel_standardization();
  options.row_scaling = RowScaling::kGlobalMax;
  const Preprocessor fitted = Preprocessor::fit(colour_images(12, 11), options);
  const nlohmann::json json = fitted.to_json();
  EXPECT_EQ(json["standardize"], "channel");
  EXPECT_EQ(json["order"], nlohmann::json({"standardize", "row_scaling"}));
  ASSERT_EQ(json["channel_means"].size(), 3u);
  EXPECT_DOUBLE_EQ(json["channel_stds"][2].get<double>(), fitted.channel_stds(2));
  EXPECT_EQ(json["input_image"], nlohmann::json({3, 4, 5}));
  const nlohmann::json table = Preprocessor::fit(random_classification(10, 3, 2, 1), PreprocessOptions{}).to_json();
  EXPECT_EQ(table["standardize"], "none");
  EXPECT_TRUE(table["channel_means"].empty());
}

// ---- The same numbers on any number of threads ----------------------------------------------
// 3000 rows of 150 columns are enough work for the passes to run in parallel, in three chunks.

RowMatrix gaussian_rows(Index n, Index d, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  RowMatrix X(n, d);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = 5.0 + normal(rng) * (1.0 + static_cast<double>(i % d) / 10.0);
  return X;
}

TEST(FastPca, EveryCovarianceKernelIsBitwiseIdenticalOnAnyNumberOfThreads) {
  const RowMatrix X = gaussian_rows(3000, 150, 80);
  const VectorXd mean = X.colwise().mean();
  for (detail::GramKernel kernel : kEveryKernel) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(kernel)));
    testing::expect_same_for_any_thread_count(
        [&] { return detail::covariance(X, mean, kernel); },
        [](const MatrixXd& one, const MatrixXd& more) { EXPECT_TRUE(testing::same_bits(one, more)); });
  }
}

TEST(Preprocessor, FitAndApplyAreBitwiseIdenticalOnAnyNumberOfThreads) {
  Dataset train;
  train.X = gaussian_rows(3000, 150, 81);
  train.y = VectorXd::Zero(3000);
  train.image = ImageShape{6, 5, 5};
  PreprocessOptions before = with_pca(10), unit_ball = with_pca(10), after = with_pca(10), standardized = with_pca(10);
  before.row_scaling = RowScaling::kGlobalMax;
  unit_ball.row_scaling = RowScaling::kUnitBall;  // PCA reads rows rescaled a block at a time
  after.row_scaling = RowScaling::kGlobalMax;
  after.scale_after_pca = true;
  standardized.standardize = Standardization::kChannel;  // and standardised a block at a time
  standardized.row_scaling = RowScaling::kGlobalMax;
  for (const PreprocessOptions& options : {before, unit_ball, after, standardized}) {
    SCOPED_TRACE(to_string(options.row_scaling) + (options.scale_after_pca ? " after PCA" : " before PCA") +
                 (options.standardize == Standardization::kChannel ? ", standardised" : ""));
    testing::expect_same_for_any_thread_count(
        [&] {
          const Preprocessor fitted = Preprocessor::fit(train, options);
          return std::pair(fitted, fitted.apply(train).X);
        },
        [](const auto& one, const auto& more) {
          EXPECT_TRUE(testing::same_bits(one.first.pca_mean, more.first.pca_mean));
          EXPECT_TRUE(testing::same_bits(one.first.pca_components, more.first.pca_components));
          EXPECT_TRUE(testing::same_bits(one.first.pca_variances, more.first.pca_variances));
          EXPECT_TRUE(testing::same_bits(one.first.pca_total_variance, more.first.pca_total_variance));
          EXPECT_TRUE(testing::same_bits(one.first.global_max_norm, more.first.global_max_norm));
          EXPECT_TRUE(testing::same_bits(one.first.channel_means, more.first.channel_means));
          EXPECT_TRUE(testing::same_bits(one.first.channel_stds, more.first.channel_stds));
          EXPECT_TRUE(testing::same_bits(one.second, more.second));
        });
  }
}

}  // namespace
}  // namespace filkit
