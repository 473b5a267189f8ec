// Private training with public data (public_data_training.hpp): the split and the magnitude mask
// by hand; the released vector and its Jacobian against the closed-form GLM (clipped_gradient.hpp)
// and dense central differences; the gradient model's third-derivative training gradient against
// differences of its objective; fim with lambda = 0 against dpsgd, dpsgd against train_dpsgd's
// closed form, and frozen coordinates that stay put and count for nothing.
#include "filkit/public_data/public_data_training.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/public_data/constant_perturbation.hpp"
#include "filkit/networks/networks.hpp"

#include "networks/network_plugin.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <tuple>

namespace filkit {
namespace {

void expect_invalid(const std::function<void()>& statement, const std::vector<std::string>& fragments) {
  EXPECT_INVALID_ARGUMENT(statement(), fragments);
}

void expect_data_error(const std::function<void()>& statement, const std::vector<std::string>& fragments) {
  EXPECT_THROW_NAMING(statement(), DataError, fragments);
}

#define REQUIRE_PLUGIN() \
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)"

TEST(SplitPublicPrivate, CutsEveryRowOnceBySeedAndRefusesBadFractions) {
  const Dataset data = testing::random_classification(100, 3, 2, 1);
  const PublicPrivateSplit split = split_public_private(data, 0.3, 7);
  EXPECT_EQ(split.public_part.n(), 30);
  EXPECT_EQ(split.private_part.n(), 70);
  std::set<Index> all(split.public_rows.begin(), split.public_rows.end());
  all.insert(split.private_rows.begin(), split.private_rows.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_TRUE(std::is_sorted(split.public_rows.begin(), split.public_rows.end()));
  EXPECT_EQ(split.public_part.X.row(4), data.X.row(split.public_rows[4]));
  EXPECT_EQ(split_public_private(data, 0.3, 7).public_rows, split.public_rows);
  EXPECT_NE(split_public_private(data, 0.3, 8).public_rows, split.public_rows);
  for (double bad : {0.0, 1.0, -0.1, 1.5, std::nan("")})
    expect_invalid([&] { split_public_private(data, bad, 1); }, {"public_fraction", "(0, 1)"});
  EXPECT_EQ(split_public_private(data, 0.999, 1).private_part.n(), 1) << "a private example is always kept";
  expect_invalid([&] { split_public_private(data, 0.001, 1); }, {"public part empty"});
}

TEST(SplitPublicPrivate, FirstTakesTheLeadingRowsWhateverTheSeedAsTheThesisCode) {
  const Dataset data = testing::random_classification(100, 3, 2, 1);
  const PublicPrivateSplit split = split_public_private(data, 0.3, 7, PublicSplit::kFirst);
  ASSERT_EQ(split.public_rows.size(), 30u);
  ASSERT_EQ(split.private_rows.size(), 70u);
  for (Index i = 0; i < 30; ++i) EXPECT_EQ(split.public_rows[static_cast<std::size_t>(i)], i);
  for (Index i = 0; i < 70; ++i) EXPECT_EQ(split.private_rows[static_cast<std::size_t>(i)], 30 + i);
  EXPECT_EQ(split.public_part.X, data.X.topRows(30));
  EXPECT_EQ(split.private_part.X, data.X.bottomRows(70));
  EXPECT_EQ(split_public_private(data, 0.3, 8, PublicSplit::kFirst).public_rows, split.public_rows);
  EXPECT_EQ(split_public_private(data, 0.999, 1, PublicSplit::kFirst).private_part.n(), 1);
  expect_invalid([&] { split_public_private(data, 0.001, 1, PublicSplit::kFirst); }, {"public part empty"});
  EXPECT_EQ(split_public_private(data, 0.3, 7, PublicSplit::kRandom).public_rows,
            split_public_private(data, 0.3, 7).public_rows)
      << "random stays the default";
}

TEST(SmallestMagnitudeMask, FreezesTheSmallestAbsoluteValuesTiesByIndex) {
  VectorXd w(6);
  w << 0.5, -0.1, 0.2, -0.2, 3.0, 0.0;
  const std::vector<bool> mask = smallest_magnitude_mask(w, 0.5);
  EXPECT_EQ(mask, (std::vector<bool>{false, true, true, false, false, true}));  // |w| 0, 0.1, then 0.2 at index 2
  EXPECT_EQ(std::count(mask.begin(), mask.end(), true), 3);
  EXPECT_EQ(smallest_magnitude_mask(w, 0.0), std::vector<bool>(6, false));
  expect_invalid([&] { smallest_magnitude_mask(w, 1.0); }, {"freeze_fraction", "[0, 1)"});
  // Fixed coordinates (the reference logit's) are frozen besides round(0.5 x 4) of the others.
  const std::vector<bool> fixed{false, false, false, false, true, true};
  EXPECT_EQ(smallest_magnitude_mask(w, 0.5, fixed), (std::vector<bool>{false, true, true, false, true, true}));
  expect_invalid([&] { smallest_magnitude_mask(w, 0.5, {true}); }, {"1 fixed flags", "6 coordinates"});
}

/// A 1 x 16 x 16 image problem (the smallest the gradient model's conv branch takes) with K classes.
Dataset image_data(Index n, int K, unsigned seed, Index side = 16) {
  Dataset data = testing::random_classification(n, side * side, K, seed);
  data.X = (data.X.array() * 4.0).matrix();  // pixels of order one
  data.image = ImageShape{1, side, side};
  return data;
}

NetworkPlan softmax_plan(Index d, int K, bool intercept) {
  NetworkOptions softmax;
  softmax.architecture = NetworkArchitecture::kSoftmax;
  softmax.intercept = intercept;
  return plan_network(builtin_network_layers(softmax, K), {d + (intercept ? 1 : 0)}, K);
}

ReleasedGradientSpec spec_for(const Dataset& data, int K, bool intercept, bool learned, double freeze) {
  ReleasedGradientSpec spec;
  spec.plan = softmax_plan(data.d(), K, intercept);
  spec.input_dim = data.d();
  spec.image = data.image;
  spec.num_classes = K;
  spec.intercept = intercept;
  const Index p = (data.d() + (intercept ? 1 : 0)) * K;
  const std::vector<bool> frozen = smallest_magnitude_mask(VectorXd::LinSpaced(p, -1.0, 1.5), freeze);
  for (Index i = 0; i < p; ++i)
    if (!frozen[static_cast<std::size_t>(i)]) spec.released.push_back(i);
  spec.learned = learned;
  spec.gradient_model.hidden = {12, 8};
  spec.gradient_model.lambda = 3.0;
  spec.clip_norm = 0.7;
  return spec;
}

VectorXd random_vector(Index size, unsigned seed, double scale = 1.0) { return testing::normal_vector(size, seed, scale); }

TEST(ReleasedGradient, WithoutAModelIsTheClosedFormClippedGradientAndItsExactTrace) {
  REQUIRE_PLUGIN();
  const int K = 3;
  Dataset data = testing::random_classification(6, 5, K, 2);
  const ReleasedGradientSpec spec = spec_for(data, K, true, false, 0.0);
  const auto backend = create_released_gradient_backend(spec);
  const VectorXd theta = random_vector(6 * K, 3);
  const ClippedGradientStep step(ModelKind::kSoftmax, Eigen::Map<const MatrixXd>(theta.data(), 6, K), true,
                                 spec.clip_norm, LabelPrivacy::kPublic);
  const MatrixXd released = backend->released(theta, data.X, data.y);
  NetworkAccountingRequest exact;
  exact.trace = TraceMethod::kExact;
  const NetworkBatchAccounting accounting = backend->account_batch(theta, data.X, data.y, exact, 1);
  VectorXd sum = VectorXd::Zero(6 * K);
  for (Index b = 0; b < data.n(); ++b) {
    const ClippedGlmGradient closed(step, data.X.row(b).transpose(), step.label_vector(data.y(b)));
    EXPECT_LT((released.row(b).transpose() - closed.clipped_gradient()).norm(), 1e-13 * closed.clipped_gradient().norm());
    EXPECT_NEAR(accounting.trace(b), closed.jacobian_trace(), 1e-11 * closed.jacobian_trace());
    sum += closed.clipped_gradient();
  }
  EXPECT_LT((accounting.clipped_sum - sum).norm(), 1e-13 * sum.norm());
}

/// A small ConvNet on 1 x 8 x 8 images with 3 classes, n rows from `seed`, its parameters from
/// seed + 3, every `stride`-th coordinate released, C = 0.3 (most gradients beyond the clip's knee).
struct SmallConvNet {
  Dataset data;
  Network network;
  VectorXd w;
  ReleasedGradientSpec spec;
};
SmallConvNet small_conv_net(Index n, unsigned seed, Index stride) {
  const int K = 3;
  Dataset data = testing::random_classification(n, 64, K, seed);
  data.X = (data.X.array() * 3.0).matrix();
  data.image = ImageShape{1, 8, 8};
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "conv:3:3:1:1,tanh,avgpool:2:2,conv:2:2:1:0,gelu,flatten,dense:5,tanh,dense:3";
  Network network(options, 64, K, data.image);
  std::mt19937_64 rng(seed + 3);
  const VectorXd w = network.initial_parameters(rng);
  ReleasedGradientSpec spec;
  spec.plan = network.plan();
  spec.input_dim = 64;
  spec.image = data.image;
  spec.num_classes = K;
  spec.clip_norm = 0.3;
  for (Index i = 0; i < network.parameter_count(); i += stride) spec.released.push_back(i);
  return {std::move(data), std::move(network), w, std::move(spec)};
}

TEST(ReleasedGradient, OfANetworkIsTheNetworksClippedGradientAndItsExactTrace) {
  REQUIRE_PLUGIN();
  const auto [data, network, w, spec] = small_conv_net(5, 4, 1);
  const auto backend = create_released_gradient_backend(spec);
  const MatrixXd expected = network.clipped_gradients(w, data.X, data.y, spec.clip_norm);
  const MatrixXd released = backend->released(w, data.X, data.y);
  EXPECT_LT((released - expected).norm(), 1e-12 * expected.norm());
  NetworkAccountingRequest exact;
  exact.trace = TraceMethod::kExact;
  exact.spectral = SpectralMethod::kNone;
  const VectorXd reference = network.account_batch(w, data.X, data.y, spec.clip_norm, exact, 1).trace;
  const VectorXd trace = backend->account_batch(w, data.X, data.y, exact, 1).trace;
  EXPECT_LT((trace - reference).norm(), 1e-10 * reference.norm());
}

/// Tr(J^T J) of the released vector of row b by central differences of backend->released.
double finite_difference_trace(const ReleasedGradientBackend& backend, const VectorXd& theta, const Dataset& data,
                               Index b, MatrixXd* jacobian = nullptr) {
  const double h = 1e-5;
  RowMatrix x = data.X.row(b);
  const VectorXd y = VectorXd::Constant(1, data.y(b));
  MatrixXd J(backend.released(theta, x, y).cols(), data.d());
  for (Index k = 0; k < data.d(); ++k) {
    RowMatrix plus = x, minus = x;
    plus(0, k) += h;
    minus(0, k) -= h;
    J.col(k) = (backend.released(theta, plus, y) - backend.released(theta, minus, y)).row(0).transpose() / (2 * h);
  }
  if (jacobian != nullptr) *jacobian = J;
  return J.squaredNorm();
}

TEST(ReleasedGradient, FrozenCoordinatesAreLeftOutOfTheVectorItsNormAndItsJacobian) {
  REQUIRE_PLUGIN();
  const int K = 2;
  const Dataset data = testing::random_classification(3, 4, K, 5);
  const ReleasedGradientSpec spec = spec_for(data, K, false, false, 0.5);
  ASSERT_EQ(spec.released.size(), 4u);
  const auto backend = create_released_gradient_backend(spec);
  const VectorXd theta = random_vector(4 * K, 6);
  NetworkAccountingRequest exact;
  exact.trace = TraceMethod::kExact;
  const NetworkBatchAccounting accounting = backend->account_batch(theta, data.X, data.y, exact, 1);
  for (Index b = 0; b < data.n(); ++b) {
    // Independent: the masked softmax gradient in Eigen, clipped by its own norm.
    const auto masked = [&](const VectorXd& x) {
      VectorXd scores = Eigen::Map<const MatrixXd>(theta.data(), 4, K).transpose() * x;
      scores = (scores.array() - scores.maxCoeff()).exp().matrix();
      VectorXd r = scores / scores.sum();
      r(static_cast<Index>(data.y(b))) -= 1.0;
      VectorXd g(4 * K);
      for (Index k = 0; k < K; ++k) g.segment(4 * k, 4) = r(k) * x;
      VectorXd v(static_cast<Index>(spec.released.size()));
      for (std::size_t j = 0; j < spec.released.size(); ++j) v(static_cast<Index>(j)) = g(spec.released[j]);
      return VectorXd(soft_clip_factor(v.norm(), spec.clip_norm) * v);
    };
    const VectorXd x = data.X.row(b).transpose();
    EXPECT_LT((backend->released(theta, data.X.row(b), data.y.segment(b, 1)).row(0).transpose() - masked(x)).norm(), 1e-14);
    MatrixXd J(4, 4);
    for (Index k = 0; k < 4; ++k) {
      VectorXd plus = x, minus = x;
      plus(k) += 1e-6;
      minus(k) -= 1e-6;
      J.col(k) = (masked(plus) - masked(minus)) / 2e-6;
    }
    EXPECT_NEAR(accounting.trace(b), J.squaredNorm(), 1e-7 * J.squaredNorm());
  }
}

TEST(ReleasedGradient, LearnedModelJacobianMatchesDifferencesAndGaussianProbesAverageToTheTrace) {
  REQUIRE_PLUGIN();
  const int K = 3;
  const Dataset data = image_data(3, K, 8);
  for (GradientObjective objective : {GradientObjective::kPerturbation, GradientObjective::kGradient}) {
    SCOPED_TRACE(to_string(objective));
    ReleasedGradientSpec spec = spec_for(data, K, true, true, 0.5);
    spec.gradient_model.objective = objective;
    const auto backend = create_released_gradient_backend(spec);
    backend->initialize(11);
    backend->set_phi(random_vector(backend->phi().size(), 12, 0.05));  // a model that is far from zero
    const VectorXd theta = random_vector(257 * K, 9, 0.05);
    NetworkAccountingRequest exact;
    exact.trace = TraceMethod::kExact;
    const NetworkBatchAccounting accounting = backend->account_batch(theta, data.X, data.y, exact, 1);
    NetworkAccountingRequest gaussian;
    gaussian.trace = TraceMethod::kGaussian;
    gaussian.probes = 4000;
    const NetworkBatchAccounting estimated = backend->account_batch(theta, data.X, data.y, gaussian, 2);
    for (Index b = 0; b < data.n(); ++b) {
      MatrixXd J;
      const double trace = finite_difference_trace(*backend, theta, data, b, &J);
      EXPECT_NEAR(accounting.trace(b), trace, 1e-6 * trace);
      // J^T u against the dense difference Jacobian.
      const VectorXd u = random_vector(J.rows(), 20 + static_cast<unsigned>(b));
      const MatrixXd vjp = backend->released_vjp(theta, data.X.row(b), data.y.segment(b, 1), u.transpose());
      EXPECT_LT((vjp.row(0).transpose() - J.transpose() * u).norm(), 1e-6 * (J.transpose() * u).norm());
      // Hutchinson: the mean of ||J^T u||^2 has relative sd <= sqrt(2 / probes) = 2.2 %.
      EXPECT_NEAR(estimated.trace(b), trace, 0.12 * trace);
    }
  }
}

TEST(ReleasedGradient, TrainingGradientOfTheFisherObjectiveMatchesDifferences) {
  REQUIRE_PLUGIN();
  const int K = 2;
  const Dataset data = image_data(4, K, 13);
  for (bool snr : {true, false})
    for (GradientObjective objective : {GradientObjective::kPerturbation, GradientObjective::kGradient}) {
      SCOPED_TRACE(to_string(objective) + (snr ? " snr" : ""));
      ReleasedGradientSpec spec = spec_for(data, K, false, true, 0.25);
      spec.gradient_model.objective = objective;
      spec.gradient_model.snr = snr;
      const auto backend = create_released_gradient_backend(spec);
      backend->initialize(21);
      const VectorXd phi = random_vector(backend->phi().size(), 22, 0.05);
      backend->set_phi(phi);
      const VectorXd theta = random_vector(256 * K, 23, 0.05);
      const RowMatrix probes = random_vector(4 * 2 * spec.released.size(), 24)
                                   .reshaped<Eigen::RowMajor>(8, static_cast<Index>(spec.released.size()));
      const VectorXd gradient = backend->objective_gradient(theta, data.X, data.y, probes);
      ASSERT_EQ(gradient.size(), phi.size());
      for (unsigned direction = 0; direction < 4; ++direction) {
        const VectorXd v = random_vector(phi.size(), 30 + direction);
        const double h = 1e-5;
        backend->set_phi(phi + h * v);
        const double plus = backend->objective(theta, data.X, data.y, probes);
        backend->set_phi(phi - h * v);
        const double minus = backend->objective(theta, data.X, data.y, probes);
        backend->set_phi(phi);
        const double difference = (plus - minus) / (2 * h), analytic = gradient.dot(v);
        EXPECT_NEAR(analytic, difference, 1e-6 * std::abs(difference) + 1e-9);
      }
      // A gradient from a 10 % wrong lambda fails the same check: the Fisher term is not negligible.
      ReleasedGradientSpec other = spec;
      other.gradient_model.lambda *= 1.1;
      const auto wrong = create_released_gradient_backend(other);
      wrong->set_phi(phi);
      const VectorXd v = random_vector(phi.size(), 30);
      const double h = 1e-5;
      backend->set_phi(phi + h * v);
      const double plus = backend->objective(theta, data.X, data.y, probes);
      backend->set_phi(phi - h * v);
      const double minus = backend->objective(theta, data.X, data.y, probes);
      backend->set_phi(phi);
      const double difference = (plus - minus) / (2 * h);
      EXPECT_GT(std::abs(wrong->objective_gradient(theta, data.X, data.y, probes).dot(v) - difference),
                100 * (1e-6 * std::abs(difference) + 1e-9));
    }
}

/// The constant models' objective by dense central differences: r_b from released() at the shift,
/// J_b v by differences of r_b along v, then the mean of ||c||^2 + lambda (T_b + floor) / ||r_b||^2.
double shift_objective_by_differences(ReleasedGradientBackend& backend, const VectorXd& theta, const Dataset& data,
                                      const VectorXd& c, const RowMatrix& probes, const ShiftObjectiveRequest& r) {
  backend.set_shift(c);
  const Index B = data.n(), d = data.d(), S = probes.rows() / B;
  const double h = 1e-5;
  double sum = 0.0;
  for (Index b = 0; b < B; ++b) {
    const RowMatrix x = data.X.row(b);
    const VectorXd y = VectorXd::Constant(1, data.y(b));
    const VectorXd released = backend.released(theta, x, y).row(0).transpose();
    const auto along = [&](const VectorXd& v) {
      const RowMatrix up = x + h * v.transpose(), down = x - h * v.transpose();
      return VectorXd((backend.released(theta, up, y) - backend.released(theta, down, y)).row(0).transpose() / (2 * h));
    };
    double trace = 0.0;
    if (S > 0) {
      for (Index s = 0; s < S; ++s) trace += along(probes.row(b * S + s).transpose()).squaredNorm() / static_cast<double>(S);
    } else {
      for (Index k = 0; k < d; ++k) trace += along(VectorXd::Unit(d, k)).squaredNorm();
    }
    sum += c.squaredNorm() + r.lambda * (trace + r.floor) / (r.snr ? released.squaredNorm() : 1.0);
  }
  backend.set_shift(VectorXd());
  return sum / static_cast<double>(B);
}

TEST(ReleasedGradient, ConstantShiftObjectiveAndItsGradientMatchDifferences) {
  REQUIRE_PLUGIN();
  const int K = 3;
  Dataset data = testing::random_classification(4, 6, K, 12);
  data.X = (data.X.array() * 2.0).matrix();
  ReleasedGradientSpec spec = spec_for(data, K, true, false, 0.5);
  spec.clip_norm = 0.5;  // most gradients beyond the clip's knee
  auto backend = create_released_gradient_backend(spec);
  const Index p = (data.d() + 1) * K, m = static_cast<Index>(spec.released.size());
  const VectorXd theta = random_vector(p, 13), c = random_vector(m, 14, 0.2);
  const RowMatrix probes = random_vector(data.n() * 2 * data.d(), 15).reshaped<Eigen::RowMajor>(data.n() * 2, data.d());
  for (const bool snr : {true, false})
    for (const bool exact : {false, true}) {
      const ShiftObjectiveRequest request{2.5, snr, 1e-7};
      const RowMatrix used = exact ? RowMatrix(0, data.d()) : probes;
      const ShiftObjectiveValue value = backend->shift_objective(theta, data.X, data.y, c, used, request);
      const double reference = shift_objective_by_differences(*backend, theta, data, c, used, request);
      EXPECT_NEAR(value.value, reference, 1e-7 * reference) << "snr " << snr << ", exact " << exact;
      const double h = 1e-6;
      for (Index j = 0; j < m; j += 3) {
        VectorXd up = c, down = c;
        up(j) += h;
        down(j) -= h;
        const double difference = (backend->shift_objective(theta, data.X, data.y, up, used, request).value -
                                   backend->shift_objective(theta, data.X, data.y, down, used, request).value) /
                                  (2 * h);
        EXPECT_NEAR(value.gradient(j), difference, 1e-6 * (1.0 + std::abs(difference))) << "coordinate " << j;
      }
    }
  // The exact trace is the probes' expectation: many probes average to it.
  const ShiftObjectiveRequest request{2.5, false, 0.0};
  const double exact = backend->shift_objective(theta, data.X, data.y, c, RowMatrix(0, data.d()), request).value;
  const Index S = 1000;
  const RowMatrix many = random_vector(data.n() * S * data.d(), 16).reshaped<Eigen::RowMajor>(data.n() * S, data.d());
  const double estimate = backend->shift_objective(theta, data.X, data.y, c, many, request).value;
  EXPECT_NEAR(estimate, exact, 0.1 * exact);  // ||J v||^2 has relative sd <= sqrt(2) a probe: 4.5 % at 1000
  // The shift moves the release and the accounting: r = clip(M g + c).
  backend->set_shift(c);
  const MatrixXd shifted = backend->released(theta, data.X, data.y);
  backend->set_shift(VectorXd());
  const MatrixXd plain = backend->released(theta, data.X, data.y);
  EXPECT_GT((shifted - plain).norm(), 1e-3);
  // A shape the library never passes: the plugin calls it a bug (std::logic_error).
  EXPECT_THROW_NAMING(backend->set_shift(VectorXd::Zero(m + 1)), std::logic_error, "released coordinates");
}

TEST(ReleasedGradient, ConstantShiftObjectiveInFloat32IsFloat64sToSinglePrecision) {
  REQUIRE_PLUGIN();
  // fim's table 3.2 shape in miniature: a ConvNet, half its coordinates released.
  const auto [data, network, w, spec] = small_conv_net(7, 41, 2);
  const auto backend = create_released_gradient_backend(spec);
  const Index m = static_cast<Index>(spec.released.size());
  const VectorXd c = random_vector(m, 43, 0.1);
  const RowMatrix probes = random_vector(data.n() * 2 * 64, 44).reshaped<Eigen::RowMajor>(data.n() * 2, 64);
  for (const bool exact : {false, true}) {
    const RowMatrix used = exact ? RowMatrix(0, 64) : probes;
    ShiftObjectiveRequest request{2.5, true, 1e-7};
    const ShiftObjectiveValue dbl = backend->shift_objective(w, data.X, data.y, c, used, request);
    request.precision = GradientPrecision::kFloat32;
    const ShiftObjectiveValue sgl = backend->shift_objective(w, data.X, data.y, c, used, request);
    // Single precision's rounding (2^-24 = 6e-8 a operation), not a different formula: a wrong
    // term changes the value at the percent level.
    EXPECT_NEAR(sgl.value, dbl.value, 1e-5 * dbl.value) << "exact " << exact;
    EXPECT_NE(sgl.value, dbl.value) << "the float32 request ran in float64";
    EXPECT_LT((sgl.gradient - dbl.gradient).norm(), 1e-4 * dbl.gradient.norm()) << "exact " << exact;
  }
}

TEST(ReleasedGradient, ConstantShiftObjectiveFromItsTermsIsTheBackendsObjective) {
  REQUIRE_PLUGIN();
  // Probes drawn once a step: the ConvNet's terms (M g_b and M J_g v_bs) computed once, then the
  // objective at any c from them alone. The backend's objective differentiates its own graph.
  const auto [data, network, w, spec] = small_conv_net(7, 51, 2);
  const auto backend = create_released_gradient_backend(spec);
  const Index m = static_cast<Index>(spec.released.size()), S = 2;
  const RowMatrix probes = random_vector(data.n() * S * 64, 52).reshaped<Eigen::RowMajor>(data.n() * S, 64);
  std::vector<Index> all(static_cast<std::size_t>(data.n()));
  std::iota(all.begin(), all.end(), Index{0});
  for (const GradientPrecision precision : {GradientPrecision::kFloat64, GradientPrecision::kFloat32}) {
    const ShiftObjectiveTerms terms = backend->shift_objective_terms(w, data.X, data.y, probes, precision);
    ASSERT_EQ(terms.gradients.rows(), data.n());
    ASSERT_EQ(terms.probe_products.rows(), data.n() * S);
    for (const double scale : {0.0, 0.1, 1.0})
      for (const bool snr : {true, false}) {
        const VectorXd c = random_vector(m, 53, scale);
        ShiftObjectiveRequest request{2.5, snr, 1e-7};
        request.precision = precision;
        const ShiftObjectiveValue expected = backend->shift_objective(w, data.X, data.y, c, probes, request);
        const ShiftObjectiveValue from_terms = shift_objective_from_terms(terms.gradients, terms.probe_products, all, c,
                                                                     spec.clip_norm, 2.5, snr, 1e-7);
        EXPECT_NEAR(from_terms.value, expected.value, 1e-11 * expected.value) << "c scale " << scale;
        EXPECT_LT((from_terms.gradient - expected.gradient).norm(), 1e-10 * expected.gradient.norm())
            << "c scale " << scale;
      }
  }
  EXPECT_THROW_NAMING(backend->shift_objective_terms(w, data.X, data.y, RowMatrix(0, 64), GradientPrecision::kFloat64),
                      std::logic_error, "positive multiple");
}

TEST(ReleasedGradient, TermCacheGivesTheTermsOfEveryProbeDraw) {
  REQUIRE_PLUGIN();
  // The thesis' per-batch probes over an epoch: the records kept once, then one draw of probes
  // after another. Each draw's terms are shift_objective_terms' for the same probes, to the bit
  // (the same pieces and operations), in both precisions, and the output matrix is reused.
  const auto [data, network, w, spec] = small_conv_net(7, 51, 2);
  const auto backend = create_released_gradient_backend(spec);
  const Index S = 2;
  for (const GradientPrecision precision : {GradientPrecision::kFloat64, GradientPrecision::kFloat32}) {
    const auto cache = backend->shift_objective_term_cache(w, data.X, data.y, precision);
    RowMatrix products;
    for (const std::uint64_t seed : {61, 62}) {
      const RowMatrix probes = random_vector(data.n() * S * 64, seed).reshaped<Eigen::RowMajor>(data.n() * S, 64);
      const ShiftObjectiveTerms terms = backend->shift_objective_terms(w, data.X, data.y, probes, precision);
      cache->probe_products(probes, products);
      EXPECT_EQ(cache->gradients(), terms.gradients) << "seed " << seed;
      EXPECT_EQ(products, terms.probe_products) << "seed " << seed;
    }
    EXPECT_THROW_NAMING(cache->probe_products(RowMatrix(data.n() * S + 1, 64), products), std::logic_error,
                        "positive multiple");
    EXPECT_THROW_NAMING(cache->probe_products(RowMatrix(data.n() * S, 63), products), std::logic_error, "64 features");
  }
}

TEST(ReleasedGradient, ConstantShiftOfSoftmaxRegressionIsTheClosedFormsObjectiveReleaseAndTrace) {
  REQUIRE_PLUGIN();
  const int K = 4;
  Dataset data = testing::random_classification(7, 9, K, 21);
  data.X = (data.X.array() * 2.0).matrix();
  const ReleasedGradientSpec spec = spec_for(data, K, true, false, 0.5);
  auto backend = create_released_gradient_backend(spec);
  const Index p = data.d() + 1, m = static_cast<Index>(spec.released.size());
  const VectorXd theta = random_vector(p * K, 22), c = random_vector(m, 23, 0.3);
  std::vector<bool> frozen(static_cast<std::size_t>(p * K), true);
  for (Index j : spec.released) frozen[static_cast<std::size_t>(j)] = false;
  const SoftmaxRelease closed(Eigen::Map<const MatrixXd>(theta.data(), p, K), true, frozen, spec.clip_norm);
  ASSERT_EQ(closed.released_coordinates(), spec.released);
  const RowMatrix probes = random_vector(data.n() * 3 * data.d(), 24).reshaped<Eigen::RowMajor>(data.n() * 3, data.d());
  for (const bool exact : {false, true}) {
    const RowMatrix used = exact ? RowMatrix(0, data.d()) : probes;
    const ShiftObjectiveRequest request{7.0, true, 1e-7};
    const ShiftObjectiveValue torch = backend->shift_objective(theta, data.X, data.y, c, used, request);
    const SoftmaxRelease::Objective eigen = closed.objective(data.X, data.y, c, used, 7.0, true, 1e-7);
    EXPECT_NEAR(eigen.value, torch.value, 1e-11 * torch.value) << "exact " << exact;
    EXPECT_LT((eigen.gradient - torch.gradient).norm(), 1e-10 * torch.gradient.norm()) << "exact " << exact;
  }
  backend->set_shift(c);
  EXPECT_LT((backend->released(theta, data.X, data.y) - closed.released(data.X, data.y, c)).norm(), 1e-12);
  NetworkAccountingRequest exact;
  exact.trace = TraceMethod::kExact;
  const NetworkBatchAccounting accounting = backend->account_batch(theta, data.X, data.y, exact, 1);
  const SoftmaxRelease::Accounting closed_accounting = closed.account(data.X, data.y, c);
  EXPECT_LT((accounting.trace - closed_accounting.trace).norm(), 1e-10 * closed_accounting.trace.norm());
  EXPECT_LT((accounting.clipped_sum - closed_accounting.clipped_sum).norm(), 1e-12 * closed_accounting.clipped_sum.norm());
}

TEST(ReleasedGradient, PiecesOfOneExampleGiveTheWholeBatchsReleaseAccountingObjectiveAndTraining) {
  REQUIRE_PLUGIN();
  const int K = 3;
  const Dataset data = image_data(7, K, 41);
  ReleasedGradientSpec whole_spec = spec_for(data, K, true, true, 0.5);
  whole_spec.gradient_model.batch_size = 5;
  ReleasedGradientSpec pieces_spec = whole_spec;
  pieces_spec.max_piece_rows = 1;  // 7 pieces, differentiated concurrently
  const auto whole = create_released_gradient_backend(whole_spec);
  const auto pieces = create_released_gradient_backend(pieces_spec);
  const VectorXd phi = random_vector(whole->phi().size(), 42, 0.05);
  whole->set_phi(phi);
  pieces->set_phi(phi);
  const VectorXd theta = random_vector(257 * K, 43, 0.05);
  const auto close = [](const auto& a, const auto& b) { return (a - b).norm() <= 1e-12 * b.norm(); };
  EXPECT_TRUE(close(pieces->released(theta, data.X, data.y), whole->released(theta, data.X, data.y)));
  EXPECT_TRUE(close(pieces->perturbation(theta, data.X, data.y), whole->perturbation(theta, data.X, data.y)));
  const RowMatrix U = random_vector(data.n() * static_cast<Index>(whole_spec.released.size()), 44)
                          .reshaped<Eigen::RowMajor>(data.n(), static_cast<Index>(whole_spec.released.size()));
  EXPECT_TRUE(close(pieces->released_vjp(theta, data.X, data.y, U), whole->released_vjp(theta, data.X, data.y, U)));
  for (TraceMethod method : {TraceMethod::kExact, TraceMethod::kGaussian}) {
    NetworkAccountingRequest request;
    request.trace = method;
    request.probes = 3;  // drawn for the whole batch: the same probes whatever the pieces
    const NetworkBatchAccounting a = pieces->account_batch(theta, data.X, data.y, request, 45);
    const NetworkBatchAccounting b = whole->account_batch(theta, data.X, data.y, request, 45);
    EXPECT_TRUE(close(a.trace, b.trace)) << to_string(method);
    EXPECT_TRUE(close(a.clipped_sum, b.clipped_sum)) << to_string(method);
  }
  const RowMatrix probes = random_vector(data.n() * 2 * static_cast<Index>(whole_spec.released.size()), 46)
                               .reshaped<Eigen::RowMajor>(data.n() * 2, static_cast<Index>(whole_spec.released.size()));
  EXPECT_NEAR(pieces->objective(theta, data.X, data.y, probes), whole->objective(theta, data.X, data.y, probes),
              1e-12 * std::abs(whole->objective(theta, data.X, data.y, probes)));
  EXPECT_TRUE(close(pieces->objective_gradient(theta, data.X, data.y, probes),
                    whole->objective_gradient(theta, data.X, data.y, probes)));
  // Three AdamW steps on batches of 5 of the 7 rows: the same phi.
  pieces->train(theta, data.X, data.y, 3, 47);
  whole->train(theta, data.X, data.y, 3, 47);
  EXPECT_TRUE(close(pieces->phi(), whole->phi()));
  EXPECT_GT((whole->phi() - phi).norm(), 1e-3 * phi.norm());  // and it did move
}

/// A small ConvNet for 16 x 16 images of 2 classes (image_data).
NetworkOptions small_conv_network() {
  NetworkOptions network;
  network.architecture = NetworkArchitecture::kCustom;
  network.layers = "conv:2:3:2:1,tanh,avgpool:2:2,flatten,dense:2";
  return network;
}

PublicDataTrainingOptions small_options() {
  PublicDataTrainingOptions o;
  o.public_fraction = 0.4;
  o.pretrain = {.steps = 20, .batch_size = 16, .step_size = 0.05, .weight_decay = 1e-4};
  o.freeze_fraction = 0.5;
  DpSgdOptions& p = o.private_phase;
  p.kind = ModelKind::kSoftmax;
  p.batch_size = 12;
  p.steps = 6;
  p.step_size = 0.05;
  p.optimizer = Optimizer::kAdam;
  p.clip_norm = 1.0;
  p.noise_multiplier = 1.0;
  p.trace = TraceMethod::kExact;
  p.runs = 2;
  p.seed = 3;
  o.gradient_model.hidden = {10, 6};
  o.gradient_model.steps = 3;
  o.gradient_model.decay = 1;
  o.gradient_model.min_steps = 1;
  o.gradient_model.batch_size = 8;
  return o;
}

TEST(TrainWithPublicData, PretrainingAndSgdFollowTheSamplingAsked) {
  const Dataset data = testing::random_classification(120, 5, 3, 11);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = small_options();
  o.methods = {PrivateTrainingMethod::kSgd};
  const auto trained = [&](const PublicDataTrainingOptions& options) {
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, options).methods.front();
  };
  const MethodResult uniform = trained(o);
  PublicDataTrainingOptions shuffled = o;
  shuffled.pretrain.sampling = BatchSampling::kShuffle;
  const MethodResult epochs = trained(shuffled);
  EXPECT_NE(epochs.training.parameters.front(), uniform.training.parameters.front()) << "other batches";
  EXPECT_EQ(trained(shuffled).training.parameters.front(), epochs.training.parameters.front()) << "seeded";
  // The sgd method's batches are the private phase's: shuffled epochs when it samples so.
  PublicDataTrainingOptions private_shuffled = o;
  private_shuffled.private_phase.sampling = BatchSampling::kShuffle;
  EXPECT_NE(trained(private_shuffled).training.parameters.front(), uniform.training.parameters.front());
}

TEST(TrainWithPublicData, SgdMethodStepsByThePrivatePhasesOptimizer) {
  // The sgd baseline steps by the optimizer the private methods use (here sgd with momentum), not
  // by pre-training's Adam: one full batch step from the pre-trained w0 is w0 - s (g + wd w0), with
  // g softmax regression's mean gradient written out here.
  const Dataset data = testing::random_classification(120, 5, 3, 17);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  PublicDataTrainingOptions o = small_options();
  o.methods = {PrivateTrainingMethod::kSgd};
  DpSgdOptions& phase = o.private_phase;
  phase.optimizer = Optimizer::kSgd;
  phase.momentum = 0.7;
  phase.sampling = BatchSampling::kShuffle;
  phase.batch_size = split.private_part.n();
  phase.steps = 1;
  phase.runs = 1;
  phase.weight_decay = 0.01;
  const auto trained = [&](const PublicDataTrainingOptions& options) {
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, options)
        .methods.front()
        .training.parameters.front();
  };
  PublicDataTrainingOptions start_only = o;
  start_only.private_phase.step_size = 1e-300;  // moves nothing
  const VectorXd w0 = trained(start_only);
  phase.step_size = 0.3;
  const VectorXd w1 = trained(o);

