#include "filkit/leakage/bounds.hpp"

#include "expect_invalid_argument.hpp"
#include "test_util.hpp"

#include <Eigen/SVD>

#include <cmath>
#include <limits>
#include <string>

namespace filkit {
namespace {

using testing::random_classification;

Model tight_logistic(const Dataset& data, double l2, bool intercept) {
  FitOptions options;
  options.kind = ModelKind::kLogistic;
  options.l2 = l2;
  options.intercept = intercept;
  options.gradient_tolerance = 1e-13;
  return fit(data, options);
}

TEST(RdpEpsilon, MatchesThePapersBinaryMnistSetting) {
  // n = 12665, lambda = sigma = 1e-2: eps = 4 / 1.2665^2, bound = 1 / (4 (e^eps - 1)).
  const double eps = output_perturbation_rdp_epsilon(12665, 1e-2, 1e-2);
  EXPECT_NEAR(eps, 2.4937309940681924, 1e-14);
  EXPECT_NEAR(rdp_mse_bound(eps), 0.02250962365037583, 1e-15);
  EXPECT_NEAR(output_perturbation_rdp_epsilon(12665, 1e-2, 1e-5), 2.4937309940681924e6, 1e-6);
  // A norm bound R multiplies the sensitivity, so eps by R^2.
  EXPECT_NEAR(output_perturbation_rdp_epsilon(12665, 1e-2, 1e-2, 3.0), 9.0 * eps, 1e-13);
}

TEST(RdpMseBound, AveragesSquaredDiametersAndKeepsPrecisionAtSmallEpsilon) {
  VectorXd diameters(2);
  diameters << 1.0, 2.0;
  EXPECT_NEAR(rdp_mse_bound(0.5, diameters), 0.9634338015854989, 1e-15);
  EXPECT_NEAR(rdp_mse_bound(0.5, 2.0), 4.0 * rdp_mse_bound(0.5), 1e-15);
  // 1 / (4 (e^eps - 1)) ~ 1 / (4 eps) for tiny eps; exp(eps) - 1 would lose every digit.
  EXPECT_NEAR(rdp_mse_bound(1e-14) * 4e-14, 1.0, 1e-12);
  EXPECT_TRUE(std::isinf(rdp_mse_bound(0.0)));
  EXPECT_EQ(rdp_mse_bound(1e6), 0.0);
}

TEST(PerfectPrivacy, IsTheMeanSquaredDiameterAndSharesCountBoundsOnOrAboveIt) {
  EXPECT_EQ(perfect_privacy_mse(VectorXd::Ones(784)), 1.0);
  VectorXd diameters(2);
  diameters << 1.0, 3.0;
  EXPECT_EQ(perfect_privacy_mse(diameters), 5.0);
  VectorXd bounds(5);
  bounds << 0.5, 1.0, 2.0, std::nan(""), 7.0;
  EXPECT_DOUBLE_EQ(share_at_or_above(bounds, 1.0), 3.0 / 5.0);
  EXPECT_TRUE(std::isnan(share_at_or_above(VectorXd(), 1.0)));
}

TEST(NormCheck, CountsRowsOutsideTheBallIncludingTheIntercept) {
  RowMatrix X(3, 2);
  X << 0.6, 0.8,  // norm 1 exactly: allowed
      0.3, 0.0,   //
      3.0, 4.0;   // norm 5
  const NormCheck plain = check_norm_assumption(X, false);
  EXPECT_EQ(plain.violations, 1);
  EXPECT_EQ(plain.worst_row, 2);
  EXPECT_DOUBLE_EQ(plain.max_norm, 5.0);
  EXPECT_FALSE(plain.satisfied());
  EXPECT_NE(plain.message().find("norm > 1"), std::string::npos);
  // With an intercept the design row [1, x] has norm sqrt(1 + ||x||^2) > 1 for every x != 0.
  const NormCheck with_intercept = check_norm_assumption(X, true);
  EXPECT_EQ(with_intercept.violations, 3);
  EXPECT_DOUBLE_EQ(with_intercept.max_norm, std::sqrt(26.0));
  const NormCheck loose = check_norm_assumption(X, false, 5.0);
  EXPECT_TRUE(loose.satisfied());
  EXPECT_EQ(loose.message(), "");
}

TEST(ReconstructionBounds, DfilAndFilBoundsMatchTheDenseJacobian) {
  const Dataset data = random_classification(60, 5, 2, 11);
  const Model model = tight_logistic(data, 1e-2, true);
  ReconstructionBoundOptions options;
  options.sigma = 0.05;
  const ReconstructionBounds bounds = reconstruction_bounds(model, data, options);
  const FisherInformationLoss fil(model, data, VectorXd(), FilOptions{1.0, LabelPrivacy::kPublic, false});
  const double sigma2 = options.sigma * options.sigma;
  for (Index i = 0; i < data.n(); ++i) {
    const MatrixXd J = fil.jacobian(i);  // p x d: the features only (label public)
    ASSERT_EQ(J.cols(), 5);
    const double dfil_bound = 1.0 / (J.squaredNorm() / (sigma2 * 5.0));
    const double top = Eigen::JacobiSVD<MatrixXd>(J).singularValues()(0);
    const double fil_bound = sigma2 / (top * top);
    EXPECT_NEAR(bounds.dfil_bound(i), dfil_bound, 1e-10 * dfil_bound) << "example " << i;
    EXPECT_NEAR(bounds.fil_bound(i), fil_bound, 1e-9 * fil_bound) << "example " << i;
    EXPECT_LE(bounds.fil_bound(i), bounds.dfil_bound(i) * (1 + 1e-12)) << "1/eta^2 <= 1/eta_bar^2";
  }
}

TEST(ReconstructionBounds, ADeliberatelyWrongJacobianIsCaught) {
  // Counting the label as private (d + 1 coordinates) changes every dFIL bound noticeably: the
  // comparison above would catch a label-privacy mix-up.
  const Dataset data = random_classification(40, 4, 2, 12);
  const Model model = tight_logistic(data, 1e-2, true);
  ReconstructionBoundOptions options;
  options.sigma = 0.1;
  const ReconstructionBounds bounds = reconstruction_bounds(model, data, options);
  const FisherInformationLoss wrong(model, data, VectorXd(), FilOptions{1.0, LabelPrivacy::kPrivate, false});
  Index caught = 0;
  for (Index i = 0; i < data.n(); ++i) {
    const MatrixXd J = wrong.jacobian(i);
    const double wrong_bound = 1.0 / (J.squaredNorm() / (0.01 * static_cast<double>(J.cols())));
    if (std::abs(wrong_bound - bounds.dfil_bound(i)) > 1e-6 * bounds.dfil_bound(i)) ++caught;
  }
  EXPECT_EQ(caught, data.n());
}

TEST(ReconstructionBounds, ReportsRdpSharesAndTheNormAssumption) {
  Dataset data = random_classification(50, 4, 2, 13);
  for (Index i = 0; i < data.n(); ++i) data.X.row(i) /= std::max(1.0, data.X.row(i).norm());
  const Model model = tight_logistic(data, 1e-2, false);
  ReconstructionBoundOptions options;
  options.sigma = 0.5;
  const ReconstructionBounds bounds = reconstruction_bounds(model, data, options);
  EXPECT_DOUBLE_EQ(bounds.rdp_epsilon, output_perturbation_rdp_epsilon(50, 1e-2, 0.5));
  EXPECT_DOUBLE_EQ(bounds.rdp_mse_bound, rdp_mse_bound(bounds.rdp_epsilon));
  EXPECT_EQ(bounds.perfect_privacy_mse, 1.0);
  EXPECT_DOUBLE_EQ(bounds.share_dfil_bound_above_line, share_at_or_above(bounds.dfil_bound, 1.0));
  EXPECT_TRUE(bounds.norm_check.satisfied()) << "rows projected into the unit ball";
  options.diameter = 2.0;  // every coordinate ranges over an interval of length 2
  const ReconstructionBounds wider = reconstruction_bounds(model, data, options);
  EXPECT_DOUBLE_EQ(wider.rdp_mse_bound, 4.0 * bounds.rdp_mse_bound);
  EXPECT_EQ(wider.perfect_privacy_mse, 4.0);
  EXPECT_EQ(wider.dfil_bound, bounds.dfil_bound) << "Cramer-Rao does not depend on the domain";
  options.diameter = 1.0;
  EXPECT_EQ(bounds.rdp_epsilon_at_data_norm, bounds.rdp_epsilon);
  // Rows scaled by 3: the stated eps no longer holds; at the data's norm it is 9x larger at most.
  data.X *= 3.0;
  const ReconstructionBounds scaled = reconstruction_bounds(tight_logistic(data, 1e-2, false), data, options);
  EXPECT_FALSE(scaled.norm_check.satisfied());
  EXPECT_NEAR(scaled.rdp_epsilon_at_data_norm,
              output_perturbation_rdp_epsilon(50, 1e-2, 0.5, scaled.norm_check.max_norm), 1e-12);
  EXPECT_GT(scaled.rdp_epsilon_at_data_norm, scaled.rdp_epsilon);
}

TEST(ReconstructionBounds, InvalidOptionsThrowNamingTheField) {
  const Dataset data = random_classification(20, 3, 2, 14);
  const Model model = tight_logistic(data, 1e-2, false);
  ReconstructionBoundOptions options;
  options.sigma = 0.0;
  expect_invalid_argument_naming([&] { reconstruction_bounds(model, data, options); }, "sigma = 0: must be > 0");
  options = ReconstructionBoundOptions();
  options.norm_bound = -1.0;
  expect_invalid_argument_naming([&] { options.validate(); }, "norm_bound = -1: must be > 0");
  options = ReconstructionBoundOptions();
  options.diameters = VectorXd::Ones(2);
  expect_invalid_argument_naming([&] { reconstruction_bounds(model, data, options); }, "diameter: has 2 entries");
  options.diameters = VectorXd();
  options.diameter = 0.0;
  expect_invalid_argument_naming([&] { options.validate(); }, "diameter = 0: must be > 0");
  options.diameter = 1.0;
  options.diameters = VectorXd::Zero(3);
  expect_invalid_argument_naming([&] { options.validate(); }, "diameter = 0: coordinate 0 must be finite and > 0");
  FitOptions squares;
  squares.kind = ModelKind::kLeastSquares;
  expect_invalid_argument_naming([&] { reconstruction_bounds(fit(data, squares), data, ReconstructionBoundOptions()); },
                                 "logistic");
  expect_invalid_argument_naming([] { output_perturbation_rdp_epsilon(0, 1e-2, 1e-2); }, "n = 0");
  expect_invalid_argument_naming([] { output_perturbation_rdp_epsilon(10, 0.0, 1e-2); }, "l2 = 0");
  expect_invalid_argument_naming([] { rdp_mse_bound(-1.0); }, "epsilon");
}

TEST(ReconstructionBounds, AreBitwiseIdenticalOnAnyNumberOfThreads) {
  // The fit included: 2500 rows make several blocks of its row passes and of FIL's.
  const Dataset data = random_classification(2500, 8, 2, 14);
  ReconstructionBoundOptions options;
  options.sigma = 0.05;
  testing::expect_same_for_any_thread_count(
      [&] { return reconstruction_bounds(tight_logistic(data, 1e-2, true), data, options); },
      [](const ReconstructionBounds& one, const ReconstructionBounds& more) {
        EXPECT_TRUE(testing::same_bits(one.fil.eta, more.fil.eta));
        EXPECT_TRUE(testing::same_bits(one.dfil_bound, more.dfil_bound));
        EXPECT_TRUE(testing::same_bits(one.fil_bound, more.fil_bound));
        EXPECT_TRUE(testing::same_bits(one.norm_check.max_norm, more.norm_check.max_norm));
        EXPECT_TRUE(testing::same_bits(one.share_dfil_bound_above_line, more.share_dfil_bound_above_line));
      });
}

}  // namespace
}  // namespace filkit
