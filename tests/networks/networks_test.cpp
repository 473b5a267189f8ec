// The LibTorch networks (networks.hpp) against independent ground truth: finite differences of
// the loss and of the clipped gradient, the closed-form GLM of clipped_gradient.hpp, dense
// Jacobians built column by column, and one-example-at-a-time evaluation (skipped when the LibTorch
// plugin cannot be loaded); and the plugin's loading: the filkit executable does not link
// LibTorch, and a missing plugin is a clear error.
#include "filkit/networks/networks.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"

#include "test_util.hpp"

#include <Eigen/SVD>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

namespace filkit {
namespace {

using filkit::testing::random_classification;

#define REQUIRE_TORCH() \
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)"

NetworkOptions options_for(NetworkArchitecture architecture) {
  NetworkOptions options;
  options.architecture = architecture;
  options.hidden = {7, 5};
  options.chunk = 3;
  return options;
}

/// A network to test: a built-in architecture or a layer specification, on vectors or images.
struct NetworkCase {
  std::string name;
  NetworkOptions options;
  Index d = 6;
  std::optional<ImageShape> image;
};

// gtest prints parameters in failure messages and test lists: the name and the layers, not bytes.
void PrintTo(const NetworkCase& c, std::ostream* out) {
  *out << c.name << (c.options.layers.empty() ? "" : " " + c.options.layers);
}

NetworkCase builtin_case(NetworkArchitecture architecture) {
  NetworkCase c{to_string(architecture), options_for(architecture)};
  if (architecture == NetworkArchitecture::kCnn) c.d = 256;  // a square grey image without a shape
  if (architecture == NetworkArchitecture::kCifarCnn) c.image = ImageShape{3, 8, 8};
  if (c.image) c.d = c.image->size();
  return c;
}

/// A random chain of every layer kind on a random (colour or grey, not always square) image; the
/// draw is repeated until the shapes fit.
NetworkCase random_case(unsigned seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](Index low, Index high) { return std::uniform_int_distribution<Index>(low, high)(rng); };
  const char* activations[] = {"tanh", "sigmoid", "softplus:2", "gelu", "gelu:tanh", "elu:0.7", "selu"};
  auto activation = [&] { return std::string(activations[pick(0, 6)]); };
  while (true) {
    NetworkCase c{"random" + std::to_string(seed), options_for(NetworkArchitecture::kCustom)};
    c.image = ImageShape{pick(1, 2) == 1 ? 1 : 3, pick(7, 11), pick(7, 11)};
    c.d = c.image->size();
    std::string spec;
    for (Index block = pick(1, 2); block > 0; --block) {
      spec += "conv:" + std::to_string(pick(2, 4)) + ":" + std::to_string(pick(2, 3)) + ":" +
              std::to_string(pick(1, 2)) + ":" + std::to_string(pick(0, 1)) + "," + activation() + ",";
      if (pick(0, 1) == 1) spec += pick(0, 1) == 1 ? "avgpool:2:1," : "avgpool:2,";
    }
    spec += "flatten,";
    if (pick(0, 1) == 1) spec += "dense:" + std::to_string(pick(3, 6)) + "," + activation() + ",";
    c.options.layers = spec + "dense:3";
    try {
      plan_network(parse_network_layers(c.options.layers), {c.image->channels, c.image->height, c.image->width}, 3);
      c.name += "_" + std::to_string(c.image->channels) + "x" + std::to_string(c.image->height) + "x" +
                std::to_string(c.image->width);
      return c;
    } catch (const std::invalid_argument&) {  // an image too small for the drawn windows: draw again
    }
  }
}

/// A small instance of a case: random inputs in [0, 1], labels, weights.
struct Fixture {
  Network network;
  RowMatrix X;
  VectorXd y, w;
};

Fixture fixture(const NetworkCase& c, Index rows = 5, unsigned seed = 3) {
  Network network(c.options, c.d, 3, c.image);
  std::mt19937_64 rng(seed);
  VectorXd w = network.initial_parameters(rng);
  if (c.options.architecture == NetworkArchitecture::kSoftmax) {
    std::normal_distribution<double> normal(0.0, 0.7);
    for (Index i = 0; i < w.size(); ++i) w(i) = normal(rng);
  }
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  RowMatrix X(rows, c.d);
  for (Index i = 0; i < X.size(); ++i) X(i) = pixel(rng);
  VectorXd y(rows);
  for (Index i = 0; i < rows; ++i) y(i) = static_cast<double>(i % 3);
  return {std::move(network), X, y, w};
}