  const Dataset& z = split.private_part;
  const Index d = z.d(), K = 3;
  ASSERT_EQ(w0.size(), d * K);
  VectorXd g = VectorXd::Zero(d * K);
  for (Index i = 0; i < z.n(); ++i) {
    VectorXd logits(K);
    for (Index k = 0; k < K; ++k) logits(k) = z.X.row(i).dot(w0.segment(k * d, d));
    const VectorXd p = (logits.array() - logits.maxCoeff()).exp().matrix();
    for (Index k = 0; k < K; ++k) {
      const double residual = p(k) / p.sum() - (static_cast<Index>(z.y(i)) == k ? 1.0 : 0.0);
      g.segment(k * d, d) += residual * z.X.row(i).transpose() / static_cast<double>(z.n());
    }
  }
  const VectorXd expected = w0 - 0.3 * (g + 0.01 * w0);
  EXPECT_LT((w1 - expected).norm(), 1e-12 * expected.norm());
  EXPECT_GT((w1 - w0).norm(), 1e-3 * w0.norm());

  phase.optimizer = Optimizer::kAdam;  // Adam's first step moves every coordinate by about s
  const VectorXd adam = trained(o);
  EXPECT_NEAR((adam - w0).cwiseAbs().maxCoeff(), 0.3, 1e-6);

