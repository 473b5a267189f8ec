// Attribute inference: candidate minimisers by rank-2 updates against exact refits, the white-box
// attack's limits in sigma, the black-box attack on hand-made examples, determinism, option
// checks.
#include "filkit/leakage/attribute_inference.hpp"

#include "filkit/leakage/fil.hpp"
#include "filkit/leakage/irfil.hpp"
#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <fstream>
#include <numeric>
#include <sstream>

namespace filkit {
namespace {

using testing::random_categorical;
using testing::TempDir;

std::vector<Index> all_examples(Index n) {
  std::vector<Index> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), Index{0});
  return all;
}

FitOptions options_for(ModelKind kind, bool regression, bool intercept, double l2) {
  FitOptions options;
  options.kind = kind;
  options.regression = regression;
  options.intercept = intercept;
  options.l2 = l2;
  options.gradient_tolerance = 1e-12;
  return options;
}

struct MinimiserCase {
  ModelKind kind;
  bool regression;
  bool intercept;
  double tolerance;
};

class CandidateMinimisersAgainstRefits : public ::testing::TestWithParam<MinimiserCase> {};

TEST_P(CandidateMinimisersAgainstRefits, UpdatesEqualExactRefits) {
  const MinimiserCase c = GetParam();
  const Dataset data = random_categorical(150, 3, 4, c.regression, 31);
  const FitOptions options = options_for(c.kind, c.regression, c.intercept, 1e-3);
  const VectorXd omega = VectorXd::LinSpaced(150, 0.3, 1.7);
  const Model model = fit(data, options, omega);
  const AttributeCandidates candidates = attribute_candidates(data, data.attribute("group"));
  const std::vector<Index> examples = {0, 5, 17, 42, 59, 149};
  const CandidateMinimisers fast =
      candidate_minimisers(model, data, omega, candidates, examples, options, WhiteBoxSolver::kUpdate);
  EXPECT_EQ(fast.fallback_refits, 0);
  const double scale = model.flat().norm();
  double largest_shift = 0.0;
  for (std::size_t e = 0; e < examples.size(); ++e) {
    for (Index k = 0; k < candidates.num_levels(); ++k) {
      // The exact refit of the changed data, from scratch.
      Dataset changed = data;
      for (std::size_t j = 0; j < candidates.columns.size(); ++j)
        changed.X(examples[e], candidates.columns[j]) = candidates.patterns(k, static_cast<Index>(j));
      const VectorXd exact = fit(changed, options, omega).flat() - model.flat();
      const VectorXd shift = fast.shifts.row(static_cast<Index>(e) * candidates.num_levels() + k).transpose();
      EXPECT_LT((shift - exact).norm(), c.tolerance * scale) << "example " << examples[e] << " level " << k;
      largest_shift = std::max(largest_shift, exact.norm());
    }
  }
  EXPECT_GT(largest_shift, 1e3 * c.tolerance * scale) << "the shifts must be resolvable at this tolerance";
  // The naive path agrees too.
  const CandidateMinimisers slow =
      candidate_minimisers(model, data, omega, candidates, examples, options, WhiteBoxSolver::kRefit);
  EXPECT_LT((slow.shifts - fast.shifts).cwiseAbs().maxCoeff(), c.tolerance * scale);
}

INSTANTIATE_TEST_SUITE_P(Models, CandidateMinimisersAgainstRefits,
                         ::testing::Values(MinimiserCase{ModelKind::kLeastSquares, true, true, 1e-10},
                                           MinimiserCase{ModelKind::kLeastSquares, false, false, 1e-10},
                                           MinimiserCase{ModelKind::kLogistic, false, true, 1e-9},
                                           MinimiserCase{ModelKind::kLogistic, false, false, 1e-9}));

