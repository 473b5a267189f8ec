#include "filkit/dpsgd/training.hpp"
#include "filkit/privacy/pld_accountant.hpp"

#include "filkit/base/summary.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"

#include "dpsgd/optimizer_steps.hpp"
#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>

namespace filkit {
namespace {

using filkit::testing::random_classification;

DpSgdOptions small_options() {
  DpSgdOptions options;
  options.batch_size = 20;
  options.steps = 60;
  options.step_size = 0.5;
  options.clip_norm = 0.5;
  options.noise_multiplier = 1.0;
  options.seed = 7;
  return options;
}

TEST(Kappa, MatchesHandComputedValues) {
  // eps0 = 1.1152382396 * 2 sqrt(2 ln(1.25 / delta)) / sigma, kappa = q / (q + (1 - q) e^-eps0).
  EXPECT_NEAR(step_epsilon(1.0, 1e-5), 10.8062241846614, 1e-9);
  EXPECT_NEAR(subsampling_kappa(0.05, 1.0, 1e-5), 0.9996149626891032, 1e-12);
  EXPECT_NEAR(subsampling_kappa(0.05, 10.0, 1e-5), 0.13425882061334646, 1e-12);
  EXPECT_NEAR(subsampling_kappa(600.0 / 12665.0, 2.0, 1e-5), 0.9169779940398519, 1e-12);
  EXPECT_DOUBLE_EQ(subsampling_kappa(1.0, 3.0, 1e-5), 1.0);
  EXPECT_THROW(subsampling_kappa(0.0, 1.0, 1e-5), std::invalid_argument);
  EXPECT_THROW(subsampling_kappa(0.1, 1.0, 1.0), std::invalid_argument);
}

TEST(DpSgd, ReportsTheRdpOfTheSameRunWithTheGeluClipSensitivity) {
  const Dataset train = random_classification(100, 3, 2, 2);
  DpSgdOptions options = small_options();  // q = 0.2, sigma = 1, T = 60
  options.sampling = BatchSampling::kPoisson;
  options.report_epochs = {3.0};  // step 15
  const DpSgdResult result = train_dpsgd(train, Dataset(), options);
  const double s = options.noise_multiplier / soft_clip_norm_bound();
  for (const DpSgdSnapshot& c : result.snapshots) {
    // Order 2 of the sampled Gaussian in closed form: log(1 + q^2 (e^{1/s^2} - 1)) per step.
    const double order2 = c.step * std::log1p(0.2 * 0.2 * std::expm1(1.0 / (s * s)));
    EXPECT_NEAR(c.rdp_order2, order2, 1e-12 * order2);
    EXPECT_NEAR(c.rdp_mse_bound(), 1.0 / (4.0 * std::expm1(order2)), 1e-12);
    RdpAccountant reference;
    reference.compose(s, 0.2, c.step);
    EXPECT_DOUBLE_EQ(c.privacy.eps, reference.get_privacy_spent(1e-5).eps);
    EXPECT_EQ(c.epsilon, c.privacy.eps) << "the RDP accountant is the default";
  }
  EXPECT_LT(result.snapshots[0].privacy.eps, result.snapshots[1].privacy.eps);
  // The unscaled noise multiplier would understate the privacy loss.
  RdpAccountant unscaled;
  unscaled.compose(options.noise_multiplier, 0.2, options.steps);
  EXPECT_LT(unscaled.get_privacy_spent(1e-5).eps, result.final_snapshot().privacy.eps);
}

TEST(DpSgd, AccountsFixedSizeBatchesWithoutReplacementAndThePldOnRequest) {
  const Dataset train = random_classification(100, 3, 2, 2);
  DpSgdOptions options = small_options();  // uniform: B = 20 of n = 100 without replacement, T = 60
  options.accountant = AccountantKind::kPld;
  const DpSgdResult result = train_dpsgd(train, Dataset(), options);
  const DpSgdSnapshot& c = result.final_snapshot();
  const double s = options.noise_multiplier / soft_clip_norm_bound();
  // Order 2 of Wang, Balle, Kasiviswanathan's bound in closed form, replace-one sensitivity 2:
  // log(1 + q^2 min(4 (e^{1/s'^2} - 1), 2 e^{1/s'^2})) per step, s' = s / 2.
  const double inverse = 4 / (s * s);
  const double order2 = 60 * std::log1p(0.2 * 0.2 * std::min(4 * std::expm1(inverse), 2 * std::exp(inverse)));
  EXPECT_NEAR(c.rdp_order2, order2, 1e-12 * order2);
  RdpAccountant rdp(rdp_orders(OrderGrid::kOpacus), NeighbouringRelation::kReplaceOne);
  rdp.step(s, 0.2, 60);
  EXPECT_DOUBLE_EQ(c.privacy.eps, rdp.epsilon(1e-5));
  PldAccountant pld(NeighbouringRelation::kReplaceOne);
  pld.step(s, 0.2, 60);
  EXPECT_DOUBLE_EQ(c.epsilon, pld.epsilon(1e-5));
  EXPECT_LT(c.epsilon, c.privacy.eps) << "the PLD is the tighter bound";
  EXPECT_EQ(c.pld_infinity_mass, pld.infinity_mass());
  // The same run accounted as Poisson batches (what Opacus does) would report less.
  RdpAccountant poisson;
  poisson.step(s, 0.2, 60);
  EXPECT_LT(poisson.epsilon(1e-5), c.privacy.eps);
  // The PLD's grid spacing is an option: a coarser grid gives the (slightly larger) eps of a PLD
  // accountant with that spacing.
  options.discretization = 1e-2;
  const DpSgdSnapshot coarse = train_dpsgd(train, Dataset(), options).final_snapshot();
  PldAccountant coarse_pld(NeighbouringRelation::kReplaceOne, PldSettings{1e-2});
  coarse_pld.step(s, 0.2, 60);
  EXPECT_DOUBLE_EQ(coarse.epsilon, coarse_pld.epsilon(1e-5));
  EXPECT_GT(coarse.epsilon, c.epsilon);
  EXPECT_DOUBLE_EQ(coarse.privacy.eps, c.privacy.eps) << "the RDP curve does not depend on it";
}

TEST(DpSgdOptions, InvalidValuesThrowNamingTheField) {
  const std::vector<std::pair<std::string, std::function<void(DpSgdOptions&)>>> cases = {
      {"model", [](DpSgdOptions& o) { o.kind = ModelKind::kLeastSquares; }},
      {"batch_size", [](DpSgdOptions& o) { o.batch_size = 0; }},
      {"steps", [](DpSgdOptions& o) { o.steps = 0; }},
      {"step_size", [](DpSgdOptions& o) { o.step_size = -1.0; }},
      {"clip_norm", [](DpSgdOptions& o) { o.clip_norm = 0.0; }},
      {"noise_multiplier", [](DpSgdOptions& o) { o.noise_multiplier = std::nan(""); }},
      {"momentum", [](DpSgdOptions& o) { o.momentum = 1.0; }},
      {"adam_bias_correction_offset", [](DpSgdOptions& o) { o.adam_bias_correction_offset = -1; }},
      {"weight_decay", [](DpSgdOptions& o) { o.weight_decay = -0.1; }},
      {"init_scale", [](DpSgdOptions& o) { o.init_scale = -1.0; }},
      {"kappa_delta", [](DpSgdOptions& o) { o.kappa_delta = 0.0; }},
      {"rdp_delta", [](DpSgdOptions& o) { o.rdp_delta = 1.5; }},
      {"discretization", [](DpSgdOptions& o) { o.discretization = 0.0; }},
      {"probes", [](DpSgdOptions& o) { o.probes = 0; }},
      {"power_iterations", [](DpSgdOptions& o) { o.power_iterations = 0; }},
      {"runs", [](DpSgdOptions& o) { o.runs = 0; }},
      {"report_epochs", [](DpSgdOptions& o) { o.report_epochs = {-1.0}; }},
      {"bootstrap_resamples", [](DpSgdOptions& o) { o.bootstrap_resamples = 9; }},
      {"confidence_level", [](DpSgdOptions& o) { o.confidence_level = 1.0; }},
  };
  for (const auto& [field, spoil] : cases) {
    DpSgdOptions options;
    spoil(options);
    try {
      options.validate();
      ADD_FAILURE() << field << " was accepted";
    } catch (const OptionError& error) {  // by the name the command line and Python take
      EXPECT_EQ(error.option(), field) << error.what();
      EXPECT_EQ(std::string(error.what()).rfind(field + " = ", 0), 0u) << error.what();
    }
  }
  EXPECT_NO_THROW(DpSgdOptions().validate());
}

// Two Adam steps written out: m_t = b1 m + (1 - b1) g, v_t = b2 v + (1 - b2) g^2, and the update
// s (m_t / (1 - b1^k)) / (sqrt(v_t / (1 - b2^k)) + eps) at the count k = t + offset. The thesis'
// code (offset 1) moves its first step by s sqrt(1 + b2) / (1 + b1) = 0.744 s per coordinate.
TEST(OptimizerStep, AdamsBiasCorrectionsCountFromTheOffset) {
  DpSgdOptions adam;
  adam.optimizer = Optimizer::kAdam;
  adam.step_size = 0.01;
  const VectorXd g1 = (VectorXd(3) << 0.5, -2.0, 1e-3).finished(), g2 = (VectorXd(3) << -0.25, 1.0, 4.0).finished();
  for (const Index offset : {Index{0}, Index{1}, Index{3}}) {
    adam.adam_bias_correction_offset = offset;
    VectorXd w = VectorXd::Ones(3), m = VectorXd::Zero(3), v = VectorXd::Zero(3);
    Index steps = 0;
    VectorXd expected = w, em = m, ev = v;
    for (Index t = 1; t <= 2; ++t) {
      const VectorXd& g = t == 1 ? g1 : g2;
      detail::optimizer_step(adam, w, g, m, v, steps);
      const double k = static_cast<double>(t + offset);
      for (Index i = 0; i < 3; ++i) {
        em(i) = 0.9 * em(i) + 0.1 * g(i);
        ev(i) = 0.999 * ev(i) + 0.001 * g(i) * g(i);
        expected(i) -=
            0.01 * (em(i) / (1.0 - std::pow(0.9, k))) / (std::sqrt(ev(i) / (1.0 - std::pow(0.999, k))) + 1e-8);
      }
      EXPECT_EQ(steps, t);  // the count of steps taken, which a resumed run restores, is not offset
      EXPECT_LT((w - expected).cwiseAbs().maxCoeff(), 1e-15) << "offset " << offset << ", step " << t;
      if (offset == 1 && t == 1)  // the first step of the thesis' code, by its closed form (g < 0: up)
        EXPECT_NEAR(w(1) - 1.0, 0.01 * std::sqrt(1.999) / 1.9, 1e-9);
    }
  }
}

TEST(DpSgd, RejectsBatchesLargerThanTheDataAndEpochsBeyondTheRun) {
  const Dataset train = random_classification(30, 3, 2, 1);
  DpSgdOptions options = small_options();
  options.batch_size = 31;
  EXPECT_THROW(train_dpsgd(train, Dataset(), options), std::invalid_argument);
  options = small_options();
  options.report_epochs = {100.0};
  EXPECT_THROW(train_dpsgd(train, Dataset(), options), std::invalid_argument);
  options = small_options();
  const Dataset three_classes = random_classification(30, 3, 3, 1);
  EXPECT_THROW(train_dpsgd(three_classes, Dataset(), options), std::invalid_argument);  // logistic
}

TEST(DpSgd, TrainsAccurateLogisticAndSoftmaxModelsAtLowNoise) {
  for (int classes : {2, 3}) {
    // One labelling rule for both parts: split one sample.
    const Dataset all = random_classification(800, 5, classes, 3);
    std::vector<Index> first, second;
    for (Index i = 0; i < all.n(); ++i) (i < 400 ? first : second).push_back(i);
    const Dataset train = all.select_rows(first), test = all.select_rows(second);
    DpSgdOptions options = small_options();
    options.kind = classes == 2 ? ModelKind::kLogistic : ModelKind::kSoftmax;
    options.noise_multiplier = 0.05;
    options.momentum = 0.5;
    options.steps = 300;
    const DpSgdResult result = train_dpsgd(train, test, options);
    FitOptions fit_options;
    fit_options.kind = options.kind;
    fit_options.l2 = 1e-4;
    const double reference = accuracy(fit(train, fit_options), test);  // the non-private optimum
    EXPECT_GT(result.final_snapshot().mean_test_accuracy(), reference - 0.05) << classes << " classes";
    EXPECT_GT(reference, 0.6);
    EXPECT_NEAR(accuracy(result.models[0], test), result.final_snapshot().test_accuracy[0], 1e-15);
  }
}

TEST(DpSgd, SeededRunsAreReproducibleAndIndependentOfThreadCount) {
  // Batches of 256 examples of 50 features and 10 classes: a batch's gradient sum is a product
  // large enough that Eigen would split it between threads.
  const Dataset train = random_classification(1000, 50, 10, 5);
  DpSgdOptions options = small_options();
  options.kind = ModelKind::kSoftmax;
  options.label = LabelPrivacy::kPrivate;
  options.trace = TraceMethod::kGaussian;
  options.batch_size = 256;
  options.steps = 8;
  options.runs = 2;
  testing::expect_same_for_any_thread_count(
      [&] { return train_dpsgd(train, train, options); },
      [](const DpSgdResult& one, const DpSgdResult& more) {
        EXPECT_EQ(one.run_seeds, more.run_seeds);
        for (std::size_t run = 0; run < 2; ++run)
          EXPECT_TRUE(testing::same_bits(one.models[run].weights, more.models[run].weights)) << "run " << run;
        EXPECT_TRUE(testing::same_bits(one.final_snapshot().fisher_trace, more.final_snapshot().fisher_trace));
        EXPECT_TRUE(testing::same_bits(one.final_snapshot().fisher_spectral, more.final_snapshot().fisher_spectral));
        EXPECT_EQ(one.final_snapshot().test_accuracy, more.final_snapshot().test_accuracy);
        EXPECT_EQ(one.final_snapshot().dfil_over_runs.max_replicates,
                  more.final_snapshot().dfil_over_runs.max_replicates);
        EXPECT_EQ(one.final_snapshot().dfil_over_runs.median_replicates,
                  more.final_snapshot().dfil_over_runs.median_replicates);
      });
  const DpSgdResult first = train_dpsgd(train, Dataset(), options);
  options.seed = 8;
  EXPECT_NE(train_dpsgd(train, Dataset(), options).models[1].weights, first.models[1].weights);
}

TEST(DpSgd, UniformBatchesHaveExactlyBExamplesAndPoissonBatchesQnOnAverage) {
  const Dataset train = random_classification(50, 3, 2, 6);
  DpSgdOptions options = small_options();
  options.steps = 400;
  const DpSgdResult uniform = train_dpsgd(train, Dataset(), options);
  EXPECT_DOUBLE_EQ(uniform.final_snapshot().times_sampled.sum(), 20.0 * 400.0);
  options.sampling = BatchSampling::kPoisson;
  const DpSgdResult poisson = train_dpsgd(train, Dataset(), options);
  // Binomial(50 * 400, 0.4): mean 8000, std 69.
  EXPECT_NEAR(poisson.final_snapshot().times_sampled.sum(), 8000.0, 5 * 69.3);
  EXPECT_NE(poisson.final_snapshot().times_sampled.sum(), 8000.0);
}

TEST(DpSgd, ShuffledEpochsSampleEveryExampleOnceAnEpochAndTheSummarySaysRdpDoesNotCoverThem) {
  const Dataset train = random_classification(50, 3, 2, 6);
  DpSgdOptions options = small_options();  // B = 20: epochs of 20, 20 and 10
  options.sampling = BatchSampling::kShuffle;
  for (Index epochs : {1, 2, 5}) {
    options.steps = 3 * epochs;
    const DpSgdResult shuffled = train_dpsgd(train, Dataset(), options);
    EXPECT_EQ(shuffled.final_snapshot().times_sampled, VectorXd::Constant(50, static_cast<double>(epochs)));
  }
  options.steps = 4;  // the second epoch's first batch: 20 more examples
  EXPECT_DOUBLE_EQ(train_dpsgd(train, Dataset(), options).final_snapshot().times_sampled.sum(), 70.0);
  const DpSgdResult result = train_dpsgd(train, Dataset(), options);
  const nlohmann::json json = result.summary(options);
  EXPECT_NE(json.at("sampling_note").get<std::string>().find("do not cover shuffling"), std::string::npos);
  EXPECT_EQ(json.at("settings").at("dpsgd").at("sampling"), "shuffle");
}

TEST(DpSgd, AccountantGrowsOverCheckpointsAndEtaBoundsDfil) {
  const Dataset train = random_classification(60, 4, 2, 9);
  DpSgdOptions options = small_options();
  options.label = LabelPrivacy::kPrivate;
  options.report_epochs = {1.0, 6.0};  // steps 3 and 18
  const DpSgdResult result = train_dpsgd(train, Dataset(), options);
  ASSERT_EQ(result.snapshots.size(), 3u);
  EXPECT_EQ(result.snapshots[0].step, 3);
  EXPECT_EQ(result.snapshots[1].step, 18);
  EXPECT_EQ(result.snapshots[2].step, 60);
  EXPECT_EQ(result.private_dims, 5);
  for (std::size_t c = 1; c < result.snapshots.size(); ++c)
    EXPECT_TRUE((result.snapshots[c].fisher_trace.array() >= result.snapshots[c - 1].fisher_trace.array()).all());
  const DpSgdSnapshot& last = result.final_snapshot();
  // sum_t ||G_t||_2^2 >= ||sum_t G_t^T G_t||_2 >= Tr / d_z.
  EXPECT_TRUE((last.eta().array() >= last.dfil(result.private_dims).array() * (1 - 1e-12)).all());
  const DpSgdSnapshot& first = result.snapshots[0];
  EXPECT_EQ((first.times_sampled.array() == 0).count(), (first.fisher_trace.array() == 0).count());
}

TEST(DpSgd, KeepsEachRunsTracesAndBootstrapsTheMaxAndMedianDfilOverRuns) {
  const Dataset train = random_classification(60, 4, 2, 9);
  DpSgdOptions options = small_options();
  options.report_epochs = {2.0};
  options.runs = 3;
  options.bootstrap_resamples = 200;
  options.confidence_level = 0.9;
  const DpSgdResult three = train_dpsgd(train, Dataset(), options);
  options.runs = 1;
  const DpSgdResult one = train_dpsgd(train, Dataset(), options);
  const double d = static_cast<double>(three.private_dims);
  const auto dfil_of = [d](const VectorXd& trace) { return VectorXd((trace / d).cwiseSqrt()); };
  EXPECT_EQ(three.bootstrap_seed, one.bootstrap_seed);
  ASSERT_EQ(three.snapshots.size(), 2u);
  for (std::size_t c = 0; c < 2; ++c) {
    const DpSgdSnapshot& s = three.snapshots[c];
    ASSERT_EQ(s.fisher_trace_per_run.rows(), 3);
    ASSERT_EQ(s.fisher_trace_per_run.cols(), 60);
    std::vector<VectorXd> runs;
    for (Index r = 0; r < 3; ++r) runs.push_back(s.fisher_trace_per_run.row(r).transpose());
    // Run r's seed depends on (seed, r) only: run 0 is the one-run job's run.
    EXPECT_EQ(runs[0], one.snapshots[c].fisher_trace);
    EXPECT_NE(runs[1], runs[0]);
    // The mean is the runs added in order; the standard error their sample spread / sqrt(3).
    EXPECT_EQ(s.fisher_trace, VectorXd((runs[0] + runs[1] + runs[2]) / 3.0));
    for (Index i = 0; i < 60; ++i) {
      double squares = 0.0;
      for (const VectorXd& run : runs) squares += std::pow(run(i) - s.fisher_trace(i), 2);
      EXPECT_NEAR(s.fisher_trace_standard_error(i), std::sqrt(squares / 2.0 / 3.0), 1e-12 * (1 + s.fisher_trace(i)));
    }
    // The estimate is the summary's max and median of dFIL; each run's own beside it.
    const RunBootstrap& b = s.dfil_over_runs;
    const Summary mean_dfil = summarize(s.dfil(three.private_dims));
    EXPECT_EQ(b.estimate.max, mean_dfil.max);
    EXPECT_EQ(b.estimate.median, mean_dfil.median);
    ASSERT_EQ(b.per_run.size(), 3u);
    for (std::size_t r = 0; r < 3; ++r) {
      const Summary run = summarize(dfil_of(runs[r]));
      EXPECT_EQ(b.per_run[r].max, run.max);
      EXPECT_EQ(b.per_run[r].median, run.median);
    }
    // The intervals: the run_bootstrap unit on these traces, seeded from the job's seed. A mean of
    // the runs is at most the largest run and at least the smallest: every replicate of the max lies
    // between max_i min_r and max_r max_i of dFIL.
    const RunBootstrap direct = bootstrap_over_runs(
        s.fisher_trace_per_run, [d](double t) { return std::sqrt(t / d); }, 0.9, 200, three.bootstrap_seed);
    EXPECT_EQ(b.max_replicates, direct.max_replicates);
    EXPECT_EQ(b.median_replicates, direct.median_replicates);
    ASSERT_TRUE(b.max_interval && b.median_interval);
    EXPECT_EQ(b.level, 0.9);
    EXPECT_EQ(b.resamples, 200);
    const VectorXd smallest = runs[0].cwiseMin(runs[1]).cwiseMin(runs[2]);
    const double largest = std::max({b.per_run[0].max, b.per_run[1].max, b.per_run[2].max});
    EXPECT_GE(b.max_interval->lower, dfil_of(smallest).maxCoeff());
    EXPECT_LE(b.max_interval->upper, largest);
    EXPECT_LE(b.max_interval->lower, b.max_interval->upper);
    EXPECT_LT(b.max_interval->lower, b.max_interval->upper) << "three different runs vary";
    EXPECT_LE(b.median_interval->lower, b.median_interval->upper);
    // One run: the traces and the statistics, no interval.
    EXPECT_EQ(one.snapshots[c].fisher_trace_per_run.rows(), 1);
    EXPECT_FALSE(one.snapshots[c].dfil_over_runs.max_interval.has_value());
    EXPECT_FALSE(one.snapshots[c].dfil_over_runs.median_interval.has_value());
    EXPECT_EQ(one.snapshots[c].fisher_trace_standard_error, VectorXd::Zero(60));
  }
  options.seed = 8;
  EXPECT_NE(train_dpsgd(train, Dataset(), options).bootstrap_seed, one.bootstrap_seed);
}

TEST(DpSgd, PerRunTracesBeyondTheMemoryBudgetAreRefusedBeforeTraining) {
  const Dataset train = random_classification(60, 4, 2, 9);
  DpSgdOptions options = small_options();
  options.runs = 100000;  // 60 examples x 10^5 runs x 8 bytes x 2 copies = 96 MB
  options.max_memory = ByteSize{std::uint64_t{64} << 20};
  try {
    train_dpsgd(train, Dataset(), options);
    ADD_FAILURE() << "accepted";
  } catch (const MemoryLimitError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("max_memory"), std::string::npos) << message;
    EXPECT_NE(message.find("1 snapshots x 100000 runs x 60 examples"), std::string::npos) << message;
  }
}

TEST(DpSgd, EstimatedTracesAndPowerIterationAgreeWithTheExactAccountant) {
  // The probes use their own seeds, so the training trajectory is the same for every method.
  const Dataset train = random_classification(80, 6, 3, 10);
  DpSgdOptions options = small_options();
  options.kind = ModelKind::kSoftmax;
  const DpSgdResult exact = train_dpsgd(train, Dataset(), options);
  options.trace = TraceMethod::kCoordinates;
  options.spectral = SpectralMethod::kPowerIteration;
  options.power_iterations = 300;
  const DpSgdResult estimated = train_dpsgd(train, Dataset(), options);
  ASSERT_EQ(exact.models[0].weights, estimated.models[0].weights);
  const VectorXd& a = exact.final_snapshot().fisher_trace;
  const VectorXd& b = estimated.final_snapshot().fisher_trace;
  EXPECT_NEAR(b.sum() / a.sum(), 1.0, 0.02);   // 80 examples x ~15 steps x 50 probes
  EXPECT_GT((b - a).norm(), 1e-6 * a.norm());  // but it is an estimate
  const VectorXd& s = exact.final_snapshot().fisher_spectral;
  const VectorXd& t = estimated.final_snapshot().fisher_spectral;
  // Power iteration converges slowly where the top two singular values are close, and from below.
  EXPECT_NEAR(t.sum() / s.sum(), 1.0, 1e-3);
  EXPECT_TRUE((t.array() <= s.array() * (1 + 1e-9)).all());  // power iteration from below
}

TEST(DpSgd, FisherInformationFallsAsOneOverSigmaSquaredForLargeNoise) {
  // A tiny step size keeps the trajectory near w_0 = 0 whatever sigma, and kappa = 1 removes
  // kappa's own dependence on sigma: Tr(I) sigma^2 must then be constant.
  const Dataset train = random_classification(40, 3, 2, 12);
  DpSgdOptions options = small_options();
  options.subsampling = SubsamplingFactor::kOne;
  options.step_size = 1e-9;
  std::vector<double> scaled;
  for (double sigma : {1e2, 1e3, 1e4}) {
    options.noise_multiplier = sigma;
    const DpSgdResult result = train_dpsgd(train, Dataset(), options);
    const VectorXd dfil = result.final_snapshot().dfil(result.private_dims);
    EXPECT_LT(dfil.maxCoeff(), 10.0 / sigma);
    scaled.push_back(result.final_snapshot().fisher_trace.sum() * sigma * sigma);
  }
  EXPECT_NEAR(scaled[1] / scaled[0], 1.0, 1e-4);
  EXPECT_NEAR(scaled[2] / scaled[0], 1.0, 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Theorem 3 on a tiny problem: full batches (q = 1, kappa = 1), so the released trajectory
// w_1..w_T is a composition of Gaussian mechanisms and its Fisher information about x_0 is
// E[sum_t G_t^T G_t] / (sigma C)^2 exactly (chain rule). The test estimates that FIM
// independently, by Monte-Carlo of the score, the finite-difference gradient of the trajectory's
// log-likelihood, and compares with the accountant's sum averaged over runs.

struct TinyMechanism {
  Dataset data;
  DpSgdOptions options;

  /// sum_i g~_i(w) with example 0's features replaced by x0.
  VectorXd clipped_sum(const VectorXd& w, const VectorXd& x0) const {
    const ClippedGradientStep step(ModelKind::kLogistic, w, false, options.clip_norm, LabelPrivacy::kPublic);
    VectorXd sum = VectorXd::Zero(w.size());
    for (Index i = 0; i < data.n(); ++i) {
      const VectorXd x = i == 0 ? x0 : VectorXd(data.X.row(i).transpose());
      sum += ClippedGlmGradient(step, x, step.label_vector(data.y(i))).clipped_gradient();
    }
    return sum;
  }

  /// The trajectory w_0 = 0, w_1..w_T of one run.
  std::vector<VectorXd> simulate(std::mt19937_64& rng) const {
    std::normal_distribution<double> normal;
    const double B = static_cast<double>(data.n()), noise = options.noise_multiplier * options.clip_norm;
    std::vector<VectorXd> w{VectorXd::Zero(data.d())};
    for (Index t = 0; t < options.steps; ++t) {
      VectorXd sum = clipped_sum(w.back(), data.X.row(0).transpose());
      for (Index k = 0; k < sum.size(); ++k) sum(k) += noise * normal(rng);
      w.push_back(w.back() - options.step_size * sum / B);
    }
    return w;
  }

  /// log p(w_1..w_T | x_0) up to a constant.
  double log_likelihood(const std::vector<VectorXd>& w, const VectorXd& x0) const {
    const double B = static_cast<double>(data.n()), noise = options.noise_multiplier * options.clip_norm;
    double total = 0.0;
    for (std::size_t t = 1; t < w.size(); ++t) {
      const VectorXd released = B * (w[t - 1] - w[t]) / options.step_size;  // the noisy sum
      total -= (released - clipped_sum(w[t - 1], x0)).squaredNorm() / (2.0 * noise * noise);
    }
    return total;
  }

  VectorXd score(const std::vector<VectorXd>& w, double h) const {
    const VectorXd x0 = data.X.row(0).transpose();
    VectorXd s(x0.size());
    for (Index j = 0; j < x0.size(); ++j) {
      VectorXd plus = x0, minus = x0;
      plus(j) += h;
      minus(j) -= h;
      s(j) = (log_likelihood(w, plus) - log_likelihood(w, minus)) / (2.0 * h);
    }
    return s;
  }
};

TEST(DpSgd, Theorem3SumMatchesMonteCarloFisherInformationOfTheTrajectory) {
  TinyMechanism m;
  m.data.X.resize(4, 2);
  m.data.X << 0.9, 0.2, -0.3, 0.8, 0.5, -0.6, -0.7, -0.4;
  m.data.y.resize(4);
  m.data.y << 1, 0, 1, 0;
  m.options.batch_size = 4;  // q = 1: kappa = 1 with either factor
  m.options.steps = 3;
  m.options.step_size = 2.0;
  m.options.clip_norm = 0.5;  // (sigma C)^2 = 0.5625 differs from sigma^2 = 2.25
  m.options.noise_multiplier = 1.5;
  m.options.spectral = SpectralMethod::kExact;

  // The tolerance follows from both sides' standard errors; the sanitizer build, which looks for
  // memory errors on the same paths, takes a quarter of the samples (the wrong accountant below is
  // still caught by far).
  const int samples = testing::kAddressSanitizer ? 5000 : 20000;
  std::mt19937_64 rng(2024);
  Eigen::Matrix2d fisher = Eigen::Matrix2d::Zero();
  double trace_sum = 0.0, trace_squares = 0.0;
  for (int k = 0; k < samples; ++k) {
    const VectorXd s = m.score(m.simulate(rng), 1e-5);
    fisher += s * s.transpose() / samples;
    trace_sum += s.squaredNorm();
    trace_squares += s.squaredNorm() * s.squaredNorm();
  }
  const double mc_trace = trace_sum / samples;
  const double mc_error = std::sqrt((trace_squares / samples - mc_trace * mc_trace) / samples);

  m.options.runs = samples;
  m.options.seed = 99;
  const DpSgdResult result = train_dpsgd(m.data, Dataset(), m.options);
  ASSERT_DOUBLE_EQ(result.kappa, 1.0);
  const double accountant = result.final_snapshot().fisher_trace(0);
  const double accountant_error = result.final_snapshot().fisher_trace_standard_error(0);
  const double tolerance = 4.0 * std::hypot(mc_error, accountant_error);
  EXPECT_NEAR(accountant, mc_trace, tolerance) << "Monte-Carlo " << mc_trace << " +- " << mc_error << ", accountant "
                                               << accountant << " +- " << accountant_error;
  // The per-step spectral norms bound the spectral norm of the summed information.
  const double mc_top = Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d>(fisher).eigenvalues()(1);
  EXPECT_GT(result.final_snapshot().fisher_spectral(0), mc_top - tolerance);
  // A wrong accountant is caught: the FIM with sigma^2 in place of (sigma C)^2 is 4x too small.
  EXPECT_GT(std::abs(accountant * 0.25 - mc_trace), 10.0 * tolerance);
}

TEST(EpochBatch, EveryRowOnceAnEpochInSlicesOfBTheLastShortAndANewPermutationEachEpoch) {
  const Index n = 23, B = 5;  // 5 slices an epoch: 5, 5, 5, 5, 3
  std::vector<Index> order(n);
  std::iota(order.begin(), order.end(), Index{0});
  std::mt19937_64 generator(4);
  std::vector<std::vector<Index>> first_epoch, second_epoch;
  for (Index t = 1; t <= 10; ++t)
    (t <= 5 ? first_epoch : second_epoch).push_back(detail::epoch_batch(order, B, t, generator));
  for (const auto* epoch : {&first_epoch, &second_epoch}) {
    std::vector<Index> seen;
    for (std::size_t k = 0; k < epoch->size(); ++k) {
      const std::vector<Index>& batch = (*epoch)[k];
      EXPECT_EQ(static_cast<Index>(batch.size()), k < 4 ? B : 3);
      EXPECT_TRUE(std::is_sorted(batch.begin(), batch.end()));
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<Index> all(n);
    std::iota(all.begin(), all.end(), Index{0});
    EXPECT_EQ(seen, all) << "every row exactly once an epoch";
  }
  EXPECT_NE(first_epoch.front(), second_epoch.front()) << "a fresh permutation at the second epoch";
}

}  // namespace
}  // namespace filkit