  // The thesis' count (offset 1): the first step moves by s sqrt(1 + b2) / (1 + b1) = 0.744 s, and
  // pre-training, which the thesis' code calls alike, takes the offset too.
  phase.adam_bias_correction_offset = 1;
  start_only.private_phase.adam_bias_correction_offset = 1;
  const VectorXd w0_offset = trained(start_only);
  EXPECT_GT((w0_offset - w0).norm(), 1e-6 * w0.norm());
  const VectorXd adam_offset = trained(o);
  EXPECT_NEAR((adam_offset - w0_offset).cwiseAbs().maxCoeff(), 0.3 * std::sqrt(1.999) / 1.9, 1e-6);
}

TEST(TrainWithPublicData, FimWithLambdaZeroIsDpSgdAndDpSgdIsTheClosedForm) {
  REQUIRE_PLUGIN();
  // 8 x 8 images: the conditional model's exact accounting (a Jacobian in x of every released
  // gradient, through LibTorch) costs the square of the pixels. Its convolutional branch needs
  // larger images (other tests train it) and is left out.
  const Dataset data = image_data(60, 3, 31, 8);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  PublicDataTrainingOptions o = small_options();
  o.gradient_model.conv = false;
  o.freeze_fraction = 0.0;
  o.gradient_model.lambda = 0.0;  // the objective is ||g_phi||^2 (or ||c||^2) alone: it stays at its zero start
  o.methods = {PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kFim};
  for (GradientModelKind kind : {GradientModelKind::kVector, GradientModelKind::kConditional}) {
    o.gradient_model.kind = kind;
    const PublicDataTrainingResult result = train_with_public_data(split.public_part, split.private_part, Dataset{}, o);
    const DpSgdResult& dpsgd = result.find(PrivateTrainingMethod::kDpSgd)->training;
    const DpSgdResult& fim = result.find(PrivateTrainingMethod::kFim)->training;
    EXPECT_EQ(fim.final_snapshot().fisher_trace, dpsgd.final_snapshot().fisher_trace) << to_string(kind);
    EXPECT_EQ(fim.parameters, dpsgd.parameters) << to_string(kind);
    for (double cosine : result.find(PrivateTrainingMethod::kFim)->perturbation_cosine[0]) EXPECT_EQ(cosine, 0.0);
    if (kind == GradientModelKind::kVector)
      for (const VectorNorms& n : result.find(PrivateTrainingMethod::kFim)->vector_norms[0]) {
        EXPECT_EQ(n.perturbation, 0.0);
        EXPECT_GT(n.base, 0.0);
        EXPECT_LE(n.released, n.base * (1 + 1e-12));
      }
  }

  // Without pre-training dpsgd starts at zero, as train_dpsgd's softmax GLM: same batches, noise
  // and accounting, the trace by the closed form.
  o.pretrain.steps = 0;
  o.methods = {PrivateTrainingMethod::kDpSgd};
  const PublicDataTrainingResult scratch = train_with_public_data(split.public_part, split.private_part, Dataset{}, o);
  const DpSgdResult closed_form = train_dpsgd(split.private_part, Dataset{}, resolved_private_phase(o, split.private_part.n()));
  const VectorXd& a = scratch.methods[0].training.final_snapshot().fisher_trace;
  const VectorXd& b = closed_form.final_snapshot().fisher_trace;
  EXPECT_LT((a - b).norm(), 1e-10 * b.norm());
  EXPECT_GT(b.minCoeff() + b.maxCoeff(), 0.0);
  for (std::size_t r = 0; r < closed_form.parameters.size(); ++r)
    EXPECT_LT((scratch.methods[0].training.parameters[r] - closed_form.parameters[r]).norm(),
              1e-10 * closed_form.parameters[r].norm());
}

