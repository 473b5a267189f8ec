// fim's constant gradient models (constant_gradient_model.hpp): the thesis' normalise-then-dense
// stack computed in full on a batch of one example is the constant c(phi) whatever the input; the
// chain rule through c(phi) against central differences; the thesis' Adam (coupled L2, count
// restarted, moments kept) against a step computed by hand; the options' lambda schedule and checks.
#include "filkit/public_data/constant_gradient_model.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace filkit {
namespace {

using testing::normal_vector;

/// jax stax's BatchNorm(axis 0) over the rows of a batch, with shift beta and scale gamma.
MatrixXd batch_norm(const MatrixXd& h, const VectorXd& gamma, const VectorXd& beta) {
  const Eigen::RowVectorXd mean = h.colwise().mean();
  const Eigen::RowVectorXd var = (h.rowwise() - mean).array().square().colwise().mean();
  MatrixXd out = (h.rowwise() - mean).array().rowwise() / (var.array() + 1e-5).sqrt();
  out = (out.array().rowwise() * gamma.transpose().array()).rowwise() + beta.transpose().array();
  return out;
}

MatrixXd dense(const MatrixXd& h, const MatrixXd& W, const VectorXd& b) {
  return (h * W.transpose()).rowwise() + b.transpose();
}

MatrixXd gelu_of(MatrixXd h) {
  return h.unaryExpr([](double t) { return gelu(t); });
}

TEST(ConstantGradientModel, TheThesisStackOnABatchOfOneIsTheConstantWhateverTheInput) {
  const Index features = 7, h1 = 5, h2 = 4, m = 6;
  const ConstantGradientModel model(GradientModelKind::kConstant, m, {h1, h2}, 11);
  // The model's own parameters: beta (h1), W (h2 x h1), b (h2), Wo (m x h2), bo (m).
  VectorXd phi = model.parameters() + 0.3 * normal_vector(model.parameters().size(), 1);  // a trained-looking phi
  ConstantGradientModel trained = model;
  trained.set_parameters(phi);
  Index k = 0;
  const VectorXd beta2 = phi.segment(k, h1);
  k += h1;
  const MatrixXd W2 = Eigen::Map<const RowMatrix>(phi.data() + k, h2, h1);
  k += h2 * h1;
  const VectorXd b2 = phi.segment(k, h2);
  k += h2;
  const MatrixXd Wo = Eigen::Map<const RowMatrix>(phi.data() + k, m, h2);
  k += m * h2;
  const VectorXd bo = phi.segment(k, m);
  // The layers before the last normalisation, with arbitrary weights: they do not matter.
  const MatrixXd W1 = Eigen::Map<const MatrixXd>(normal_vector(h1 * features, 2).data(), h1, features);
  const VectorXd b1 = normal_vector(h1, 3), gamma1 = normal_vector(features, 4), beta1 = normal_vector(features, 5);
  const VectorXd gamma2 = normal_vector(h1, 6);
  for (unsigned input = 0; input < 4; ++input) {
    const MatrixXd x = normal_vector(features, 20 + input).transpose();  // a batch of one example
    MatrixXd h = gelu_of(dense(batch_norm(x, gamma1, beta1), W1, b1));
    h = gelu_of(dense(batch_norm(h, gamma2, beta2), W2, b2));
    const VectorXd out = dense(h, Wo, bo).row(0).transpose();
    EXPECT_LT((out - trained.perturbation()).norm(), 1e-13 * out.norm()) << "input " << input;
  }
  // On a batch of two the same stack depends on the input: the constancy is the batch of one's.
  MatrixXd two(2, features);
  two.row(0) = normal_vector(features, 30).transpose();
  two.row(1) = normal_vector(features, 31).transpose();
  MatrixXd h = gelu_of(dense(batch_norm(two, gamma1, beta1), W1, b1));
  h = gelu_of(dense(batch_norm(h, gamma2, beta2), W2, b2));
  const MatrixXd out = dense(h, Wo, bo);
  EXPECT_GT((out.row(0) - out.row(1)).norm(), 1e-3);
}

TEST(ConstantGradientModel, StartsAsTheThesisInitialisationAndTheVectorAtZero) {
  const ConstantGradientModel model(GradientModelKind::kConstant, 300, {256, 256}, 5);
  const VectorXd& phi = model.parameters();
  EXPECT_EQ(phi.size(), 256 + 256 * 256 + 256 + 300 * 256 + 300);
  EXPECT_EQ(phi.head(256), VectorXd::Zero(256)) << "the normalisation's shift starts at zero";
  const VectorXd W = phi.segment(256, 256 * 256);
  // Glorot normal: variance 2 / (fan_in + fan_out), truncated at two standard deviations.
  const double sd = std::sqrt((W.array() - W.mean()).square().mean());
  EXPECT_NEAR(sd, std::sqrt(2.0 / 512.0), 0.02 * std::sqrt(2.0 / 512.0));
  EXPECT_LE(W.cwiseAbs().maxCoeff(), 2.0 * std::sqrt(2.0 / 512.0) / 0.87962566103423978 + 1e-15);
  const VectorXd bo = phi.tail(300);
  EXPECT_NEAR(std::sqrt(bo.squaredNorm() / 300.0), 1e-2, 2e-3);
  EXPECT_EQ(ConstantGradientModel(GradientModelKind::kConstant, 300, {256, 256}, 5).parameters(), phi) << "seeded";
  const ConstantGradientModel vector(GradientModelKind::kVector, 9, {256, 256}, 5);
  EXPECT_EQ(vector.perturbation(), VectorXd::Zero(9));
  EXPECT_EQ(vector.parameters().size(), 9);
}

TEST(ConstantGradientModel, ParameterGradientMatchesCentralDifferences) {
  const Index m = 5;
  ConstantGradientModel model(GradientModelKind::kConstant, m, {4, 3}, 7);
  VectorXd phi = model.parameters() + 0.5 * normal_vector(model.parameters().size(), 8);
  model.set_parameters(phi);
  const VectorXd a = normal_vector(m, 9);  // L(c) = a . c, so dL/dc = a
  const VectorXd analytic = model.parameter_gradient(a);
  const double h = 1e-6;
  for (Index i = 0; i < phi.size(); ++i) {
    ConstantGradientModel shifted = model;
    VectorXd plus = phi, minus = phi;
    plus(i) += h;
    minus(i) -= h;
    shifted.set_parameters(plus);
    const double up = a.dot(shifted.perturbation());
    shifted.set_parameters(minus);
    const double down = a.dot(shifted.perturbation());
    EXPECT_NEAR(analytic(i), (up - down) / (2 * h), 1e-8 * (1.0 + std::abs(analytic(i)))) << "parameter " << i;
  }
  EXPECT_GT(analytic.head(4).norm(), 1e-3) << "the shift beta gets a gradient";
  ConstantGradientModel vector(GradientModelKind::kVector, m, {}, 1);
  EXPECT_EQ(vector.parameter_gradient(a), a);
  EXPECT_INVALID_ARGUMENT(model.parameter_gradient(VectorXd::Zero(m + 1)), "6 values for 5 released");
}

TEST(ConstantGradientModel, TheThesisAdamCouplesTheDecayAndRestartsItsCountButNotItsMoments) {
  ConstantGradientModel model(GradientModelKind::kVector, 2, {}, 1);
  VectorXd phi(2);
  phi << 1.0, -2.0;
  model.set_parameters(phi);
  const double lr = 0.1, wd = 0.5, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  VectorXd m = VectorXd::Zero(2), v = VectorXd::Zero(2);
  const VectorXd g1 = (VectorXd(2) << 0.3, 0.7).finished(), g2 = (VectorXd(2) << -0.2, 0.4).finished();
  // jax's optimizers.adam(i, g) with i = 1, 2 within a private step, then 1 again at the next.
  const auto by_hand = [&](const VectorXd& g, int i) {
    const VectorXd coupled = g + wd * phi;
    m = b1 * m + (1 - b1) * coupled;
    v = b2 * v + (1 - b2) * coupled.cwiseProduct(coupled);
    const double c1 = 1 - std::pow(b1, i + 1), c2 = 1 - std::pow(b2, i + 1);
    phi = (phi.array() - lr * (m.array() / c1) / ((v.array() / c2).sqrt() + eps)).matrix();
  };
  model.restart();
  model.update(g1, lr, wd);
  by_hand(g1, 1);
  model.update(g2, lr, wd);
  by_hand(g2, 2);
  EXPECT_LT((model.parameters() - phi).norm(), 1e-15);
  model.restart();
  model.update(g1, lr, wd);
  by_hand(g1, 1);
  EXPECT_LT((model.parameters() - phi).norm(), 1e-15) << "count restarted, moments carried over";
  EXPECT_EQ(model.perturbation(), model.parameters());
}

TEST(ConstantGradientModel, TheFusedUpdateIsTheUpdateOfTheParameterGradientBitForBit) {
  // Large enough (m 300 x width 256 output block) for the parallel path.
  ConstantGradientModel fused(GradientModelKind::kConstant, 300, {32, 256}, 5);
  ConstantGradientModel plain(GradientModelKind::kConstant, 300, {32, 256}, 5);
  fused.restart();
  plain.restart();
  for (unsigned k = 0; k < 3; ++k) {
    const VectorXd gc = testing::normal_vector(300, 6 + k);
    fused.update_from_perturbation_gradient(gc, 0.01, 0.1);
    plain.update(plain.parameter_gradient(gc), 0.01, 0.1);
  }
  EXPECT_EQ(fused.parameters(), plain.parameters());
  EXPECT_EQ(fused.perturbation(), plain.perturbation());
  EXPECT_NE(fused.parameters(), ConstantGradientModel(GradientModelKind::kConstant, 300, {32, 256}, 5).parameters());
}

TEST(ConstantGradientModel, InFloat32ItIsTheFloat64ModelRoundedAndStaysNearItThroughTraining) {
  const Index m = 300;
  ConstantGradientModel single(GradientModelKind::kConstant, m, {32, 256}, 5, Precision::kFloat32);
  ConstantGradientModel plain(GradientModelKind::kConstant, m, {32, 256}, 5, Precision::kFloat32);
  ConstantGradientModel twice(GradientModelKind::kConstant, m, {32, 256}, 5);
  EXPECT_EQ(single.precision(), Precision::kFloat32);
  EXPECT_EQ(single.parameters(), twice.parameters().cast<float>().cast<double>()) << "the float64 draws rounded";
  EXPECT_NE(single.parameters(), twice.parameters());
  EXPECT_LT((single.perturbation() - twice.perturbation()).norm(), 1e-6 * twice.perturbation().norm());
  single.restart();
  plain.restart();
  twice.restart();
  for (unsigned k = 0; k < 5; ++k) {
    const VectorXd gc = testing::normal_vector(m, 20 + k);
    single.update_from_perturbation_gradient(gc, 0.01, 0.1);
    plain.update(plain.parameter_gradient(gc), 0.01, 0.1);
    twice.update_from_perturbation_gradient(gc, 0.01, 0.1);
  }
  EXPECT_EQ(single.parameters(), plain.parameters()) << "the fused update in float32 too";
  EXPECT_EQ(single.perturbation(), plain.perturbation());
  // Five Adam steps of 0.01 move phi by up to 0.05 an entry; float32 follows within its rounding.
  EXPECT_GT((single.parameters() -
             ConstantGradientModel(GradientModelKind::kConstant, m, {32, 256}, 5, Precision::kFloat32).parameters())
                .norm(),
            1.0);
  EXPECT_LT((single.parameters() - twice.parameters()).norm(), 1e-5 * twice.parameters().norm());
  EXPECT_LT((single.perturbation() - twice.perturbation()).norm(), 1e-5 * twice.perturbation().norm());
  // The state widened and restored into a fresh float32 model: the same model, bit for bit.
  ConstantGradientModel restored(GradientModelKind::kConstant, m, {32, 256}, 9, Precision::kFloat32);
  restored.restore(single.state());
  const VectorXd gc = testing::normal_vector(m, 40);
  single.update_from_perturbation_gradient(gc, 0.01, 0.1);
  restored.update_from_perturbation_gradient(gc, 0.01, 0.1);
  EXPECT_EQ(restored.parameters(), single.parameters());
  EXPECT_EQ(restored.state().second_moment, single.state().second_moment);
  // The vector model's Adam step in float32 against the hand-computed step in float64.
  ConstantGradientModel vector(GradientModelKind::kVector, 2, {}, 1, Precision::kFloat32);
  vector.set_parameters((VectorXd(2) << 1.0, -2.0).finished());
  vector.restart();
  vector.update((VectorXd(2) << 0.3, 0.7).finished(), 0.1, 0.5);
  const VectorXd coupled = (VectorXd(2) << 0.3 + 0.5, 0.7 - 1.0).finished();
  const double c1 = 1 - std::pow(0.9, 2), c2 = 1 - std::pow(0.999, 2);
  const VectorXd by_hand = (VectorXd(2) << 1.0, -2.0).finished().array() -
                           0.1 * (0.1 * coupled.array() / c1) / ((0.001 * coupled.array().square() / c2).sqrt() + 1e-8);
  EXPECT_LT((vector.parameters() - by_hand).norm(), 1e-6 * by_hand.norm());
  EXPECT_EQ(vector.perturbation(), vector.parameters());
}

TEST(GradientModelOptions, LambdaDecaysToItsFloorAndBadDecaysAreRefused) {
  GradientModelOptions o;
  EXPECT_EQ(o.kind, GradientModelKind::kConstant);
  EXPECT_EQ(o.unit, ScheduleUnit::kEpochs);
  EXPECT_EQ(o.lambda_before(1), 1e3);
  EXPECT_EQ(o.lambda_before(50), 1e3) << "no decay by default";
  o.lambda_decay = 1e2;
  o.lambda_min = 1e1;
  EXPECT_EQ(o.lambda_before(1), 1e3);
  EXPECT_EQ(o.lambda_before(2), 9e2);
  EXPECT_EQ(o.lambda_before(10), 1e2);
  EXPECT_EQ(o.lambda_before(11), 1e1);
  EXPECT_EQ(o.lambda_before(59), 1e1);
  o.validate();
  o.lambda_decay = -1.0;
  EXPECT_INVALID_ARGUMENT(o.validate(), "lambda_decay = -1", ">= 0");
  o.lambda_decay = 0.0;
  o.lambda_min = 2e3;
  EXPECT_INVALID_ARGUMENT(o.validate(), "lambda_min = 2000", "[0, lambda = 1000]");
  o.lambda_min = 0.0;
  o.hidden = {256};
  EXPECT_INVALID_ARGUMENT(o.validate(), "gradient_hidden", "at least two widths");
  o.kind = GradientModelKind::kVector;
  o.validate();
  o.objective = GradientObjective::kGradient;
  EXPECT_INVALID_ARGUMENT(o.validate(), "objective = gradient", "conditional");
  o.kind = GradientModelKind::kConditional;
  o.validate();
  o.lambda_decay = 1.0;
  EXPECT_INVALID_ARGUMENT(o.validate(), "lambda_decay", "constant gradient models");
  EXPECT_INVALID_ARGUMENT(parse_enum<GradientModelKind>("linear"), "gradient model", "constant", "conditional");
}

}  // namespace
}  // namespace filkit