TEST(CandidateMinimisers, LogisticFallsBackToARefitWhenTheChordStalls) {
  // 60 examples and a weak penalty: for some candidates H(w*) is far from the changed Hessian.
  const Dataset data = random_categorical(60, 3, 4, false, 31);
  const FitOptions options = options_for(ModelKind::kLogistic, false, true, 1e-3);
  const VectorXd omega = VectorXd::LinSpaced(60, 0.3, 1.7);
  const Model model = fit(data, options, omega);
  const AttributeCandidates candidates = attribute_candidates(data, data.attribute("group"));
  const std::vector<Index> examples = all_examples(60);
  const CandidateMinimisers fast =
      candidate_minimisers(model, data, omega, candidates, examples, options, WhiteBoxSolver::kUpdate);
  const CandidateMinimisers slow =
      candidate_minimisers(model, data, omega, candidates, examples, options, WhiteBoxSolver::kRefit);
  EXPECT_GT(fast.fallback_refits, 0);
  EXPECT_LT(fast.fallback_refits, 60);
  EXPECT_LT((slow.shifts - fast.shifts).cwiseAbs().maxCoeff(), 1e-9 * model.flat().norm());
}

TEST(CandidateMinimisers, AWrongHessianIsCaught) {
  // Shifts computed for a model with another lambda do not match this model's refits.
  const Dataset data = random_categorical(50, 2, 3, true, 32);
  const FitOptions options = options_for(ModelKind::kLeastSquares, true, false, 1e-3);
  FitOptions other = options;
  other.l2 = 1e-1;
  const Model model = fit(data, options);
  const AttributeCandidates candidates = attribute_candidates(data, data.attribute("group"));
  const CandidateMinimisers right =
      candidate_minimisers(model, data, VectorXd(), candidates, {3}, options, WhiteBoxSolver::kUpdate);
  const CandidateMinimisers wrong =
      candidate_minimisers(fit(data, other), data, VectorXd(), candidates, {3}, other, WhiteBoxSolver::kUpdate);
  EXPECT_GT((right.shifts - wrong.shifts).cwiseAbs().maxCoeff(), 1e-4);
}

AttackOptions small_attack(ModelKind kind, bool regression, std::vector<double> sigmas) {
  AttackOptions options;
  options.fit = options_for(kind, regression, true, 1e-3);
  options.fit.gradient_tolerance = 1e-10;
  options.sigmas = std::move(sigmas);
  options.trials = 30;
  options.seed = 4;
  options.groups = 4;
  return options;
}

TEST(WhiteBoxAttack, AccuracyGoesToOneAsSigmaVanishesAndToChanceAsItGrows) {
  for (const ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic}) {
    const bool regression = kind == ModelKind::kLeastSquares;
    const Dataset data = random_categorical(80, 2, 3, regression, 33);
    const AttackOptions options = small_attack(kind, regression, {1e-9, 1e-4, 1e-2, 1e3});
    const AttackResult result = attribute_inference(data, Dataset(), data.attribute("group"), options);
    EXPECT_EQ(result.sigmas[0].white_box, 1.0) << to_string(kind);
    EXPECT_GE(result.sigmas[0].white_box, result.sigmas[1].white_box);
    EXPECT_GE(result.sigmas[1].white_box, result.sigmas[2].white_box - 0.02);
    // Swamped by noise, the guess no longer depends on the data: about one level in three.
    EXPECT_NEAR(result.sigmas[3].white_box, 1.0 / 3.0, 0.1) << to_string(kind);
    EXPECT_LT(result.sigmas[3].white_box, result.prior_accuracy + 0.1);
    EXPECT_NEAR(result.sigmas[3].eta_mean * 1e3, result.eta.mean(), 1e-12 * result.eta.mean());
  }
}

TEST(WhiteBoxAttack, HigherEtaGroupsAreMoreVulnerable) {
  // FIL is a first-order measure: it predicts the effect of a one-hot change well when the
  // attribute's weights are small next to the residuals (here 0.2 and 0.4 against noise 0.5).
  const Dataset data = random_categorical(200, 2, 3, true, 34, 0.2);
  AttackOptions options = small_attack(ModelKind::kLeastSquares, true, {0.0});
  options.white_box = true;
  options.black_box = false;
  // A sigma where the attack is neither certain nor hopeless: eta of order 1.
  const Model model = fit(data, options.fit);
  const VectorXd eta = FisherInformationLoss(model, data)
                           .per_example_selection(CoordinateSelection::columns(data.attribute("group").columns));
  options.sigmas = {eta.mean()};
  const AttackResult result = attribute_inference(data, Dataset(), data.attribute("group"), options);
  const std::vector<double>& by_group = result.sigmas[0].white_box_by_group;
  ASSERT_EQ(by_group.size(), 4u);
  EXPECT_GT(by_group[3], by_group[0] + 0.15);
  for (std::size_t g = 1; g < result.group_eta.size(); ++g) EXPECT_GT(result.group_eta[g], result.group_eta[g - 1]);
  EXPECT_TRUE(std::isnan(result.sigmas[0].black_box));
}

