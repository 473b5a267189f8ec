// Preprocessing: pixel scaling, row scaling (global-max, unit-ball), PCA against an independent
// SVD, the step order, the JSON record, and option validation.
#include "filkit/data/preprocessing.hpp"

#include "test_util.hpp"

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
  EXPECT_INVALID_ARGUMENT(with_pca(-2).validate(), "pca_components = -2", ">= 0");
  const Dataset data = random_classification(20, 5, 2, 1);
  EXPECT_INVALID_ARGUMENT(Preprocessor::fit(data, with_pca(6)), "pca_components = 6", "1..5");
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

}  // namespace
}  // namespace filkit
