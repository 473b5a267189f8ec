// The trained model's clipped mean gradient (sgd_clip: the thesis' code's SGD step) against each
// example's gradient (released_gradients, one example at a time) through the smooth clip, for
// softmax regression with and without the intercept and the reference logit, and for a ConvNet
// against its per-example clipped gradients; and the sgd method with sgd_clip as that training.
#include "filkit/privacy/soft_clip.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "dpsgd/trainable_models.hpp"
#include "public_data/pretraining.hpp"
#include "public_data/trained_model.hpp"
#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace filkit {
namespace {

/// sum_b f(||g_b||) g_b / B from each example's gradient over the free coordinates.
VectorXd clipped_mean_one_example_at_a_time(const TrainedModel& model, const Dataset& data,
                                            const std::vector<Index>& rows, const VectorXd& w, double clip_norm,
                                            const std::vector<bool>& fixed) {
  std::vector<Index> free;
  for (Index i = 0; i < model.parameter_count(); ++i)
    if (fixed.empty() || !fixed[static_cast<std::size_t>(i)]) free.push_back(i);
  VectorXd mean = VectorXd::Zero(model.parameter_count());
  for (Index row : rows) {
    const VectorXd g = model.released_gradients(data, {row}, w, free).row(0).transpose();
    const double f = soft_clip_factor(g.norm(), clip_norm);
    for (std::size_t j = 0; j < free.size(); ++j) mean(free[j]) += f * g(static_cast<Index>(j));
  }
  return mean / static_cast<double>(rows.size());
}

TEST(TrainedModel, ClippedMeanGradientOfSoftmaxIsEachExamplesClippedGradientsMean) {
  const int K = 3;
  const Dataset data = testing::random_classification(9, 5, K, 4);
  const std::vector<Index> rows = {0, 2, 3, 5, 8};
  for (bool intercept : {false, true}) {
    for (bool reference_logit : {false, true}) {
      DpSgdOptions phase;
      phase.kind = ModelKind::kSoftmax;
      phase.intercept = intercept;
      const TrainedModel model(data, phase, K);
      const std::vector<bool> fixed = model.fixed_coordinates(reference_logit);
      VectorXd w = testing::normal_vector(model.parameter_count(), 5, 0.8);
      for (Index i = 0; i < w.size(); ++i)
        if (!fixed.empty() && fixed[static_cast<std::size_t>(i)]) w(i) = 0.0;
      // A clip norm below some gradients' norms and above others', so that both sides of the knee count.
      for (double clip_norm : {0.3, 1.0, 4.0}) {
        const VectorXd expected = clipped_mean_one_example_at_a_time(model, data, rows, w, clip_norm, fixed);
        const VectorXd got = model.mean_clipped_gradient(data, rows, w, clip_norm, fixed);
        EXPECT_LT((got - expected).norm(), 1e-13 * expected.norm())
            << "intercept " << intercept << ", reference logit " << reference_logit << ", C " << clip_norm;
        const VectorXd plain = model.mean_gradient(data, rows, w);
        EXPECT_GT((got - plain).norm(), 1e-3 * plain.norm()) << "the clip changes the step";
      }
    }
  }
}

TEST(TrainedModel, ClippedMeanGradientOfANetworkIsItsClippedGradientsMean) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(7, 2, 6);
  DpSgdOptions phase;
  phase.network = testing::small_conv_network();
  phase.network->chunk = 3;  // the rows in pieces
  phase.trace = TraceMethod::kExact;
  phase.spectral = SpectralMethod::kNone;
  phase.probes = 1;
  const TrainedModel model(data, phase, 2);
  std::mt19937_64 rng(2);
  const VectorXd w = model.initial_parameters(rng);
  std::vector<Index> rows(7);
  std::iota(rows.begin(), rows.end(), Index{0});
  const VectorXd expected = clipped_mean_one_example_at_a_time(model, data, rows, w, 0.05, {});
  const VectorXd got = model.mean_clipped_gradient(data, rows, w, 0.05, {});
  EXPECT_LT((got - expected).norm(), 1e-12 * expected.norm());
}

TEST(TrainedModel, SgdClipTrainsTheSgdMethodOnClippedGradientsAndOnlyIt) {
  REQUIRE_PLUGIN();  // dpsgd beside sgd
  const Dataset data = testing::random_classification(80, 6, 3, 7);
  std::vector<Index> first(30), rest(50);
  std::iota(first.begin(), first.end(), Index{0});
  std::iota(rest.begin(), rest.end(), Index{30});
  const Dataset public_part = data.select_rows(first), private_part = data.select_rows(rest);
  PublicDataTrainingOptions o = testing::small_options();
  o.methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd};
  o.private_phase.clip_norm = 0.5;
  const PublicDataTrainingResult plain = train_with_public_data(public_part, private_part, Dataset{}, o);
  o.sgd_clip = true;
  const PublicDataTrainingResult clipped = train_with_public_data(public_part, private_part, Dataset{}, o);
  ASSERT_EQ(clipped.methods.size(), 2u);
  EXPECT_NE(plain.methods[0].training.parameters, clipped.methods[0].training.parameters);
  EXPECT_EQ(plain.methods[1].training.parameters, clipped.methods[1].training.parameters) << "dpsgd unchanged";

  // Each run by hand: its pre-trained start, then the private phase's steps on the clipped means.
  const DpSgdOptions phase = resolved_private_phase(o, private_part.n());
  const TrainedModel model(private_part, phase, 3);
  const PlainTrainingOptions steps{phase.steps,        phase.batch_size,        phase.step_size,
                                   phase.weight_decay, BatchSampling::kUniform, phase.clip_norm};
  ASSERT_EQ(clipped.methods[0].training.parameters.size(), 2u);
  for (int run = 0; run < 2; ++run)
    EXPECT_EQ(train_without_privacy(model, private_part, clipped.pretrain_parameters[static_cast<std::size_t>(run)],
                                    steps, phase, dpsgd_run_seed(phase, run), {}),
              clipped.methods[0].training.parameters[static_cast<std::size_t>(run)]);
}

}  // namespace
}  // namespace filkit