TEST(BlackBoxAttack, GaussianLikelihoodTimesPriorOnAConstructedExample) {
  // Attribute: two one-hot columns (levels a, b, and c = all zero), one numeric column.
  Dataset data;
  data.X.resize(6, 3);
  data.X << 1, 0, 0.0,  //
      1, 0, 1.0,        //
      0, 1, 0.0,        //
      0, 0, 0.0,        //
      1, 0, -1.0,       //
      0, 1, 2.0;
  data.y.resize(6);
  AttributeColumns attribute{"tint", {0, 1}, {"a", "b"}, "c", true};
  const AttributeCandidates candidates = attribute_candidates(data, attribute);
  EXPECT_EQ(candidates.truth, (std::vector<Index>{0, 0, 1, 2, 0, 1}));
  EXPECT_EQ(candidates.mode, 0);
  Model model;
  model.kind = ModelKind::kLeastSquares;
  model.regression = true;
  model.n_train = 6;
  model.num_classes = 1;
  model.weights = (MatrixXd(3, 1) << 4.0, -4.0, 1.0).finished();
  // Targets equal to the prediction at some level: y = w.x with the attribute set to that level.
  data.y << 0.0,  // example 0 (really a): looks like c (score 0)
      5.0,        // example 1: a (4 + 1)
      -4.0,       // example 2: b
      4.0,        // example 3 (really c): looks like a
      -1.0,       // example 4 (really a): looks like c (0 - 1)
      -2.0;       // example 5: b (-4 + 2)
  // Residuals of the model on the data: 4, 0, 0, -4, 4, 0 -> s^2 = 48 / (6 - 3) = 16, so a
  // mismatch of 4 costs 16 / 32 = 0.5 in log-likelihood, less than the prior's log(3) for a
  // (3 of 6) over c (1 of 6): the prior wins.
  const std::vector<Index> guesses = black_box_guesses(model, data, candidates, all_examples(6));
  EXPECT_EQ(guesses, (std::vector<Index>{0, 0, 1, 0, 0, 1}));

  // Six more examples fitted exactly (c with x = 1, y = 1; b with x = 0, y = -4) shrink s^2 to
  // 48 / 9, so the same mismatch costs 1.5, more than any prior ratio (a 3, b 5, c 4 of 12):
  // the likelihood wins and examples 0 and 4 look like c.
  Dataset more = data;
  more.X.conservativeResize(12, 3);
  more.y.conservativeResize(12);
  for (Index i = 6; i < 12; ++i) {
    const bool c = i < 9;
    more.X.row(i) << 0, c ? 0 : 1, c ? 1 : 0;
    more.y(i) = c ? 1.0 : -4.0;
  }
  model.n_train = 12;
  const AttributeCandidates more_candidates = attribute_candidates(more, attribute);
  EXPECT_EQ(black_box_guesses(model, more, more_candidates, all_examples(12)),
            (std::vector<Index>{2, 0, 1, 0, 2, 1, 2, 2, 2, 1, 1, 1}));
}

