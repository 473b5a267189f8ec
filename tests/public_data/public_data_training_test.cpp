// Private training with public data (public_data_training.hpp), its pre-training and methods:
// fim with lambda = 0 against dpsgd, dpsgd against train_dpsgd's closed form, the sgd method's
// step written out, frozen coordinates that stay put and count for nothing, the reference logit,
// networks, and fim's probes and kept records.
#include "filkit/public_data/public_data_training.hpp"

#include "filkit/networks/networks.hpp"

#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>

namespace filkit {
namespace {

TEST(TrainWithPublicData, PretrainingAndSgdFollowTheSamplingAsked) {
  const Dataset data = testing::random_classification(120, 5, 3, 11);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = testing::small_options();
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
  PublicDataTrainingOptions o = testing::small_options();
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
  const Dataset data = testing::image_data(60, 3, 31, 8);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  PublicDataTrainingOptions o = testing::small_options();
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
  const DpSgdResult closed_form =
      train_dpsgd(split.private_part, Dataset{}, resolved_private_phase(o, split.private_part.n()));
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
  const Dataset data = testing::image_data(60, 2, 41);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = testing::small_options();
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
  const VectorXd start =
      train_with_public_data(split.public_part, split.private_part, data, start_only).methods[0].training.parameters[0];
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
  const Dataset data = testing::image_data(60, 2, 43);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 4);
  PublicDataTrainingOptions o = testing::small_options();
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
                             .methods[0]
                             .training.final_snapshot()
                             .fisher_trace;
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
        .methods[0]
        .training.final_snapshot()
        .fisher_trace;
  };
  const VectorXd one = first_trace(true), two = first_trace(false);
  EXPECT_LT((two - 2.0 * one).norm(), 1e-4 * two.norm());
  PublicDataTrainingOptions bad = testing::small_options();
  bad.reference_logit = true;
  NetworkOptions network;
  network.architecture = NetworkArchitecture::kMlp;
  bad.private_phase.network = network;
  testing::expect_invalid([&] { bad.validate(); }, {"reference_logit", "softmax"});
}

TEST(TrainWithPublicData, TrainsANetworkWithFrozenCoordinatesAndALearnedGradient) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(50, 2, 61);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  PublicDataTrainingOptions o = testing::small_options();
  o.private_phase.runs = 1;
  o.private_phase.steps = 2;
  o.private_phase.network = testing::small_conv_network();
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
  const Dataset data = testing::image_data(50, 2, 71);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  for (const bool network : {true, false}) {
    SCOPED_TRACE(network ? "network" : "softmax regression");
    PublicDataTrainingOptions o = testing::small_options();
    o.private_phase.runs = 1;
    o.private_phase.steps = 3;
    o.freeze_fraction = 0.5;
    if (network) o.private_phase.network = testing::small_conv_network();
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
  const Dataset data = testing::image_data(50, 2, 81);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 3);
  PublicDataTrainingOptions o = testing::small_options();
  o.private_phase.runs = 1;
  o.private_phase.steps = 2;
  o.freeze_fraction = 0.5;
  o.private_phase.network = testing::small_conv_network();
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
  EXPECT_TRUE(train_with_public_data(split.public_part, split.private_part, Dataset{}, step)
                  .methods.front()
                  .objective_terms.empty());
}

TEST(TrainWithPublicData, FimWithLambdaZeroTrainsTheConstantModelOnItsNormAloneExactly) {
  REQUIRE_PLUGIN();  // private training with public data runs its released gradients through the plugin
  // With lambda 0 the Fisher term is skipped and the objective is ||c||^2 (gradient 2c) on every
  // batch. A lambda of 1e-300 computes the whole objective (probes, released gradients, the clip's
  // terms) and adds under 1e-290 to a gradient of order 1e-2: the same bits, so the shortcut is exact.
  const Dataset data = testing::random_classification(90, 6, 3, 17);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 2);
  PublicDataTrainingOptions o = testing::small_options();
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

TEST(TrainOneModel, FromTheSharedStartIsRunZeroOfTrainWithPublicDataBitForBit) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(40, 2, 71);
  const PublicPrivateSplit split = split_public_private(data, 0.5, 4);
  PublicDataTrainingOptions o = testing::small_options();
  o.private_phase.runs = 1;
  o.private_phase.init_scale = 0.1;  // a random start: what the pre-training starts from is shared too
  o.account_fil = false;             // as train_one_model (with accounting the release is the same to 1e-12)
  for (const Precision precision : {Precision::kFloat64, Precision::kFloat32}) {
    o.private_phase.precision = precision;  // float32: the first gradient model at the start rounded
    for (const Index pretrain_steps : {Index{0}, Index{20}}) {
      o.pretrain.steps = pretrain_steps;
      for (PrivateTrainingMethod method :
           {PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kPrune, PrivateTrainingMethod::kFim}) {
        SCOPED_TRACE(to_string(method) + " " + to_string(precision) + " pretrain " + std::to_string(pretrain_steps));
        o.methods = {method};
        const MethodResult whole =
            train_with_public_data(split.public_part, split.private_part, Dataset{}, o).methods[0];
        const RunStart start = shared_run_start(split.public_part, split.private_part, o, method);
        EXPECT_EQ(start.first_gradient_model.has_value(), method == PrivateTrainingMethod::kFim);
        EXPECT_EQ(train_one_model(split.public_part, split.private_part, o, method, &start),
                  whole.training.parameters[0]);
        EXPECT_EQ(train_one_model(split.public_part, split.private_part, o, method), whole.training.parameters[0]);
        if (method == PrivateTrainingMethod::kFim)  // the first public training's objective, as the run's
          EXPECT_EQ(start.first_gradient_model->loss, whole.gradient_model_loss[0][0]);
      }
    }
  }
}

TEST(TrainOneModel, RunsOfOtherSeedsTakeTheSharedStartAndTheirOwnPrivatePhase) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(40, 2, 71);
  const PublicPrivateSplit split = split_public_private(data, 0.5, 4);
  PublicDataTrainingOptions o = testing::small_options();
  o.private_phase.runs = 1;
  o.private_phase.init_scale = 0.1;
  const PrivateTrainingMethod fim = PrivateTrainingMethod::kFim;
  const RunStart start = shared_run_start(split.public_part, split.private_part, o, fim);
  PublicDataTrainingOptions other = o;
  other.private_phase.seed = o.private_phase.seed + 1;
  const RunStart own_start = shared_run_start(split.public_part, split.private_part, other, fim);
  const VectorXd own = train_one_model(split.public_part, split.private_part, other, fim, &own_start);
  const VectorXd shared = train_one_model(split.public_part, split.private_part, other, fim, &start);
  EXPECT_NE(shared, own) << "the start is the given one, not the seed's own";
  EXPECT_NE(shared, train_one_model(split.public_part, split.private_part, o, fim, &start))
      << "the private phase is the seed's own";
  // The first gradient model is taken, not trained again: another one changes the model.
  RunStart moved = start;
  moved.first_gradient_model->state.parameters.array() += 0.5;
  EXPECT_NE(train_one_model(split.public_part, split.private_part, other, fim, &moved), shared);
  RunStart without = start;
  without.first_gradient_model.reset();  // each run trains its own from its seed's streams
  EXPECT_NE(train_one_model(split.public_part, split.private_part, other, fim, &without), shared);
}

}  // namespace
}  // namespace filkit