Fixture fixture(NetworkArchitecture architecture, Index rows = 5, unsigned seed = 3) {
  return fixture(builtin_case(architecture), rows, seed);
}

double cross_entropy(const Network& network, const VectorXd& w, const RowMatrix& x, double y) {
  const MatrixXd scores = network.logits(w, x);
  const double top = scores.maxCoeff();
  return top + std::log((scores.array() - top).exp().sum()) - scores(0, static_cast<Index>(y));
}

class EveryArchitecture : public ::testing::TestWithParam<NetworkCase> {};

// The built-ins and six random architectures (every layer kind, grey and colour, any image size).
INSTANTIATE_TEST_SUITE_P(Networks, EveryArchitecture,
                         ::testing::Values(builtin_case(NetworkArchitecture::kSoftmax),
                                           builtin_case(NetworkArchitecture::kMlp),
                                           builtin_case(NetworkArchitecture::kCnn),
                                           builtin_case(NetworkArchitecture::kCifarCnn), random_case(1), random_case(2),
                                           random_case(3), random_case(4), random_case(5), random_case(6)),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST_P(EveryArchitecture, PerExampleGradientsAreDirectionalDerivativesOfTheLoss) {
  REQUIRE_TORCH();
  const Fixture f = fixture(GetParam());
  const MatrixXd g = f.network.gradients(f.w, f.X, f.y);
  ASSERT_EQ(g.cols(), f.network.parameter_count());
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (Index b = 0; b < f.X.rows(); ++b) {
    VectorXd u(f.w.size());
    for (Index i = 0; i < u.size(); ++i) u(i) = normal(rng);
    const double h = 1e-5;
    const RowMatrix x = f.X.row(b);
    const double fd =
        (cross_entropy(f.network, f.w + h * u, x, f.y(b)) - cross_entropy(f.network, f.w - h * u, x, f.y(b))) / (2 * h);
    EXPECT_NEAR(g.row(b).dot(u), fd, 1e-7 * std::max(1.0, std::abs(fd))) << "example " << b;
    // Batching does not mix examples: the row equals the example's own gradient.
    EXPECT_LT((f.network.gradients(f.w, x, f.y.segment(b, 1)).row(0) - g.row(b)).norm(), 1e-12 * g.row(b).norm());
  }
}

TEST_P(EveryArchitecture, ClippedGradientsFollowTheGeluClip) {
  REQUIRE_TORCH();
  const Fixture f = fixture(GetParam());
  for (double C : {0.05, 0.5, 50.0}) {
    const MatrixXd g = f.network.gradients(f.w, f.X, f.y), clipped = f.network.clipped_gradients(f.w, f.X, f.y, C);
    for (Index b = 0; b < g.rows(); ++b) {
      const VectorXd expected = soft_clip_factor(g.row(b).norm(), C) * g.row(b).transpose();
      EXPECT_LT((clipped.row(b).transpose() - expected).norm(), 1e-13 * expected.norm() + 1e-300);
      EXPECT_LE(clipped.row(b).norm(), soft_clip_norm_bound() * C * (1 + 1e-12));
    }
  }
}

TEST_P(EveryArchitecture, JacobianProductsMatchFiniteDifferencesOfTheClippedGradient) {
  REQUIRE_TORCH();
  const Fixture f = fixture(GetParam());
  const double C = 0.3;  // clipping active for some examples and not others
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  RowMatrix V(f.X.rows(), f.X.cols()), U(f.X.rows(), f.network.parameter_count());
  for (Index i = 0; i < V.size(); ++i) V(i) = normal(rng);
  for (Index i = 0; i < U.size(); ++i) U(i) = normal(rng);
  const MatrixXd Gv = f.network.jacobian_vector_products(f.w, f.X, f.y, C, V);
  const MatrixXd GtU = f.network.vector_jacobian_products(f.w, f.X, f.y, C, U);
  const double h = 1e-5;
  const MatrixXd fd =
      (f.network.clipped_gradients(f.w, f.X + h * V, f.y, C) - f.network.clipped_gradients(f.w, f.X - h * V, f.y, C)) /
      (2 * h);
  for (Index b = 0; b < f.X.rows(); ++b) {
    EXPECT_LT((Gv.row(b) - fd.row(b)).norm(), 1e-6 * fd.row(b).norm()) << "example " << b;
    // G^T u against the directional derivative of <u, g~(x)>, and the adjoint identity.
    const double fd_vjp = (fd.row(b).dot(U.row(b)));
    EXPECT_NEAR(GtU.row(b).dot(V.row(b)), fd_vjp, 1e-6 * std::abs(fd_vjp) + 1e-12);
    EXPECT_NEAR(GtU.row(b).dot(V.row(b)), Gv.row(b).dot(U.row(b)), 1e-11 * std::abs(fd_vjp) + 1e-14);
  }
}

TEST_P(EveryArchitecture, BatchedAccountingEqualsOneExampleAtATime) {
  REQUIRE_TORCH();
  Fixture f = fixture(GetParam(), 7);
  NetworkAccountingRequest request;
  request.spectral = SpectralMethod::kPowerIteration;
  for (TraceMethod trace : {TraceMethod::kCoordinates, TraceMethod::kGaussian}) {
    request.trace = trace;
    request.probes = 2;
    request.power_iterations = 2;
    const NetworkBatchAccounting batched = f.network.account_batch(f.w, f.X, f.y, 0.3, request, 99);
    NetworkCase one = GetParam();
    one.options.chunk = 1;
    const Network single(one.options, one.d, 3, one.image);
    const NetworkBatchAccounting separate = single.account_batch(f.w, f.X, f.y, 0.3, request, 99);
    EXPECT_LT((batched.clipped_sum - separate.clipped_sum).norm(), 1e-12 * batched.clipped_sum.norm());
    EXPECT_LT((batched.trace - separate.trace).norm(), 1e-10 * batched.trace.norm());
    EXPECT_LT((batched.spectral - separate.spectral).norm(), 1e-10 * batched.spectral.norm());
    EXPECT_LT(
        (batched.clipped_sum - f.network.clipped_gradients(f.w, f.X, f.y, 0.3).colwise().sum().transpose()).norm(),
        1e-12 * batched.clipped_sum.norm());
  }
}

TEST_P(EveryArchitecture, BatchSplitAtAnyPositionDrawsTheWholeBatchsProbes) {
  // The ranks of an MPI job each account their part of a batch, passing where it starts: the
  // parts' estimates are the whole batch's, and their clipped sums add up to its sum.
  REQUIRE_TORCH();
  Fixture f = fixture(GetParam(), 7);
  const NetworkAccountingRequest request{TraceMethod::kGaussian, SpectralMethod::kPowerIteration, 2, 3};
  const NetworkBatchAccounting whole = f.network.account_batch(f.w, f.X, f.y, 0.3, request, 41);
  const Index cut = 3, rest = f.X.rows() - cut;
  const NetworkBatchAccounting head =
      f.network.account_batch(f.w, f.X.topRows(cut), f.y.head(cut), 0.3, request, 41, /*first_position=*/0);
  const NetworkBatchAccounting tail =
      f.network.account_batch(f.w, f.X.bottomRows(rest), f.y.tail(rest), 0.3, request, 41, /*first_position=*/cut);
  VectorXd trace(f.X.rows()), spectral(f.X.rows());
  trace << head.trace, tail.trace;
  spectral << head.spectral, tail.spectral;
  EXPECT_LT((trace - whole.trace).norm(), 1e-12 * whole.trace.norm());
  EXPECT_LT((spectral - whole.spectral).norm(), 1e-12 * whole.spectral.norm());
  EXPECT_LT((head.clipped_sum + tail.clipped_sum - whole.clipped_sum).norm(), 1e-12 * whole.clipped_sum.norm());
  // The position matters: the tail accounted as if it began the batch draws other probes.
  const NetworkBatchAccounting misplaced =
      f.network.account_batch(f.w, f.X.bottomRows(rest), f.y.tail(rest), 0.3, request, 41, /*first_position=*/0);
  EXPECT_GT((misplaced.trace - tail.trace).norm(), 1e-6 * tail.trace.norm());
  EXPECT_THROW(f.network.account_batch(f.w, f.X, f.y, 0.3, request, 41, -1), std::invalid_argument);
}

TEST(NetworkAccounting, ResultsAreTheSameBitsOnAnyNumberOfThreads) {
  // A chunk's pieces run on separate threads, each piece single-threaded, so nothing is summed in
  // an order that follows the thread count.
  REQUIRE_TORCH();
  Fixture f = fixture(NetworkArchitecture::kCnn, 60);
  NetworkOptions options = f.network.options();
  options.chunk = 60;  // three pieces of 20
  const Network network(options, f.network.input_dim(), f.network.num_classes());
  const NetworkAccountingRequest gaussian{TraceMethod::kGaussian, SpectralMethod::kNone, 2, 1};
  testing::expect_same_for_any_thread_count(
      [&] {
        const NetworkBatchAccounting a = network.account_batch(f.w, f.X, f.y, 0.3, gaussian, 5);
        return std::make_tuple(a.clipped_sum, a.trace, network.clipped_gradients(f.w, f.X, f.y, 0.3));
      },
      [](const auto& one, const auto& more) {
        EXPECT_TRUE(testing::same_bits(std::get<0>(one), std::get<0>(more)));
        EXPECT_TRUE(testing::same_bits(std::get<1>(one), std::get<1>(more)));
        EXPECT_TRUE(testing::same_bits(std::get<2>(one), std::get<2>(more)));
      });
}

/// G of one example, column by column from central differences of the clipped gradient.
MatrixXd finite_difference_jacobian(const Network& network, const VectorXd& w, const RowMatrix& x, double y, double C) {
  const double h = 1e-5;
  const VectorXd label = VectorXd::Constant(1, y);
  MatrixXd G(network.parameter_count(), x.cols());
  for (Index k = 0; k < x.cols(); ++k) {
    RowMatrix plus = x, minus = x;
    plus(0, k) += h;
    minus(0, k) -= h;
    G.col(k) = (network.clipped_gradients(w, plus, label, C) - network.clipped_gradients(w, minus, label, C))
                   .row(0)
                   .transpose() /
               (2 * h);
  }
  return G;
}

TEST(NetworkAccounting, ExactAndEstimatedTraceAndSpectralNormAgreeWithTheDenseJacobian) {
  REQUIRE_TORCH();
  const Fixture f = fixture(NetworkArchitecture::kMlp, 4);
  const double C = 0.3;
  NetworkAccountingRequest exact{TraceMethod::kExact, SpectralMethod::kExact, 1, 1};
  const NetworkBatchAccounting a = f.network.account_batch(f.w, f.X, f.y, C, exact, 1);
  NetworkAccountingRequest coordinates{TraceMethod::kCoordinates, SpectralMethod::kPowerIteration, 1000, 60};
  const NetworkBatchAccounting c = f.network.account_batch(f.w, f.X, f.y, C, coordinates, 2);
  NetworkAccountingRequest gaussian{TraceMethod::kGaussian, SpectralMethod::kNone, 1000, 1};
  const NetworkBatchAccounting g = f.network.account_batch(f.w, f.X, f.y, C, gaussian, 3);
  for (Index b = 0; b < f.X.rows(); ++b) {
    const MatrixXd G = finite_difference_jacobian(f.network, f.w, f.X.row(b), f.y(b), C);
    const double trace = G.squaredNorm();
    const double spectral = std::pow(Eigen::JacobiSVD<MatrixXd>(G).singularValues()(0), 2);
    EXPECT_NEAR(a.trace(b), trace, 1e-7 * trace) << "example " << b;
    EXPECT_NEAR(a.spectral(b), spectral, 1e-7 * spectral);
    EXPECT_NEAR(c.spectral(b), spectral, 1e-6 * spectral);  // power iteration, 60 steps
    // 1000 probes: parameter-side Gaussian probes have relative sd <= sqrt(2 / 1000) = 4.5%, random
    // coordinates sqrt((d max_k |G e_k|^2 / Tr - 1) / 1000), a few % here; 15% is > 3 sd for both,
    // while a wrong scale (a missing factor d, or a square root) is off by far more.
    EXPECT_NEAR(c.trace(b), trace, 0.15 * trace);
    EXPECT_NEAR(g.trace(b), trace, 0.15 * trace);
  }
}

TEST(NetworkAccounting, OneGaussianProbeIsUnbiasedWithTheVarianceOfAGaussianQuadraticForm) {
  // ||G^T u||^2 with u ~ N(0, I_p) has mean Tr(G^T G) and variance 2 ||G^T G||_F^2. The probes of a
  // dense layer are drawn from the joint law of (U a, U^T delta), not as a whole U, and those of a
  // convolution whole: both must keep this law. Copies of one example at different positions of a
  // batch draw independent probes.
  REQUIRE_TORCH();
  constexpr Index kCopies = 1000;
  for (NetworkArchitecture architecture : {NetworkArchitecture::kMlp, NetworkArchitecture::kCnn}) {
    const Fixture f = fixture(architecture, 2);
    NetworkOptions options = f.network.options();
    options.chunk = kCopies;
    const Network network(options, f.network.input_dim(), f.network.num_classes());
    const double C = 0.3;
    const NetworkAccountingRequest gaussian{TraceMethod::kGaussian, SpectralMethod::kNone, 1, 1};
    for (Index b = 0; b < f.X.rows(); ++b) {
      const MatrixXd G = finite_difference_jacobian(f.network, f.w, f.X.row(b), f.y(b), C);
      const double trace = G.squaredNorm(), variance = 2.0 * (G.transpose() * G).squaredNorm();
      const RowMatrix X = f.X.row(b).replicate(kCopies, 1);
      const VectorXd estimates =
          network.account_batch(f.w, X, VectorXd::Constant(kCopies, f.y(b)), C, gaussian, 17 + b).trace;
      const double mean = estimates.mean();
      const double sample_variance = (estimates.array() - mean).square().sum() / (kCopies - 1);
      EXPECT_NEAR(mean, trace, 4.0 * std::sqrt(variance / kCopies)) << to_string(architecture) << " example " << b;
      // The sample variance's relative sd is sqrt((kurtosis - 1) / n) <= sqrt(14 / n) = 12 %.
      EXPECT_NEAR(sample_variance, variance, 0.35 * variance) << to_string(architecture) << " example " << b;
      EXPECT_GT((estimates.array() - estimates(0)).abs().maxCoeff(), 0.0);  // not one probe repeated
    }
  }
}

TEST(NetworkAccounting, TheSoftmaxNetworkIsTheClosedFormGlm) {
  REQUIRE_TORCH();
  for (bool intercept : {false, true}) {
    NetworkOptions options = options_for(NetworkArchitecture::kSoftmax);
    options.intercept = intercept;
    const Dataset data = random_classification(6, 5, 3, 4);
    const Network network(options, 5, 3);
    const Index p = 5 + (intercept ? 1 : 0);
    std::mt19937_64 rng(8);
    std::normal_distribution<double> normal;
    MatrixXd W(p, 3);
    for (Index i = 0; i < W.size(); ++i) W(i) = 2.0 * normal(rng);
    const VectorXd w = Eigen::Map<const VectorXd>(W.data(), W.size());  // the GLM's column-major order
    const double C = 0.2;
    const ClippedGradientStep step(ModelKind::kSoftmax, W, intercept, C, LabelPrivacy::kPublic);
    NetworkAccountingRequest exact{TraceMethod::kExact, SpectralMethod::kExact, 1, 1};
    const NetworkBatchAccounting a = network.account_batch(w, data.X, data.y, C, exact, 0);
    const MatrixXd clipped = network.clipped_gradients(w, data.X, data.y, C);
    for (Index i = 0; i < data.n(); ++i) {
      const ClippedGlmGradient glm(step, data.X.row(i).transpose(), step.label_vector(data.y(i)));
      EXPECT_LT((clipped.row(i).transpose() - glm.clipped_gradient()).norm(), 1e-13 * glm.clipped_gradient().norm());
      EXPECT_NEAR(a.trace(i), glm.jacobian_trace(), 1e-11 * glm.jacobian_trace());
      EXPECT_NEAR(a.spectral(i), glm.jacobian_spectral_norm_squared(), 1e-10 * glm.jacobian_spectral_norm_squared());
    }
  }
}

// Loading the plugin names OpenBLAS' kernels from the CPU's instruction sets (network_plugin.cpp's
// choose_openblas_kernels; the rule itself is tested in python/tests/test_blas.py), unless set.
TEST(Network, LoadingThePluginNamesOpenBlasKernels) {
  REQUIRE_TORCH();
  const Network network(options_for(NetworkArchitecture::kMlp), 4, 2);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx")) GTEST_SKIP() << "the CPU has no AVX: OpenBLAS keeps its own choice";
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  ASSERT_NE(core, nullptr);
  EXPECT_FALSE(std::string(core).empty());
}

TEST(Network, HasThePapersConvNetAndRejectsBadShapes) {
  REQUIRE_TORCH();
  NetworkOptions cnn;
  EXPECT_EQ(Network(cnn, 784, 10).parameter_count(), 26010);  // docs/mathematics.md, section 7.9
  NetworkOptions mlp = options_for(NetworkArchitecture::kMlp);
  EXPECT_EQ(Network(mlp, 6, 3).parameter_count(), (6 * 7 + 7) + (7 * 5 + 5) + (5 * 3 + 3));
  EXPECT_THROW(Network(cnn, 780, 10), std::invalid_argument);  // not a square image
  EXPECT_THROW(Network(cnn, 100, 10), std::invalid_argument);  // 10 x 10: too small
  EXPECT_THROW(Network(cnn, 784, 1), std::invalid_argument);
  mlp.hidden = {};
  EXPECT_THROW(Network(mlp, 6, 3), std::invalid_argument);
  const Fixture f = fixture(NetworkArchitecture::kMlp);
  EXPECT_THROW(f.network.gradients(f.w, f.X, VectorXd::Constant(f.X.rows(), 3.0)),
               std::invalid_argument);  // label 3 of K = 3
  EXPECT_THROW(f.network.gradients(VectorXd::Zero(4), f.X, f.y), std::invalid_argument);
}

TEST(Network, InitialisesLikePyTorch) {
  REQUIRE_TORCH();
  const Network network(NetworkOptions{}, 784, 10);
  std::mt19937_64 rng(1);
  const VectorXd w = network.initial_parameters(rng);
  // conv1: fan-in 64, bound 1/8; the last dense layer: fan-in 32.
  EXPECT_LE(w.head(1040).cwiseAbs().maxCoeff(), 0.125);
  EXPECT_GT(w.head(1040).cwiseAbs().maxCoeff(), 0.12);
  EXPECT_LE(w.tail(330).cwiseAbs().maxCoeff(), 1.0 / std::sqrt(32.0));
  EXPECT_GT(w.tail(330).cwiseAbs().maxCoeff(), 0.9 / std::sqrt(32.0));
}

TEST(Network, InitialisesLikeJaxStaxWithNetworkInitJax) {
  REQUIRE_TORCH();
  // The ConvNet has few weights a layer; a wide network measures the scales: every layer's weights
  // have variance 2 / (fan_in + fan_out), truncated at 2 of the untruncated normal's standard
  // deviations; a dense bias has standard deviation 1e-2, a convolution's 1e-6.
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "conv:64:5:1:2,tanh,flatten,dense:300,tanh,dense:10";
  options.initialisation = NetworkInitialisation::kJax;
  const Network network(options, 12 * 12, 10, ImageShape{1, 12, 12});
  std::mt19937_64 rng(3);
  const VectorXd w = network.initial_parameters(rng);
  ASSERT_EQ(w.size(), network.parameter_count());
  struct Expected {
    Index fan_in, fan_out, weights, biases;
    double bias_sd;
  };
  const Expected layers[] = {
      {25, 64 * 25, 64 * 25, 64, 1e-6}, {64 * 144, 300, 64 * 144 * 300, 300, 1e-2}, {300, 10, 3000, 10, 1e-2}};
  Index offset = 0;
  for (const Expected& e : layers) {
    const VectorXd weights = w.segment(offset, e.weights);
    const double variance = 2.0 / static_cast<double>(e.fan_in + e.fan_out);
    const double sample = weights.squaredNorm() / static_cast<double>(e.weights);
    // The sample variance's relative standard error is about sqrt(2 / n) (less when truncated).
    EXPECT_NEAR(sample / variance, 1.0, 5.0 * std::sqrt(2.0 / static_cast<double>(e.weights)));
    EXPECT_LE(weights.cwiseAbs().maxCoeff(), 2.0 * std::sqrt(variance) / 0.87962566103423978);
    EXPECT_GT(weights.cwiseAbs().maxCoeff(), 0.9 * 2.0 * std::sqrt(variance) / 0.87962566103423978);
    const VectorXd biases = w.segment(offset + e.weights, e.biases);
    const double bias_rms = std::sqrt(biases.squaredNorm() / static_cast<double>(e.biases));
    EXPECT_NEAR(bias_rms / e.bias_sd, 1.0, 5.0 * std::sqrt(0.5 / static_cast<double>(e.biases)));
    offset += e.weights + e.biases;
  }
  EXPECT_EQ(offset, w.size());
  std::mt19937_64 again(3);
  EXPECT_EQ(network.initial_parameters(again), w) << "drawn from the generator alone";

  NetworkOptions softmax = options_for(NetworkArchitecture::kSoftmax);
  softmax.initialisation = NetworkInitialisation::kJax;
  try {
    Network refused(softmax, 6, 3);
    ADD_FAILURE() << "softmax with network_init jax was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("network_init"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("softmax"), std::string::npos) << error.what();
  }
}

TEST(Network, TheBuiltInConvNetsWrittenAsSpecificationsGiveBitIdenticalResults) {
  REQUIRE_TORCH();
  for (NetworkArchitecture architecture : {NetworkArchitecture::kCnn, NetworkArchitecture::kCifarCnn}) {
    const NetworkCase builtin = builtin_case(architecture);
    NetworkCase spec = builtin;
    spec.options.architecture = NetworkArchitecture::kCustom;
    spec.options.layers = to_string(builtin_network_layers(builtin.options, 3));
    spec.image = builtin.image ? builtin.image : ImageShape{1, 16, 16};
    const Fixture a = fixture(builtin), b = fixture(spec);
    ASSERT_EQ(a.w, b.w) << "the same initial parameters from the same generator";
    EXPECT_EQ(a.network.describe(), b.network.describe());
    EXPECT_EQ(a.network.logits(a.w, a.X), b.network.logits(b.w, b.X));
    EXPECT_EQ(a.network.clipped_gradients(a.w, a.X, a.y, 0.3), b.network.clipped_gradients(b.w, b.X, b.y, 0.3));
    const NetworkAccountingRequest request{TraceMethod::kGaussian, SpectralMethod::kPowerIteration, 2, 3};
    const NetworkBatchAccounting ra = a.network.account_batch(a.w, a.X, a.y, 0.3, request, 7);
    const NetworkBatchAccounting rb = b.network.account_batch(b.w, b.X, b.y, 0.3, request, 7);
    EXPECT_EQ(ra.clipped_sum, rb.clipped_sum);
    EXPECT_EQ(ra.trace, rb.trace);
    EXPECT_EQ(ra.spectral, rb.spectral);
  }
}

TEST(Network, TakesColourImagesOfAnySizeAndChecksTheirShape) {
  REQUIRE_TORCH();
  NetworkOptions cnn;  // the MNIST ConvNet on colour images: conv1 has 3 input channels
  EXPECT_EQ(Network(cnn, 3 * 28 * 28, 10, ImageShape{3, 28, 28}).parameter_count(), 26010 + 2 * 16 * 64);
  NetworkOptions cifar;
  cifar.architecture = NetworkArchitecture::kCifarCnn;
  EXPECT_EQ(Network(cifar, 3072, 10, ImageShape{3, 32, 32}).parameter_count(), 550570);
  EXPECT_THROW(Network(cnn, 3 * 28 * 28, 10, ImageShape{3, 28, 27}), std::invalid_argument);  // C H W != d
  NetworkOptions custom;
  custom.architecture = NetworkArchitecture::kCustom;
  EXPECT_THROW(Network(custom, 16, 3), std::invalid_argument);  // neither layers nor a TorchScript file
  custom.layers = "conv:2:2,flatten,dense:3";
  EXPECT_THROW(Network(custom, 16, 3), std::invalid_argument);  // a convolution on rows without an image shape
  EXPECT_EQ(Network(custom, 16, 3, ImageShape{1, 4, 4}).parameter_count(), (2 * 4 + 2) + (3 * 18 + 3));
  custom.torchscript = "model.pt";
  EXPECT_THROW(Network(custom, 16, 3, ImageShape{1, 4, 4}), std::invalid_argument);  // both
  NetworkOptions mlp = options_for(NetworkArchitecture::kMlp);
  mlp.layers = "flatten,dense:3";
  EXPECT_THROW(Network(mlp, 6, 3), std::invalid_argument);  // a specification needs custom
}

TEST(NetworkPlugin, NetworksAvailableSaysWhetherANetworkCanBeBuilt) {
  if (networks_available()) {
    EXPECT_NO_THROW(Network(options_for(NetworkArchitecture::kSoftmax), 6, 3));
    return;
  }
  try {
    Network(options_for(NetworkArchitecture::kSoftmax), 6, 3);
    ADD_FAILURE() << "expected std::runtime_error: networks_available() is false";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("FILKIT_TORCH_PLUGIN"), std::string::npos) << error.what();
  }
}