TEST(BlackBoxAttack, ConfusionMatrixOfAClassifier) {
  // Levels a (rows 0-2), b (3-4), c (5-7) and a constant column; scores a 10, b -15, c -5.
  Dataset data;
  data.X = RowMatrix::Zero(8, 3);
  data.X.col(2).setOnes();
  data.X(0, 0) = data.X(1, 0) = data.X(2, 0) = 1.0;
  data.X(3, 1) = data.X(4, 1) = 1.0;
  data.y = (VectorXd(8) << 1, 1, 0, 0, 0, 0, 0, 1).finished();
  data.class_names = {"0", "1"};
  AttributeColumns attribute{"tint", {0, 1}, {"a", "b"}, "c", true};
  const AttributeCandidates candidates = attribute_candidates(data, attribute);
  Model model;
  model.kind = ModelKind::kLogistic;
  model.n_train = 8;
  model.weights = (MatrixXd(3, 1) << 15.0, -10.0, -5.0).finished();
  // Predictions 1 for rows 0-2, else 0. Counts + 1: (y 1, pred 1) 3, (y 0, pred 1) 2, (y 0,
  // pred 0) 5, (y 1, pred 0) 2, so P(1|1) = 3/5, P(0|1) = 2/5, P(0|0) = 5/7, P(1|0) = 2/7; priors
  // a 3/8, b 2/8, c 3/8. y = 1: a 3/8 * 3/5 beats c 3/8 * 2/7 and b. y = 0: c 3/8 * 5/7 beats
  // b 2/8 * 5/7 and a 3/8 * 2/5.
  const std::vector<Index> guesses = black_box_guesses(model, data, candidates, all_examples(8));
  EXPECT_EQ(guesses, (std::vector<Index>{0, 0, 2, 2, 2, 2, 2, 0}));
}

TEST(AttributeCandidates, AcceptsScaledOneHotBlocksAndRejectsOthers) {
  Dataset data = random_categorical(20, 2, 3, true, 35);
  data.X /= 4.0;  // global-max scaling keeps the one-hot structure
  const AttributeCandidates scaled = attribute_candidates(data, data.attribute("group"));
  EXPECT_EQ(scaled.patterns(0, 0), 0.25);
  EXPECT_EQ(scaled.patterns.row(2).norm(), 0.0);
  EXPECT_EQ(scaled.levels, (std::vector<std::string>{"g0", "g1", "g2"}));
  EXPECT_NEAR(scaled.prior.sum(), 1.0, 1e-15);
  EXPECT_INVALID_ARGUMENT(attribute_candidates(data, data.attribute("f0")), "f0", "numeric");
  EXPECT_INVALID_ARGUMENT(attribute_candidates(data, find_attribute(data, "1,2")), "not one-hot");
  data.X(4, 0) = data.X(4, 1) = 0.25;
  EXPECT_INVALID_ARGUMENT(attribute_candidates(data, data.attribute("group")), "group", "row 4");
  EXPECT_INVALID_ARGUMENT(find_attribute(data, "0,9"), "9");
  EXPECT_INVALID_ARGUMENT(find_attribute(data, "colour"), "colour", "group");
}

TEST(AttributeInference, IsDeterministicAndIndependentOfTheThreadCount) {
  // 2500 rows of 12 features make several blocks of the fit's and FIL's row passes.
  const Dataset data = random_categorical(2500, 10, 3, false, 36);
  AttackOptions options = small_attack(ModelKind::kLogistic, false, {1e-3, 1e-1});
  options.trials = 8;
  options.max_examples = 150;
  testing::expect_same_for_any_thread_count(
      [&] { return attribute_inference(data, data, data.attribute("group"), options); },
      [](const AttackResult& one, const AttackResult& more) {
        EXPECT_TRUE(testing::same_bits(one.model.weights, more.model.weights));
        EXPECT_EQ(one.examples, more.examples);
        EXPECT_TRUE(testing::same_bits(one.eta, more.eta));
        EXPECT_TRUE(testing::same_bits(one.nearest_shift, more.nearest_shift));
        EXPECT_TRUE(testing::same_bits(one.white_box_correct, more.white_box_correct));
        EXPECT_TRUE(testing::same_bits(one.black_box_correct, more.black_box_correct));
        EXPECT_TRUE(testing::same_bits(one.sigmas[1].test_accuracy, more.sigmas[1].test_accuracy));
        EXPECT_TRUE(testing::same_bits(one.sigmas[1].train_mse, more.sigmas[1].train_mse));
      });
  const AttackResult first = attribute_inference(data, data, data.attribute("group"), options);
  options.seed = 5;
  const AttackResult other = attribute_inference(data, data, data.attribute("group"), options);
  EXPECT_NE(other.sigmas[1].test_mse, first.sigmas[1].test_mse);
}