TEST(TrainWithPublicData, PruneKeepsFrozenParametersAndEveryMethodStartsFromThePretrainedModel) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(60, 2, 41);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = small_options();
  o.private_phase.steps = 1;
  o.private_phase.runs = 1;
  o.methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kPrune,
               PrivateTrainingMethod::kFim};
  const PublicDataTrainingResult result = train_with_public_data(split.public_part, split.private_part, data, o);
  EXPECT_EQ(result.parameter_count, 256 * 2);
  const MethodResult& prune = *result.find(PrivateTrainingMethod::kPrune);
  const MethodResult& fim = *result.find(PrivateTrainingMethod::kFim);
  EXPECT_EQ(prune.frozen, 256);
  EXPECT_EQ(fim.frozen, 256);
  // Pre-train again by hand (zero private steps) to find the start and its frozen coordinates.
  PublicDataTrainingOptions start_only = o;
  start_only.private_phase.steps = 1;
  start_only.methods = {PrivateTrainingMethod::kSgd};
  start_only.private_phase.step_size = 1e-300;  // moves nothing
  const VectorXd start = train_with_public_data(split.public_part, split.private_part, data, start_only)
                             .methods[0].training.parameters[0];
  const std::vector<bool> frozen = smallest_magnitude_mask(start, 0.5);
  Index moved_free = 0;
  for (const MethodResult* m : {&prune, &fim}) {
    const VectorXd& w = m->training.parameters[0];
    for (Index i = 0; i < w.size(); ++i) {
      if (frozen[static_cast<std::size_t>(i)]) EXPECT_EQ(w(i), start(i)) << to_string(m->method) << " coordinate " << i;
      else moved_free += w(i) != start(i);
    }
  }
  EXPECT_GT(moved_free, 200);
  const VectorXd& dpsgd = result.find(PrivateTrainingMethod::kDpSgd)->training.parameters[0];
  Index moved = 0;
  for (Index i = 0; i < dpsgd.size(); ++i) moved += frozen[static_cast<std::size_t>(i)] && dpsgd(i) != start(i);
  EXPECT_GT(moved, 200) << "dpsgd freezes nothing";
  EXPECT_EQ(result.pretrain_test_accuracy.size(), 1u);
  EXPECT_EQ(fim.perturbation_cosine[0].size(), 1u);
}

