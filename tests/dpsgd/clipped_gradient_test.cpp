#include "filkit/dpsgd/clipped_gradient.hpp"

#include "test_util.hpp"

#include <Eigen/SVD>

#include <random>
#include <string>

namespace filkit {
namespace {

struct Case {
  ModelKind kind;
  LabelPrivacy label;
  bool intercept;
  double norm_over_clip;  // ||g|| / C: below (< 1) or above (> 1) the clip threshold
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return to_string(c.kind) + "_label_" + to_string(c.label) + (c.intercept ? "_intercept" : "") +
         (c.norm_over_clip < 1.0 ? "_below_clip" : "_above_clip");
}

/// A step and one example with a random model, the clip norm set so that ||g|| / C is as asked.
struct Example {
  ClippedGradientStep step;
  VectorXd x, label;
};

Example make_example(const Case& c, Index d, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const Index K = c.kind == ModelKind::kSoftmax ? 4 : 1, p = d + (c.intercept ? 1 : 0);
  MatrixXd W(p, K);
  for (Index i = 0; i < W.size(); ++i) W(i) = normal(rng);
  VectorXd x(d);
  for (Index j = 0; j < d; ++j) x(j) = std::abs(normal(rng)) / std::sqrt(static_cast<double>(d));
  const ClippedGradientStep probe(c.kind, W, c.intercept, 1.0, c.label);
  const VectorXd label = probe.label_vector(c.kind == ModelKind::kSoftmax ? 2.0 : 1.0);
  const double norm = ClippedGlmGradient(probe, x, label).gradient_norm();
  return {ClippedGradientStep(c.kind, W, c.intercept, norm / c.norm_over_clip, c.label), x, label};
}

/// Central differences of g~ about (x, label) with step h.
MatrixXd finite_difference_jacobian(const Example& e, double h) {
  const Index d = e.x.size(), K = e.label.size(), dz = e.step.private_dims();
  const Index p = e.step.weights().rows();
  MatrixXd G(p * K, dz);
  for (Index j = 0; j < dz; ++j) {
    VectorXd x_plus = e.x, x_minus = e.x, y_plus = e.label, y_minus = e.label;
    if (j < d) {
      x_plus(j) += h;
      x_minus(j) -= h;
    } else {
      y_plus(j - d) += h;
      y_minus(j - d) -= h;
    }
    G.col(j) = (ClippedGlmGradient(e.step, x_plus, y_plus).clipped_gradient() -
                ClippedGlmGradient(e.step, x_minus, y_minus).clipped_gradient()) /
               (2.0 * h);
  }
  return G;
}

class ClippedJacobian : public ::testing::TestWithParam<Case> {};

TEST_P(ClippedJacobian, MatchesCentralFiniteDifferencesOfTheClippedGradient) {
  const Example e = make_example(GetParam(), 7, 11);
  const ClippedGlmGradient g(e.step, e.x, e.label);
  const MatrixXd exact = g.dense_jacobian();
  const MatrixXd numeric = finite_difference_jacobian(e, 1e-5);
  const double error = (exact - numeric).norm() / exact.norm();
  EXPECT_LT(error, 1e-8) << "relative Frobenius error " << error;
  // A deliberately wrong Jacobian: the clip factor held constant (its derivative dropped). Below
  // the threshold f' is small but not zero, so the check must see it there too.
  const ClippedGradientStep unclipped_step(e.step.kind(), e.step.weights(), e.step.intercept(), 1e12, e.step.label());
  const ClippedGlmGradient unclipped(unclipped_step, e.x, e.label);
  const MatrixXd wrong = g.clip_factor() * unclipped.dense_jacobian();
  EXPECT_GT((wrong - numeric).norm() / exact.norm(), 1e3 * error);
}

TEST_P(ClippedJacobian, ClosedFormTraceAndSpectralNormMatchTheDenseJacobian) {
  const Example e = make_example(GetParam(), 9, 5);
  const ClippedGlmGradient g(e.step, e.x, e.label);
  const MatrixXd G = g.dense_jacobian();
  EXPECT_NEAR(g.jacobian_trace(), G.squaredNorm(), 1e-12 * G.squaredNorm());
  const double top = Eigen::JacobiSVD<MatrixXd>(G).singularValues()(0);
  EXPECT_NEAR(g.jacobian_spectral_norm_squared(), top * top, 1e-10 * top * top);
}

TEST_P(ClippedJacobian, ProductsMatchTheDenseJacobian) {
  const Example e = make_example(GetParam(), 6, 8);
  const ClippedGlmGradient g(e.step, e.x, e.label);
  const MatrixXd G = g.dense_jacobian();
  const VectorXd v = VectorXd::LinSpaced(G.cols(), -1.0, 2.0);
  const VectorXd u = VectorXd::LinSpaced(G.rows(), 0.5, -1.5);
  EXPECT_LT((g.apply(v) - G * v).norm(), 1e-12 * (G * v).norm());
  EXPECT_LT((g.apply_transpose(u) - G.transpose() * u).norm(), 1e-12 * (G.transpose() * u).norm());
}

INSTANTIATE_TEST_SUITE_P(AllCases, ClippedJacobian,
                         ::testing::Values(Case{ModelKind::kLogistic, LabelPrivacy::kPublic, false, 0.5},
                                           Case{ModelKind::kLogistic, LabelPrivacy::kPublic, false, 3.0},
                                           Case{ModelKind::kLogistic, LabelPrivacy::kPrivate, true, 0.5},
                                           Case{ModelKind::kLogistic, LabelPrivacy::kPrivate, true, 3.0},
                                           Case{ModelKind::kSoftmax, LabelPrivacy::kPublic, true, 0.5},
                                           Case{ModelKind::kSoftmax, LabelPrivacy::kPublic, false, 3.0},
                                           Case{ModelKind::kSoftmax, LabelPrivacy::kPrivate, false, 0.5},
                                           Case{ModelKind::kSoftmax, LabelPrivacy::kPrivate, true, 3.0}),
                         case_name);

TEST(ClippedJacobian, SpectralNormIsExactWhenTheSubspaceFillsTheSpace) {
  // d = 1 with a private softmax label: the invariant subspace is all of R^{d_z}, no complement.
  const Example e = make_example({ModelKind::kSoftmax, LabelPrivacy::kPrivate, true, 2.0}, 1, 3);
  const ClippedGlmGradient g(e.step, e.x, e.label);
  const double top = Eigen::JacobiSVD<MatrixXd>(g.dense_jacobian()).singularValues()(0);
  EXPECT_NEAR(g.jacobian_spectral_norm_squared(), top * top, 1e-10 * top * top);
}

TEST(SoftClip, NormBoundIsTheMaximumOfTheClippedNorm) {
  EXPECT_NEAR(soft_clip_norm_bound(), 1.1152382, 1e-6);
  double largest = 0.0;
  for (double u = 0.0; u <= 20.0; u += 1e-4) largest = std::max(largest, u * soft_clip_factor(u, 1.0));
  EXPECT_LE(largest, soft_clip_norm_bound() + 1e-15);
  EXPECT_GT(largest, soft_clip_norm_bound() - 1e-8);
  // C scales out: the bound holds for any clip norm.
  EXPECT_NEAR(5.0 * 1.548912 * soft_clip_factor(5.0 * 1.548912, 5.0), 5.0 * soft_clip_norm_bound(), 1e-9);
}

TEST(SoftClip, GeluIsJaxsTanhFormAndItsDerivativeMatchesDifferences) {
  EXPECT_NEAR(gelu(1.0), 0.8411919906082768, 1e-15);  // jax.nn.gelu(1.0, approximate=True)
  EXPECT_NEAR(gelu(-1.0), -0.15880800939172324, 1e-15);
  for (double t : {-3.0, -1.0, 0.0, 0.7, 2.5}) {
    const double h = 1e-6;
    EXPECT_NEAR(gelu_derivative(t), (gelu(t + h) - gelu(t - h)) / (2 * h), 1e-9);
  }
}

TEST(ClippedGradientStep, RejectsUnsupportedModelsAndBadShapes) {
  EXPECT_THROW(ClippedGradientStep(ModelKind::kLeastSquares, MatrixXd::Ones(3, 1), false, 1.0, LabelPrivacy::kPublic),
               std::invalid_argument);
  EXPECT_THROW(ClippedGradientStep(ModelKind::kLogistic, MatrixXd::Ones(3, 2), false, 1.0, LabelPrivacy::kPublic),
               std::invalid_argument);
  EXPECT_THROW(ClippedGradientStep(ModelKind::kLogistic, MatrixXd::Ones(3, 1), false, 0.0, LabelPrivacy::kPublic),
               std::invalid_argument);
  const ClippedGradientStep step(ModelKind::kSoftmax, MatrixXd::Ones(3, 3), false, 1.0, LabelPrivacy::kPublic);
  EXPECT_THROW(step.label_vector(3.0), std::invalid_argument);
  EXPECT_THROW(ClippedGlmGradient(step, VectorXd::Ones(2), step.label_vector(0.0)), std::invalid_argument);
}

}  // namespace
}  // namespace filkit