TEST(CandidateMinimisers, AreBitwiseIdenticalOnAnyNumberOfThreads) {
  for (const ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic}) {
    for (const WhiteBoxSolver solver : {WhiteBoxSolver::kUpdate, WhiteBoxSolver::kRefit}) {
      SCOPED_TRACE(to_string(kind) + ", " + to_string(solver));
      const bool regression = kind == ModelKind::kLeastSquares;
      const Dataset data = random_categorical(2500, 10, 3, regression, 38);
      const FitOptions options = options_for(kind, regression, true, 1e-3);
      const AttributeCandidates candidates = attribute_candidates(data, data.attribute("group"));
      const std::vector<Index> examples = {0, 5, 1200, 2499};
      testing::expect_same_for_any_thread_count(
          [&] {
            return candidate_minimisers(fit(data, options), data, VectorXd(), candidates, examples, options, solver);
          },
          [](const CandidateMinimisers& one, const CandidateMinimisers& more) {
            EXPECT_TRUE(testing::same_bits(one.shifts, more.shifts));
            EXPECT_EQ(one.fallback_refits, more.fallback_refits);
          });
    }
  }
}

TEST(AttributeInference, SubsetsGroupsAndNaiveComparison) {
  const Dataset data = random_categorical(100, 2, 3, true, 37);
  AttackOptions options = small_attack(ModelKind::kLeastSquares, true, {1e-2});
  options.max_examples = 40;
  options.naive_examples = 5;
  options.trials = 3;
  const AttackResult result = attribute_inference(data, data, data.attribute("group"), options);
  ASSERT_EQ(result.examples.size(), 40u);
  EXPECT_TRUE(std::is_sorted(result.examples.begin(), result.examples.end()));
  std::vector<int> sizes(4, 0);
  for (int g : result.group) ++sizes[static_cast<std::size_t>(g)];
  EXPECT_EQ(sizes, (std::vector<int>{10, 10, 10, 10}));
  EXPECT_EQ(result.naive.examples, 5);
  EXPECT_LT(result.naive.max_difference, 1e-10);
  EXPECT_GT(result.naive.seconds, 0.0);
  // The margin is the distance to the nearest wrong candidate minimiser.
  ASSERT_TRUE(result.nearest_shift.allFinite());
  EXPECT_GT(result.nearest_shift.minCoeff(), 0.0);
  EXPECT_EQ(result.table_rows().size(), 5u);  // all + 4 groups
  EXPECT_EQ(result.example_rows().size(), 40u);
  const nlohmann::json json = result.to_json();
  EXPECT_EQ(json["attribute"]["levels"].size(), 3u);
  EXPECT_TRUE(json.contains("naive_refit"));
}

TEST(AttackOptions, BadOptionsThrowNamingTheField) {
  const Dataset data = random_categorical(30, 2, 3, true, 38);
  const AttributeColumns& group = data.attribute("group");
  AttackOptions options = small_attack(ModelKind::kLeastSquares, true, {});
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "sigmas");
  options.sigmas = {0.1, -1.0};
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "sigmas", "-1");
  options.sigmas = {0.1};
  options.trials = 0;
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "trials", "0");
  options.trials = 2;
  options.white_box = options.black_box = false;
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "white_box", "black_box");
  options.white_box = true;
  options.solver = WhiteBoxSolver::kRefit;
  options.naive_examples = 3;
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "compare_naive = 3", "update");
  options.naive_examples = 0;
  options.groups = 0;
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "groups");
  options.groups = 3;
  options.fit.kind = ModelKind::kSoftmax;
  options.fit.regression = false;
  EXPECT_INVALID_ARGUMENT(attribute_inference(data, data, group, options), "softmax");
  EXPECT_INVALID_ARGUMENT(parse_enum<WhiteBoxSolver>("fast"), "fast", "update");
}

}  // namespace
}  // namespace filkit
