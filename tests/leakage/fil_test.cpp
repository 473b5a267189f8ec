#include "filkit/leakage/fil.hpp"

#include "test_util.hpp"

#include <Eigen/SVD>

#include <cmath>
#include <random>

namespace filkit {
namespace {

using testing::random_classification;

FitOptions tight(ModelKind kind, double l2, bool intercept) {
  FitOptions options;
  options.kind = kind;
  options.l2 = l2;
  options.intercept = intercept;
  options.gradient_tolerance = 1e-13;
  return options;
}

// Central differences of the refitted minimiser with respect to feature j of example i.
VectorXd refit_derivative_feature(Dataset data, const FitOptions& options, const VectorXd& omega, Index i, Index j,
                                  double h = 1e-5) {
  const double original = data.X(i, j);
  data.X(i, j) = original + h;
  const VectorXd plus = fit(data, options, omega).flat();
  data.X(i, j) = original - h;
  const VectorXd minus = fit(data, options, omega).flat();
  return (plus - minus) / (2 * h);
}

VectorXd refit_derivative_label(Dataset data, const FitOptions& options, const VectorXd& omega, Index i,
                                double h = 1e-5) {
  const double original = data.y(i);
  data.y(i) = original + h;
  const VectorXd plus = fit(data, options, omega).flat();
  data.y(i) = original - h;
  const VectorXd minus = fit(data, options, omega).flat();
  return (plus - minus) / (2 * h);
}

double largest_singular_value(const MatrixXd& J) { return Eigen::JacobiSVD<MatrixXd>(J).singularValues()(0); }

struct JacobianCase {
  ModelKind kind;
  bool intercept;
  int classes;
};

class JacobianAgainstRefit : public ::testing::TestWithParam<JacobianCase> {};

TEST_P(JacobianAgainstRefit, MatchesCentralFiniteDifferencesOfRefits) {
  const JacobianCase c = GetParam();
  const Dataset data = random_classification(25, 3, c.classes, 20 + c.classes);
  const VectorXd omega = VectorXd::LinSpaced(25, 0.4, 1.6);
  const FitOptions options = tight(c.kind, 5e-2, c.intercept);
  const Model model = fit(data, options, omega);
  const FisherInformationLoss fil(model, data, omega, FilOptions{1.0, LabelPrivacy::kPublic, true});
  for (Index i : {0, 7, 24}) {
    const MatrixXd J = fil.jacobian(i);  // features only
    ASSERT_EQ(J.cols(), 3);
    for (Index j = 0; j < 3; ++j) {
      const VectorXd finite = refit_derivative_feature(data, options, omega, i, j);
      EXPECT_LT((J.col(j) - finite).norm(), 1e-6 * std::max(1e-3, finite.norm()))
          << "example " << i << " feature " << j << "\nanalytic " << J.col(j).transpose() << "\nfinite   "
          << finite.transpose();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, JacobianAgainstRefit,
                         ::testing::Values(JacobianCase{ModelKind::kLeastSquares, false, 2},
                                           JacobianCase{ModelKind::kLeastSquares, true, 2},
                                           JacobianCase{ModelKind::kLogistic, false, 2},
                                           JacobianCase{ModelKind::kLogistic, true, 2},
                                           JacobianCase{ModelKind::kSoftmax, true, 3}));

TEST(Jacobian, LabelColumnMatchesRefitForRegressionAndTheImplicitEquationForLogistic) {
  Dataset data = random_classification(25, 3, 2, 31);
  data.y = data.X.col(0) * 2.0 + data.X.col(1);  // a real-valued target
  FitOptions options = tight(ModelKind::kLeastSquares, 1e-2, true);
  options.regression = true;
  const VectorXd omega = VectorXd::LinSpaced(25, 0.5, 1.5);
  const Model model = fit(data, options, omega);
  const FisherInformationLoss fil(model, data, omega);
  const MatrixXd J = fil.jacobian(5);  // label private: last column is d/dy
  const VectorXd finite = refit_derivative_label(data, options, omega, 5);
  EXPECT_LT((J.col(3) - finite).norm(), 1e-7 * finite.norm());

  // Logistic: labels are discrete, so check H J_y = omega_i x~_i (d grad / dy = -x~) directly.
  const Dataset binary = random_classification(40, 3, 2, 32);
  const VectorXd weights = VectorXd::LinSpaced(40, 0.5, 1.5);
  const Model logistic = fit(binary, tight(ModelKind::kLogistic, 1e-2, true), weights);
  const FisherInformationLoss logistic_fil(logistic, binary, weights);
  VectorXd x(4);
  x << 1.0, binary.X.row(9).transpose();
  EXPECT_LT((logistic_fil.hessian() * logistic_fil.jacobian(9).col(3) - weights(9) * x).norm(), 1e-10);
}

TEST(Jacobian, AWrongModelIsCaughtByTheFiniteDifferenceCheck) {
  // The same comparison with a slightly wrong lambda must fail by far more than the tolerance.
  const Dataset data = random_classification(25, 3, 2, 33);
  const FitOptions options = tight(ModelKind::kLogistic, 5e-2, false);
  Model model = fit(data, options);
  const VectorXd finite = refit_derivative_feature(data, options, VectorXd::Ones(25), 3, 1);
  model.l2 *= 1.1;
  const FisherInformationLoss wrong(model, data, VectorXd(), FilOptions{1.0, LabelPrivacy::kPublic, true});
  EXPECT_GT((wrong.jacobian(3).col(1) - finite).norm(), 1e-3 * finite.norm());
}

struct StructuredCase {
  ModelKind kind;
  bool intercept;
  LabelPrivacy label;
};

class StructuredFil : public ::testing::TestWithParam<StructuredCase> {};

TEST_P(StructuredFil, MatchesTheDenseSvdOfEveryJacobian) {
  const StructuredCase c = GetParam();
  const Dataset data = random_classification(80, 6, 2, 40);
  VectorXd omega = VectorXd::LinSpaced(80, 0.2, 3.0);
  const Model model = fit(data, tight(c.kind, 1e-3, c.intercept), omega);
  const FisherInformationLoss fil(model, data, omega, FilOptions{0.7, c.label, true});
  const PerExampleFil fast = fil.per_example();
  ASSERT_EQ(fast.private_dims, c.label == LabelPrivacy::kPrivate ? 7 : 6);
  for (Index i = 0; i < data.n(); ++i) {
    const MatrixXd J = fil.jacobian(i);
    const double eta = largest_singular_value(J) / 0.7;
    const double dfil = J.norm() / std::sqrt(static_cast<double>(J.cols())) / 0.7;
    EXPECT_NEAR(fast.eta(i), eta, 1e-9 * eta) << "example " << i;
    EXPECT_NEAR(fast.dfil(i), dfil, 1e-10 * dfil) << "example " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BinaryModels, StructuredFil,
                         ::testing::Values(StructuredCase{ModelKind::kLeastSquares, false, LabelPrivacy::kPrivate},
                                           StructuredCase{ModelKind::kLeastSquares, true, LabelPrivacy::kPublic},
                                           StructuredCase{ModelKind::kLogistic, false, LabelPrivacy::kPublic},
                                           StructuredCase{ModelKind::kLogistic, true, LabelPrivacy::kPrivate}));

// The whole p x (n*m) Jacobian and its Fisher matrix, assembled explicitly (tiny problems only).
double explicit_subset_eta(const FisherInformationLoss& fil, const std::vector<Index>& rows,
                           const CoordinateSelection& selection, double sigma) {
  std::vector<MatrixXd> blocks;
  Index columns = 0;
  for (Index i : rows) {
    blocks.push_back(fil.jacobian(i, selection));
    columns += blocks.back().cols();
  }
  MatrixXd J(fil.num_params(), columns);
  Index at = 0;
  for (const MatrixXd& block : blocks) {
    J.middleCols(at, block.cols()) = block;
    at += block.cols();
  }
  const MatrixXd fisher = J.transpose() * J / (sigma * sigma);  // (n m) x (n m)
  return std::sqrt(Eigen::SelfAdjointEigenSolver<MatrixXd>(fisher).eigenvalues().maxCoeff());
}

TEST(SubsetFil, MatchesTheExplicitlyAssembledFisherMatrix) {
  for (ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic, ModelKind::kSoftmax}) {
    SCOPED_TRACE(to_string(kind));
    const Dataset data = random_classification(14, 4, kind == ModelKind::kSoftmax ? 3 : 2, 50);
    const VectorXd omega = VectorXd::LinSpaced(14, 0.5, 2.0);
    const Model model = fit(data, tight(kind, 2e-2, true), omega);
    const double sigma = 0.3;
    const FisherInformationLoss fil(model, data, omega, FilOptions{sigma, LabelPrivacy::kPrivate, true});
    std::vector<Index> all(14), class_one;
    for (Index i = 0; i < 14; ++i) {
      all[static_cast<std::size_t>(i)] = i;
      if (data.y(i) == 1.0) class_one.push_back(i);
    }
    const CoordinateSelection whole = CoordinateSelection::example(LabelPrivacy::kPrivate);
    const CoordinateSelection attribute = CoordinateSelection::columns({1, 2});
    EXPECT_NEAR(fil.subset({}, whole).eta, explicit_subset_eta(fil, all, whole, sigma), 1e-9);
    EXPECT_NEAR(fil.subset(class_one, whole).eta, explicit_subset_eta(fil, class_one, whole, sigma), 1e-9);
    EXPECT_NEAR(fil.subset({}, attribute).eta, explicit_subset_eta(fil, all, attribute, sigma), 1e-9);
    EXPECT_NEAR(fil.subset({4}, attribute).eta, explicit_subset_eta(fil, {4}, attribute, sigma), 1e-9);
    // A single example's whole block equals its per-example FIL; an attribute's per-example FIL
    // equals the subset FIL of that one example.
    EXPECT_NEAR(fil.subset({6}, whole).eta, fil.per_example().eta(6), 1e-9);
    EXPECT_NEAR(fil.per_example_selection(attribute)(4), fil.subset({4}, attribute).eta, 1e-9);
    // dFIL of the whole set is the root mean of the per-example squares.
    const PerExampleFil each = fil.per_example();
    EXPECT_NEAR(fil.subset({}, whole).dfil, std::sqrt(each.dfil.squaredNorm() / 14.0), 1e-10);
  }
}

TEST(FisherInformation, MatchesAMonteCarloEstimateFromTheMechanismsScore) {
  // Score of the Gaussian mechanism w' ~ N(w*(z), sigma^2 I) by central differences of its log
  // density with refitted minimisers: independent of the implicit-function Jacobian.
  const Dataset data = random_classification(8, 2, 2, 60);
  const FitOptions options = tight(ModelKind::kLogistic, 0.1, false);
  const Model model = fit(data, options);
  const double sigma = 0.05, h = 1e-5;
  const Index i = 3;
  std::vector<VectorXd> plus, minus;
  for (Index j = 0; j < 2; ++j) {
    Dataset shifted = data;
    shifted.X(i, j) += h;
    plus.push_back(fit(shifted, options).flat());
    shifted.X(i, j) -= 2 * h;
    minus.push_back(fit(shifted, options).flat());
  }
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  const int samples = 40000;
  Eigen::Matrix2d fisher = Eigen::Matrix2d::Zero();
  for (int s = 0; s < samples; ++s) {
    VectorXd released = model.flat();
    for (Index k = 0; k < released.size(); ++k) released(k) += sigma * normal(rng);
    Eigen::Vector2d score;
    for (Index j = 0; j < 2; ++j) {
      const double log_plus = -(released - plus[j]).squaredNorm() / (2 * sigma * sigma);
      const double log_minus = -(released - minus[j]).squaredNorm() / (2 * sigma * sigma);
      score(j) = (log_plus - log_minus) / (2 * h);
    }
    fisher += score * score.transpose() / samples;
  }
  const FisherInformationLoss fil(model, data, VectorXd(), FilOptions{sigma, LabelPrivacy::kPublic, true});
  const MatrixXd J = fil.jacobian(i);
  const MatrixXd analytic = J.transpose() * J / (sigma * sigma);
  EXPECT_LT((fisher - analytic).norm(), 0.03 * analytic.norm()) << fisher << "\nvs\n" << analytic;
  const double eta_mc = std::sqrt(Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d>(fisher).eigenvalues().maxCoeff());
  EXPECT_NEAR(eta_mc, fil.per_example().eta(i), 0.02 * eta_mc);
}

TEST(Fil, ScalesInverselyWithSigmaAndGivesCramerRaoBounds) {
  const Dataset data = random_classification(50, 4, 2, 70);
  const Model model = fit(data, tight(ModelKind::kLogistic, 1e-2, false));
  const PerExampleFil one = FisherInformationLoss(model, data, VectorXd(), FilOptions{1.0}).per_example();
  const PerExampleFil four = FisherInformationLoss(model, data, VectorXd(), FilOptions{4.0}).per_example();
  EXPECT_LT((one.eta / 4.0 - four.eta).norm(), 1e-12 * one.eta.norm());
  EXPECT_LT((one.attribute_mse_bound().cwiseProduct(one.eta.cwiseAbs2()) - VectorXd::Ones(50)).norm(), 1e-12);
  EXPECT_TRUE((one.example_mse_bound().array() >= one.attribute_mse_bound().array() * (1 - 1e-12)).all())
      << "1/eta_bar^2 >= 1/eta^2 since eta_bar <= eta";
}

TEST(Composition, IndependentReleasesAddTheirFisherInformation) {
  EXPECT_NEAR(composed_sigma({2.0, 2.0, 2.0, 2.0}), 1.0, 1e-15);  // 4 releases: eta doubles
  EXPECT_NEAR(composed_sigma({1.0, 2.0}), 1.0 / std::sqrt(1.25), 1e-15);
  MatrixXd a(2, 2), b(2, 2);
  a << 4, 0, 0, 1;
  b << 1, 0, 0, 4;
  EXPECT_NEAR(composed_fil({a, b}), std::sqrt(5.0), 1e-14);
  EXPECT_LE(composed_fil({a, b}), std::sqrt(4.0 + 4.0));  // <= sqrt(sum eta_k^2)
  EXPECT_THROW(composed_sigma({}), std::invalid_argument);
  EXPECT_THROW(composed_sigma({1.0, 0.0}), std::invalid_argument);
}

TEST(Fil, RejectsASingularHessianAndMismatchedInputs) {
  Dataset data = random_classification(20, 3, 2, 80);
  data.X.col(2) = data.X.col(1);
  Model model = fit(data, tight(ModelKind::kLeastSquares, 1e-2, false));
  model.l2 = 0.0;  // now H = X^T X is singular
  EXPECT_THROW(FisherInformationLoss(model, data), std::runtime_error);
  model.l2 = 1e-2;
  EXPECT_THROW(FisherInformationLoss(model, data, VectorXd::Ones(3)), std::invalid_argument);
  EXPECT_THROW(FisherInformationLoss(model, data, VectorXd(), FilOptions{0.0}), std::invalid_argument);
  const FisherInformationLoss fil(model, data);
  EXPECT_THROW(fil.jacobian(20), std::invalid_argument);
  EXPECT_THROW(fil.per_example_selection(CoordinateSelection::columns({3})), std::invalid_argument);
}

// Everything FIL computes, from a model fitted on the same number of threads (fil.hpp promises
// the same bits on any number): 2500 rows make several blocks of every pass.
struct FilOutcome {
  MatrixXd weights;
  PerExampleFil structured, dense;
  VectorXd attribute_eta;
  SubsetFil all, attribute, some;
};

FilOutcome fil_outcome(const Dataset& data, ModelKind kind) {
  const VectorXd omega = VectorXd::LinSpaced(data.n(), 0.5, 1.5);
  const Model model = fit(data, tight(kind, 1e-3, true), omega);
  const FisherInformationLoss structured(model, data, omega, FilOptions{0.5, LabelPrivacy::kPrivate, true});
  const FisherInformationLoss dense(model, data, omega, FilOptions{0.5, LabelPrivacy::kPrivate, false});
  const CoordinateSelection attribute = CoordinateSelection::columns({1, 2});
  const CoordinateSelection whole = CoordinateSelection::example(LabelPrivacy::kPrivate);
  std::vector<Index> some;
  for (Index i = 0; i < data.n(); i += 3) some.push_back(i);
  return {model.weights,
          structured.per_example(),
          dense.per_example(),
          structured.per_example_selection(attribute),
          structured.subset({}, whole),
          structured.subset({}, attribute),
          structured.subset(some, whole)};
}

void expect_same_subset(const SubsetFil& a, const SubsetFil& b) {
  EXPECT_TRUE(testing::same_bits(a.eta, b.eta));
  EXPECT_TRUE(testing::same_bits(a.dfil, b.dfil));
}

TEST(Fil, EveryQuantityIsBitwiseIdenticalOnAnyNumberOfThreads) {
  for (ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic, ModelKind::kSoftmax}) {
    SCOPED_TRACE(to_string(kind));
    const Dataset data = random_classification(2500, 8, kind == ModelKind::kSoftmax ? 3 : 2, 70);
    testing::expect_same_for_any_thread_count([&] { return fil_outcome(data, kind); },
                                              [](const FilOutcome& a, const FilOutcome& b) {
                                                EXPECT_TRUE(testing::same_bits(a.weights, b.weights));
                                                EXPECT_TRUE(testing::same_bits(a.structured.eta, b.structured.eta));
                                                EXPECT_TRUE(testing::same_bits(a.structured.dfil, b.structured.dfil));
                                                EXPECT_TRUE(testing::same_bits(a.dense.eta, b.dense.eta));
                                                EXPECT_TRUE(testing::same_bits(a.dense.dfil, b.dense.dfil));
                                                EXPECT_TRUE(testing::same_bits(a.attribute_eta, b.attribute_eta));
                                                expect_same_subset(a.all, b.all);
                                                expect_same_subset(a.attribute, b.attribute);
                                                expect_same_subset(a.some, b.some);
                                              });
  }
}

}  // namespace
}  // namespace filkit