TEST(TrainWithPublicData, ReferenceLogitIsTheOneLogitModel) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(60, 2, 43);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 4);
  PublicDataTrainingOptions o = small_options();
  o.reference_logit = true;
  o.methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kPrune,
               PrivateTrainingMethod::kFim};
  const PublicDataTrainingResult result = train_with_public_data(split.public_part, split.private_part, data, o);
  const Index p = 256;  // the softmax rows: 16 x 16 pixels, no intercept
  ASSERT_EQ(result.parameter_count, 2 * p);
  for (const MethodResult& m : result.methods) {
    for (const VectorXd& w : m.training.parameters) {
      EXPECT_EQ(w.tail(p), VectorXd::Zero(p)) << to_string(m.method) << ": the last logit stays 0";
      EXPECT_GT(w.head(p).norm(), 0.0) << to_string(m.method);
    }
    if (m.method == PrivateTrainingMethod::kPrune || m.method == PrivateTrainingMethod::kFim)
      EXPECT_EQ(m.frozen, std::llround(0.5 * static_cast<double>(p))) << "half of the trainable coordinates";
  }

  // From a zero start, the first step's traces are logistic regression's closed form with the
  // labels flipped (p(class 0) = sigmoid(w . x)), at w = 0.
  o.pretrain.steps = 0;
  o.private_phase.steps = 1;
  o.methods = {PrivateTrainingMethod::kDpSgd};
  const VectorXd trace = train_with_public_data(split.public_part, split.private_part, Dataset{}, o)
                             .methods[0].training.final_snapshot().fisher_trace;
  Dataset flipped = split.private_part;
  flipped.y = (1.0 - flipped.y.array()).matrix();
  DpSgdOptions logistic = resolved_private_phase(o, split.private_part.n());
  logistic.kind = ModelKind::kLogistic;
  const VectorXd expected = train_dpsgd(flipped, Dataset{}, logistic).final_snapshot().fisher_trace;
  EXPECT_GT(expected.maxCoeff(), 0.0);
  EXPECT_LT((trace - expected).norm(), 1e-10 * expected.norm());
  // Two logits: the gradient is [x r; -x r], twice the Jacobian's squared norm. Far below the
  // clip norm the smooth clip is a constant scale to O(||g|| / C), so the traces are in ratio 2.
  o.private_phase.clip_norm = 1e7;
  const auto first_trace = [&](bool reference) {
    o.reference_logit = reference;
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, o)
        .methods[0].training.final_snapshot().fisher_trace;
  };
  const VectorXd one = first_trace(true), two = first_trace(false);
  EXPECT_LT((two - 2.0 * one).norm(), 1e-4 * two.norm());
  PublicDataTrainingOptions bad = small_options();
  bad.reference_logit = true;
  NetworkOptions network;
  network.architecture = NetworkArchitecture::kMlp;
  bad.private_phase.network = network;
  expect_invalid([&] { bad.validate(); }, {"reference_logit", "softmax"});
}