TEST(NetworkPlugin, AMissingPluginIsAnErrorNamingThePathTried) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const testing::TempDir dir;
  const std::string data = testing::write_npz_dataset(dir, random_classification(40, 4, 3, 6));
  const std::string missing = dir.file("no_such_dir/libfilkit_torch.so");
  const auto [status, output] =
      testing::run_command("FILKIT_TORCH_PLUGIN=" + missing + " " + binary + " dpsgd --data " + data +
                           " --model mlp --hidden 4 --batch-size 10 --steps 2 --threads 1 -q");
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find(missing), std::string::npos) << "the error names the path tried:\n" << output;
  EXPECT_NE(output.find("LibTorch"), std::string::npos) << output;
  EXPECT_NE(output.find("scripts/setup.sh"), std::string::npos) << output;
}

TEST(NetworkPlugin, TheExecutableDoesNotLinkLibTorch) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  if (testing::run_command("command -v readelf").first != 0) GTEST_SKIP() << "readelf not installed";
  const auto [status, dynamic_section] = testing::run_command(std::string("readelf -d ") + binary);
  ASSERT_EQ(status, 0) << dynamic_section;
  std::istringstream lines(dynamic_section);
  int needed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    ++needed;
    EXPECT_EQ(line.find("torch"), std::string::npos) << "LibTorch is loaded only with a network: " << line;
    EXPECT_EQ(line.find("c10"), std::string::npos) << "LibTorch is loaded only with a network: " << line;
  }
  EXPECT_GT(needed, 0) << "no NEEDED entries in readelf -d output:\n" << dynamic_section;
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