TEST(TrainWithPublicData, TrainsANetworkWithFrozenCoordinatesAndALearnedGradient) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(50, 2, 61);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  PublicDataTrainingOptions o = small_options();
  o.private_phase.runs = 1;
  o.private_phase.steps = 2;
  o.private_phase.network = small_conv_network();
  o.methods = {PrivateTrainingMethod::kPrune, PrivateTrainingMethod::kFim};
  const PublicDataTrainingResult result = train_with_public_data(split.public_part, split.private_part, data, o);
  const Index p = 2 * 9 + 2 + 2 * 32 + 2;  // conv 2 x (1 x 3 x 3) + 2, dense 2 x (2 x 4 x 4) + 2
  EXPECT_EQ(result.parameter_count, p);
  for (const MethodResult& m : result.methods) {
    EXPECT_EQ(m.frozen, p / 2);
    EXPECT_GT(m.training.final_snapshot().fisher_trace.maxCoeff(), 0.0) << to_string(m.method);
    EXPECT_TRUE(m.training.final_snapshot().fisher_trace.allFinite());
  }
  EXPECT_EQ(result.find(PrivateTrainingMethod::kFim)->perturbation_cosine[0].size(), 2u);
}

TEST(TrainWithPublicData, ProbesDrawnOnceAStepTrainFimReproduciblyOnANetworkAndSoftmaxRegression) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(50, 2, 71);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  for (const bool network : {true, false}) {
    SCOPED_TRACE(network ? "network" : "softmax regression");
    PublicDataTrainingOptions o = small_options();
    o.private_phase.runs = 1;
    o.private_phase.steps = 3;
    o.freeze_fraction = 0.5;
    if (network) o.private_phase.network = small_conv_network();
    o.methods = {PrivateTrainingMethod::kFim};
    const auto fim = [&](ProbeDraws draws) {
      PublicDataTrainingOptions options = o;
      options.gradient_model.probe_draws = draws;
      return train_with_public_data(split.public_part, split.private_part, Dataset{}, options).methods.front();
    };
    const MethodResult once = fim(ProbeDraws::kStep), again = fim(ProbeDraws::kStep), fresh = fim(ProbeDraws::kBatch);
    const VectorXd& trace = once.training.final_snapshot().fisher_trace;
    EXPECT_TRUE(trace.allFinite());
    EXPECT_GT(trace.maxCoeff(), 0.0);
    EXPECT_EQ(trace, again.training.final_snapshot().fisher_trace) << "seeded";
    EXPECT_EQ(once.training.parameters, again.training.parameters);
    // Other probes, another c: the release and its accounting move, but not by much (the same
    // objective, its expectation over the probes unchanged).
    const VectorXd& other = fresh.training.final_snapshot().fisher_trace;
    EXPECT_NE(trace, other);
    EXPECT_LT((trace - other).norm(), 0.5 * other.norm());
  }
}

TEST(TrainWithPublicData, KeptPublicRecordsWithinTheBudgetOrEachBatchsOwnGiveTheSameTraining) {
  REQUIRE_PLUGIN();
  // fim on a network with the thesis' per-batch probes over epochs keeps the public examples'
  // records for each private step where they fit max_memory, and otherwise computes each batch's
  // terms afresh: the same probes and updates, so the same training to rounding.
  const Dataset data = image_data(50, 2, 81);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  PublicDataTrainingOptions o = small_options();
  o.private_phase.runs = 1;
  o.private_phase.steps = 2;
  o.freeze_fraction = 0.5;
  o.private_phase.network = small_conv_network();
  o.methods = {PrivateTrainingMethod::kFim};
  const auto fim = [&](ByteSize budget, Index steps) {
    PublicDataTrainingOptions options = o;
    options.private_phase.max_memory = budget;
    options.private_phase.steps = steps;
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, options).methods.front();
  };
  const MethodResult kept = fim(default_memory_budget(), 2);
  EXPECT_EQ(kept.objective_terms, kPublicRecordsKept);
  // Bisect the budget (runs of one step: the choice is made before training) between one that
  // training refuses and one where it keeps the records, until it trains without keeping them (the
  // kept records and an epoch's terms are the gap between). This small training needs under 64 MB.
  std::uint64_t refused = 0, kept_at = std::uint64_t{1} << 26;
  std::optional<std::uint64_t> without;
  while (!without && kept_at - refused > 1) {
    const std::uint64_t middle = refused + (kept_at - refused) / 2;
    try {
      if (fim(ByteSize{middle}, 1).objective_terms == kPublicRecordsKept) kept_at = middle;
      else without = middle;
    } catch (const MemoryLimitError&) {
      refused = middle;
    }
  }
  ASSERT_TRUE(without.has_value()) << "no budget between " << refused << " and " << kept_at << " bytes";
  const std::optional<MethodResult> per_batch = fim(ByteSize{*without}, 2);
  EXPECT_EQ(per_batch->objective_terms, kPublicRecordsPerBatch);
  const VectorXd& a = kept.training.final_snapshot().fisher_trace;
  const VectorXd& b = per_batch->training.final_snapshot().fisher_trace;
  EXPECT_GT(a.maxCoeff(), 0.0);
  EXPECT_LT((a - b).norm(), 1e-9 * a.norm());
  EXPECT_LT((kept.training.parameters[0] - per_batch->training.parameters[0]).norm(),
            1e-9 * kept.training.parameters[0].norm());
  // Probes drawn once a step keep no records: no choice is reported.
  PublicDataTrainingOptions step = o;
  step.gradient_model.probe_draws = ProbeDraws::kStep;
  EXPECT_TRUE(train_with_public_data(split.public_part, split.private_part, Dataset{}, step).methods.front()
                  .objective_terms.empty());
}

TEST(TrainWithPublicData, FimWithLambdaZeroTrainsTheConstantModelOnItsNormAloneExactly) {
  REQUIRE_PLUGIN();  // private training with public data runs its released gradients through the plugin
  // With lambda 0 the Fisher term is skipped and the objective is ||c||^2 (gradient 2c) on every
  // batch. A lambda of 1e-300 computes the whole objective (probes, released gradients, the clip's
  // terms) and adds under 1e-290 to a gradient of order 1e-2: the same bits, so the shortcut is exact.
  const Dataset data = testing::random_classification(90, 6, 3, 17);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = small_options();
  o.private_phase.runs = 1;
  o.private_phase.steps = 3;
  o.gradient_model.trace = GradientTrace::kProbes;
  o.methods = {PrivateTrainingMethod::kFim};
  for (const ProbeDraws draws : {ProbeDraws::kBatch, ProbeDraws::kStep}) {
    SCOPED_TRACE(to_string(draws));
    o.gradient_model.probe_draws = draws;
    const auto fim = [&](double lambda) {
      PublicDataTrainingOptions options = o;
      options.gradient_model.lambda = lambda;
      return train_with_public_data(split.public_part, split.private_part, Dataset{}, options).methods.front();
    };
    const MethodResult zero = fim(0.0), tiny = fim(1e-300), weighed = fim(1e3);
    EXPECT_EQ(zero.training.parameters, tiny.training.parameters);
    EXPECT_EQ(zero.training.final_snapshot().fisher_trace, tiny.training.final_snapshot().fisher_trace);
    EXPECT_EQ(zero.perturbation_cosine, tiny.perturbation_cosine);
    EXPECT_NE(zero.training.parameters, weighed.training.parameters) << "lambda moves c";
  }
}

TEST(TrainOneModel, ReleasesTheSameModelWithoutAccounting) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(40, 2, 71);
  const PublicPrivateSplit split = split_public_private(data, 0.5, 4);
  PublicDataTrainingOptions o = small_options();
  o.private_phase.runs = 1;
  for (PrivateTrainingMethod method : {PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kFim}) {
    o.methods = {method};
    const VectorXd accounted =
        train_with_public_data(split.public_part, split.private_part, Dataset{}, o).methods[0].training.parameters[0];
    const VectorXd alone = train_one_model(split.public_part, split.private_part, o, method);
    EXPECT_LT((alone - accounted).norm(), 1e-12 * accounted.norm()) << to_string(method);
  }
}

// Stopped twice (once inside a run, once across the boundary between runs) and resumed: the same
// parameters, traces and diagnostics, to the bit, as the straight run; fim's constant and vector
// gradient models (their phi and Adam's moments are in the resume file) and dpsgd and prune.
TEST(TrainWithPublicData, StoppedAndResumedIsTheStraightRun) {
  REQUIRE_PLUGIN();
  const Dataset data = image_data(60, 3, 31);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  const testing::TempDir dir;
  constexpr GradientPrecision k64 = GradientPrecision::kFloat64, k32 = GradientPrecision::kFloat32;
  for (auto [method, kind, state] : {std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kConstant, k64},
                                     std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kConstant, k32},
                                     std::tuple{PrivateTrainingMethod::kFim, GradientModelKind::kVector, k64},
                                     std::tuple{PrivateTrainingMethod::kPrune, GradientModelKind::kConstant, k64},
                                     std::tuple{PrivateTrainingMethod::kDpSgd, GradientModelKind::kConstant, k64}}) {
    const std::string label = to_string(method) + " " + to_string(kind) + " " + to_string(state);
    PublicDataTrainingOptions o = small_options();
    o.methods = {method};
    o.gradient_model.kind = kind;
    o.gradient_model.state_precision = state;
    const PublicDataTrainingResult straight = train_with_public_data(split.public_part, split.private_part, data, o);
    o.private_phase.checkpoint_path = dir.file("state");
    o.private_phase.stop_after = 4;  // runs of 6 steps: stops at run 0 step 4, then run 1 step 2
    for (int call = 0; call < 2; ++call) {
      const PublicDataTrainingResult stopped = train_with_public_data(split.public_part, split.private_part, data, o);
      EXPECT_FALSE(stopped.complete) << label;
      EXPECT_EQ(stopped.methods.back().training.steps_done, 4 * (call + 1)) << label;
      EXPECT_TRUE(std::filesystem::exists(o.private_phase.checkpoint_path)) << label;
    }
    o.private_phase.stop_after = 0;
    const PublicDataTrainingResult resumed = train_with_public_data(split.public_part, split.private_part, data, o);
    ASSERT_TRUE(resumed.complete) << label;
    EXPECT_TRUE(resumed.methods[0].training.resumed) << label;
    EXPECT_FALSE(std::filesystem::exists(o.private_phase.checkpoint_path)) << label;  // kRemove
    const MethodResult &a = straight.methods[0], &b = resumed.methods[0];
    EXPECT_EQ(b.training.parameters, a.training.parameters) << label;
    EXPECT_EQ(b.training.final_snapshot().fisher_trace, a.training.final_snapshot().fisher_trace) << label;
    EXPECT_EQ(b.training.final_snapshot().test_accuracy, a.training.final_snapshot().test_accuracy) << label;
    EXPECT_EQ(b.perturbation_cosine, a.perturbation_cosine) << label;
    EXPECT_EQ(b.gradient_model_loss.size(), a.gradient_model_loss.size()) << label;
    for (std::size_t r = 0; r < a.gradient_model_loss.size(); ++r)
      for (std::size_t t = 0; t < a.gradient_model_loss[r].size(); ++t)
        EXPECT_TRUE(a.gradient_model_loss[r][t] == b.gradient_model_loss[r][t] ||
                    (std::isnan(a.gradient_model_loss[r][t]) && std::isnan(b.gradient_model_loss[r][t])))
            << label;
    ASSERT_EQ(b.vector_norms.size(), a.vector_norms.size()) << label;
    for (std::size_t r = 0; r < a.vector_norms.size(); ++r) {
      ASSERT_EQ(b.vector_norms[r].size(), a.vector_norms[r].size()) << label;
      for (std::size_t t = 0; t < a.vector_norms[r].size(); ++t) {
        EXPECT_EQ(b.vector_norms[r][t].perturbation, a.vector_norms[r][t].perturbation) << label;
        EXPECT_EQ(b.vector_norms[r][t].released, a.vector_norms[r][t].released) << label;
      }
    }
    EXPECT_EQ(b.fisher_term_sum, a.fisher_term_sum) << label;
    if (method == PrivateTrainingMethod::kFim) EXPECT_EQ(a.perturbation_cosine[1].size(), 6u) << label;
  }
}