std::string torchscript_fixture(const std::string& name) {
  return std::string(FILKIT_TEST_SOURCE_DIR) + "/tests/networks/torchscript/" + name;
}

NetworkOptions torchscript_options(const std::string& name) {
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.torchscript = torchscript_fixture(name);
  return options;
}

// tests/networks/torchscript/: Linear(4, 5), Tanh, Linear(5, 3) in double, saved by torch.jit.script;
// the others set weight [1, 2] of the last layer (its weight 7) to NaN, Inf or 1e200, or flip an
// exponent bit in the first weight's stored bytes (Python's zipfile.testzip flags that member).
TEST(Network, RefusesATorchScriptModuleWithNonFiniteOrHugeWeightsNamingTheWeight) {
  REQUIRE_TORCH();
  EXPECT_EQ(Network(torchscript_options("tanh_mlp.pt"), 4, 3).parameter_count(), 5 * 4 + 5 + 3 * 5 + 3);
  EXPECT_INVALID_ARGUMENT(Network(torchscript_options("nan_weight.pt"), 4, 3), "layer 3 (dense:3) has weight 7 = nan",
                          "not finite");
  EXPECT_INVALID_ARGUMENT(Network(torchscript_options("inf_weight.pt"), 4, 3), "layer 3 (dense:3) has weight 7 = inf",
                          "not finite");
  EXPECT_INVALID_ARGUMENT(Network(torchscript_options("huge_weight.pt"), 4, 3),
                          "layer 3 (dense:3) has weight 7 = 1e+200", "beyond +-1e150");
}

TEST(Network, RefusesATorchScriptFileWhoseMemberFailsItsCrc) {
  EXPECT_INVALID_ARGUMENT(Network(torchscript_options("crc_flipped.pt"), 4, 3),
                          "is not a readable TorchScript (zip) file", "member 'tanh_mlp/data/0' fails its CRC-32 check",
                          "damaged");
}

}  // namespace
}  // namespace filkit