// A resume file of fim refuses another gradient model (naming what changed) and another method.
/// fim with the constant gradient model, stopped after 3 steps: its resume file is in `dir`.
struct StoppedFimRun {
  Dataset data = image_data(60, 3, 31);
  PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  testing::TempDir dir;
  PublicDataTrainingOptions options = small_options();

  StoppedFimRun() {
    options.methods = {PrivateTrainingMethod::kFim};
    options.gradient_model.kind = GradientModelKind::kConstant;
    options.private_phase.checkpoint_path = dir.file("state");
    options.private_phase.stop_after = 3;
    EXPECT_FALSE(run(options).complete);
  }
  PublicDataTrainingResult run(const PublicDataTrainingOptions& o) const {
    return train_with_public_data(split.public_part, split.private_part, Dataset{}, o);
  }
};

TEST(TrainWithPublicData, ResumeRefusesAnotherGradientModelOrMethod) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  PublicDataTrainingOptions other = stopped.options;
  other.gradient_model.lambda *= 2;
  expect_data_error([&] { stopped.run(other); }, {"different job", "gradient_model"});
  other = stopped.options;
  other.methods = {PrivateTrainingMethod::kPrune};
  expect_data_error([&] { stopped.run(other); }, {"different job", "method", "fim", "prune"});
}

/// The first list named `key` anywhere in `value` (the resume payload's model state).
nlohmann::json* find_list(nlohmann::json& value, const std::string& key) {
  if (value.is_object()) {
    for (auto& [name, member] : value.items()) {
      if (name == key && member.is_array() && !member.empty()) return &member;
      if (nlohmann::json* found = find_list(member, key)) return found;
    }
  } else if (value.is_array()) {
    for (nlohmann::json& member : value)
      if (nlohmann::json* found = find_list(member, key)) return found;
  }
  return nullptr;
}

// Issue 50: a resume file with a valid CRC and a negative Fisher-term sum was taken; every sum of
// squares and norm is range-checked, as the trainer's traces are.
TEST(TrainWithPublicData, ResumeRefusesANegativeSumOfSquares) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  const PublicDataTrainingOptions& o = stopped.options;
  const std::string saved = testing::read_bytes(o.private_phase.checkpoint_path);
  for (const char* key : {"fisher_term_sum", "norms_released", "second_moment"}) {
    nlohmann::json payload = testing::resume_payload(saved);
    nlohmann::json* list = find_list(payload, key);
    ASSERT_NE(list, nullptr) << key;
    (*list)[0] = -1.0;
    std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << testing::with_resume_payload(saved, payload);
    expect_data_error([&] { stopped.run(o); }, {std::string(key) + "[0]' is -1", "expected a number >= 0"});
  }
}

/// Renames the member `from` of every object in `value` to `to`; the number renamed.
int rename_key(nlohmann::json& value, const std::string& from, const std::string& to) {
  int renamed = 0;
  if (value.is_object() && value.contains(from)) {
    value[to] = std::move(value[from]);
    value.erase(from);
    ++renamed;
  }
  if (value.is_structured())
    for (nlohmann::json& member : value) renamed += rename_key(member, from, to);
  return renamed;
}

// The Fisher-term sum was saved as "thesis_trace" before its rename: such a resume file is read,
// for one version, to the same result as under the new key.
TEST(TrainWithPublicData, ResumeReadsTheFisherTermSumUnderItsFormerKey) {
  REQUIRE_PLUGIN();
  const StoppedFimRun stopped;
  const std::string saved = testing::read_bytes(stopped.options.private_phase.checkpoint_path);
  nlohmann::json payload = testing::resume_payload(saved);
  ASSERT_GT(rename_key(payload, "fisher_term_sum", "thesis_trace"), 0);
  PublicDataTrainingOptions o = stopped.options;
  o.private_phase.stop_after = 0;
  std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << testing::with_resume_payload(saved, payload);
  const PublicDataTrainingResult former = stopped.run(o);
  std::ofstream(o.private_phase.checkpoint_path, std::ios::binary) << saved;
  const PublicDataTrainingResult current = stopped.run(o);
  ASSERT_TRUE(former.complete && current.complete);
  const VectorXd& sum = current.methods[0].fisher_term_sum[0];
  EXPECT_GT(sum.sum(), 0.0);
  EXPECT_EQ(former.methods[0].fisher_term_sum[0], sum);
  EXPECT_EQ(former.methods[0].training.parameters[0], current.methods[0].training.parameters[0]);
}

TEST(TrainWithPublicData, RefusesBadOptionsWithTheirNames) {
  const Dataset data = image_data(30, 2, 51);
  const PublicPrivateSplit split = split_public_private(data, 0.5, 1);
  const auto refuses = [&](const std::function<void(PublicDataTrainingOptions&)>& change,
                           std::vector<std::string> fragments) {
    PublicDataTrainingOptions o = small_options();
    change(o);
    expect_invalid([&] { train_with_public_data(split.public_part, split.private_part, Dataset{}, o); },
                                     fragments);
  };
  refuses([](auto& o) { o.public_fraction = 1.0; }, {"public_fraction", "(0, 1)"});
  refuses([](auto& o) { o.freeze_fraction = 1.0; }, {"freeze_fraction"});
  refuses([](auto& o) { o.methods.clear(); }, {"methods"});
  refuses([](auto& o) { o.gradient_model.hidden = {}; }, {"gradient_hidden"});
  refuses([](auto& o) { o.gradient_model.probes = 0; }, {"gradient_probes"});
  refuses([](auto& o) { o.gradient_model.lambda = -1; }, {"lambda"});
  refuses([](auto& o) { o.private_phase.trace = TraceMethod::kCoordinates; }, {"trace = coordinates"});
  refuses([](auto& o) { o.private_phase.spectral = SpectralMethod::kExact; }, {"spectral = exact"});
  refuses([](auto& o) { o.private_phase.checkpoint_path = "x"; }, {"checkpoint", "one method at a time"});
  refuses([](auto& o) { o.private_phase.checkpoint_path = "x"; o.methods = {PrivateTrainingMethod::kSgd}; },
          {"checkpoint", "one method at a time"});
  refuses([](auto& o) {
            o.private_phase.checkpoint_path = "x";
            o.methods = {PrivateTrainingMethod::kFim};
            o.gradient_model.kind = GradientModelKind::kConditional;
          },
          {"checkpoint", "conditional gradient model", "gradient_model"});
  refuses([](auto& o) { o.private_phase.kind = ModelKind::kLogistic; }, {"softmax"});
  refuses([](auto& o) { o.gradient_model.precision = GradientPrecision::kFloat32; },
          {"gradient_precision = float32", "networks", "float64"});
  refuses([](auto& o) {
            o.gradient_model.state_precision = GradientPrecision::kFloat32;
            o.gradient_model.kind = GradientModelKind::kConditional;
          },
          {"gradient_state_precision = float32", "constant or vector", "float64"});
  refuses([](auto& o) { o.gradient_model.probe_draws = ProbeDraws::kStep; o.gradient_model.trace = GradientTrace::kExact; },
          {"gradient_probe_draws = step", "gradient_trace = probes"});
  refuses([](auto& o) {
            o.gradient_model.probe_draws = ProbeDraws::kStep;
            o.gradient_model.kind = GradientModelKind::kConditional;
          },
          {"gradient_probe_draws = step", "constant or vector"});
  refuses([](auto& o) { o.pretrain.step_size = 0; }, {"pretrain_step_size"});
  refuses([](auto& o) { o.pretrain.sampling = BatchSampling::kPoisson; }, {"pretrain_sampling", "poisson"});
  refuses([](auto& o) { o.gradient_model.batch_size = 1000; o.methods = {PrivateTrainingMethod::kFim}; },
          {"gradient_batch_size", "public part"});
  PublicDataTrainingOptions o = small_options();
  expect_invalid(
      [&] { train_with_public_data(split.public_part, Dataset{}, Dataset{}, o); }, {"private part is empty"});
}

}  // namespace
}  // namespace filkit
