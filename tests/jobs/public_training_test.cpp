// The public-training job (formerly fim) and `filkit public-training`: its outputs against a direct
// library call on the same split, the table's shape, the summary's per-method numbers, and bad
// options named.
#include "filkit/jobs/public_training.hpp"

#include "filkit/networks/networks.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace filkit {
namespace {

using testing::TempDir;

PublicTrainingJobOptions small_public_training_job(const std::string& path) {
  PublicTrainingJobOptions o;
  o.data.data = path;
  o.data.classes = std::vector<int>{};
  PublicDataTrainingOptions& t = o.training;
  t.public_fraction = 0.4;
  t.pretrain = {.steps = 30, .batch_size = 20, .step_size = 0.05, .weight_decay = 1e-4};
  t.private_phase.batch_size = 20;
  t.private_phase.steps = 4;
  t.private_phase.step_size = 0.05;
  t.private_phase.runs = 2;
  t.private_phase.seed = 9;
  t.gradient_model.hidden = {8, 6};
  t.gradient_model.steps = 3;
  t.gradient_model.decay = 1;
  t.gradient_model.min_steps = 1;
  t.gradient_model.batch_size = 16;
  return o;
}

TEST(PublicTrainingCommand, WritesOneRowPerAccountedMethodAndExampleAndTheLibrarysNumbers) {
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin";
  const TempDir dir;
  const PublicTrainingJobOptions options =
      small_public_training_job(testing::write_npz_dataset(dir, testing::random_classification(200, 6, 3, 4)));
  JobOutputs outputs;
  outputs.out = dir.file("fim.csv");
  outputs.json = dir.file("fim.json");
  const PublicTrainingJobResult result = run_job<PublicTrainingJob>(options, outputs);
  const Index n_private = result.training.n_private;
  EXPECT_EQ(result.training.n_public + n_private, result.data.train.n());
  const std::vector<std::string> lines = testing::read_lines(outputs.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(1 + 3 * n_private));  // dpsgd, prune, fim
  EXPECT_EQ(lines[0], "method,index,label,times_sampled,dfil,dfil_mse_bound,fisher_trace");

  std::ifstream in(outputs.json);
  const nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["command"], "public-training");
  EXPECT_EQ(json["seed"], 9);
  EXPECT_EQ(json["settings"]["public_fraction"], 0.4);
  EXPECT_EQ(json["settings"]["trace"], "gaussian");
  EXPECT_EQ(json["settings"]["probes"], 2);
  // The rows left out, counted as measure and dpsgd count them (issue 50: they were not).
  EXPECT_EQ(json["dropped_rows"]["test"], 0);
  EXPECT_EQ(json["unseen_level_rows"], 0);
  ASSERT_EQ(json["methods"].size(), 4u);
  EXPECT_EQ(json["methods"][0]["method"], "sgd");
  EXPECT_FALSE(json["methods"][0].contains("max_dfil"));
  const nlohmann::json& fim = json["methods"][3];
  EXPECT_EQ(fim["method"], "fim");
  EXPECT_EQ(fim["max_dfil"]["runs"].size(), 2u);
  EXPECT_EQ(fim["perturbation_cosine_with_mean_public_gradient"].size(), 2u);
  EXPECT_EQ(fim["perturbation_cosine_with_mean_public_gradient"][0].size(), 4u);
  EXPECT_EQ(fim["frozen_parameters"], 9);  // half of 3 x 6
  EXPECT_EQ(json["methods"][1]["rdp_epsilon"], fim["rdp_epsilon"]) << "same DP guarantee for every private method";

  // The same numbers as the library on the job's own split.
  PublicDataTrainingOptions direct = result.options.training;
  const PublicDataTrainingResult again =
      train_with_public_data(result.split.public_part, result.split.private_part, result.data.test, direct);
  for (std::size_t k = 1; k < again.methods.size(); ++k)
    EXPECT_EQ(again.methods[k].training.final_snapshot().fisher_trace,
              result.training.methods[k].training.final_snapshot().fisher_trace);
  const double max_dfil = result.training.methods[3].training.final_snapshot().dfil(6).maxCoeff();
  EXPECT_GT(max_dfil, 0.0);
}

TEST(PublicTrainingCommand, ModelsOutHoldsEveryRunsModelAsDocumented) {
  // Each row's parameters, read back from the CSV and applied as kModelParameterLayout says (class
  // k's weights at k d), classify the test set as the summary says that model does.
  const TempDir dir;
  PublicTrainingJobOptions options =
      small_public_training_job(testing::write_npz_dataset(dir, testing::random_classification(200, 6, 3, 4)));
  options.training.methods = {PrivateTrainingMethod::kSgd};
  if (networks_available()) options.training.methods.push_back(PrivateTrainingMethod::kDpSgd);
  JobOutputs outputs;
  outputs.extra["models_out"] = dir.file("models.csv");
  const PublicTrainingJobResult result = run_job<PublicTrainingJob>(options, outputs);
  const std::vector<std::string> lines = testing::read_lines(outputs.extra["models_out"]);
  const Index d = 6, K = 3, runs = 2;
  const std::size_t models = 1 + options.training.methods.size();  // the pre-trained start, then each method
  ASSERT_EQ(lines.size(), 1 + models * runs);
  EXPECT_EQ(lines[0].substr(0, 18), "method,run,w0,w1,w");
  const Dataset& test = result.data.test;
  ASSERT_GT(test.n(), 0);
  for (std::size_t row = 0; row < models * runs; ++row) {
    std::vector<double> cells;
    std::stringstream line(lines[1 + row]);
    for (std::string cell; std::getline(line, cell, ',');) cells.push_back(std::stod(cell));
    ASSERT_EQ(cells.size(), static_cast<std::size_t>(2 + d * K));
    const int method = static_cast<int>(cells[0]), run = static_cast<int>(cells[1]);
    EXPECT_EQ(method, static_cast<int>(row / runs) - 1);
    EXPECT_EQ(run, static_cast<int>(row % runs));
    Index correct = 0;
    for (Index i = 0; i < test.n(); ++i) {
      Index best = 0;
      VectorXd logits(K);
      for (Index k = 0; k < K; ++k) {
        logits(k) = 0.0;
        for (Index j = 0; j < d; ++j) logits(k) += cells[static_cast<std::size_t>(2 + k * d + j)] * test.X(i, j);
        if (logits(k) > logits(best)) best = k;
      }
      correct += best == static_cast<Index>(test.y(i));
    }
    const double accuracy = static_cast<double>(correct) / static_cast<double>(test.n());
    const double expected =
        method < 0 ? result.training.pretrain_test_accuracy[static_cast<std::size_t>(run)]
                   : result.methods[static_cast<std::size_t>(method)].test_accuracy[static_cast<std::size_t>(run)];
    EXPECT_DOUBLE_EQ(accuracy, expected) << "method " << method << " run " << run;
  }
  // The start is where the methods began: sgd moved from it.
  EXPECT_NE(lines[1], lines[1 + runs]);
}

TEST(PublicTrainingCommand, ReportsTheThesisAccountantBesideFilkits) {
  // The thesis' accountant (accountant.py, train_classifier.py): per step T + 1e-7 with T the 2-probe
  // estimate, scaled by its kappa (eps0 with the clip bound 1.115) / (sigma C)^2 / d.
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin";
  const TempDir dir;
  PublicTrainingJobOptions options =
      small_public_training_job(testing::write_npz_dataset(dir, testing::random_classification(200, 6, 3, 4)));
  options.training.methods = {PrivateTrainingMethod::kDpSgd};
  options.training.private_phase.runs = 1;
  options.training.private_phase.steps = 12;
  options.training.private_phase.noise_multiplier = 3.0;  // kappa well below 1, so 1.115 against 1.11524 shows
  const auto rounded_clip_kappa = [](const DpSgdResult& r, double sigma) {
    const double eps0 = std::sqrt(2.0 * std::log(1.25 / r.kappa_delta)) * 2.0 * 1.115 / sigma;
    return r.sampling_rate / (r.sampling_rate + (1.0 - r.sampling_rate) * std::exp(-eps0));
  };
  {  // filkit's accounting is the same 2-probe estimate: only the floor and kappa differ
    const PublicTrainingJobResult result = run_job<PublicTrainingJob>(options, JobOutputs{});
    const MethodResult& m = result.training.methods[0];
    const DpSgdSnapshot& last = m.training.final_snapshot();
    const double sc = std::pow(3.0 * options.training.private_phase.clip_norm, 2);
    ASSERT_EQ(m.fisher_term_sum.size(), 1u);
    for (Index i = 0; i < last.fisher_trace.size(); ++i)
      EXPECT_NEAR(m.fisher_term_sum[0](i), last.fisher_trace(i) * sc / m.training.kappa + last.times_sampled(i) * 1e-7,
                  1e-12 * (1.0 + m.fisher_term_sum[0](i)));
    const double kappa = rounded_clip_kappa(m.training, 3.0);
    EXPECT_GT(std::abs(kappa - m.training.kappa), 1e-6);
    const VectorXd dfil = (m.fisher_term_sum[0] * kappa / sc / 6.0).cwiseSqrt();
    EXPECT_NEAR(result.methods[0].fisher_term_mean_dfil[0], dfil.mean(), 1e-14);
    EXPECT_NEAR(result.methods[0].fisher_term_max_dfil[0], dfil.maxCoeff(), 1e-14);
    const nlohmann::json json = result.to_json();
    EXPECT_NEAR(json["methods"][0]["fisher_term_accountant"]["mean_dfil"]["mean"].get<double>(), dfil.mean(), 1e-14);
  }
  {  // exact accounting: the thesis' column draws its own 2 probes, unbiased for the exact trace
    options.training.private_phase.trace = TraceMethod::kExact;
    const PublicTrainingJobResult result = run_job<PublicTrainingJob>(options, JobOutputs{});
    const MethodResult& m = result.training.methods[0];
    const DpSgdSnapshot& last = m.training.final_snapshot();
    const double sc = std::pow(3.0 * options.training.private_phase.clip_norm, 2);
    const double exact = last.fisher_trace.sum() * sc / m.training.kappa;
    const double estimate = m.fisher_term_sum[0].sum() - last.times_sampled.sum() * 1e-7;
    // 2 probes: each sampled example's estimate has a relative sd of at most 1 (rank one); over the
    // 240 samplings of the run, 5 sd is 5 / sqrt(240) = 0.32 relative.
    EXPECT_NEAR(estimate / exact, 1.0, 5.0 / std::sqrt(last.times_sampled.sum()));
    EXPECT_NE(estimate, exact);
  }
}

TEST(PublicTrainingCommand, RefusesBadOptionsBeforeLoading) {
  PublicTrainingJobOptions o = small_public_training_job("/nonexistent.npz");
  o.training.public_fraction = 0.0;
  EXPECT_INVALID_ARGUMENT(run_public_training(o), "public_fraction", "(0, 1)");
  o = small_public_training_job("/nonexistent.npz");
  o.training.freeze_fraction = -0.5;
  EXPECT_INVALID_ARGUMENT(run_public_training(o), "freeze_fraction");
  o = small_public_training_job("/nonexistent.npz");
  o.training.private_phase.checkpoint_path = "/tmp/state";
  EXPECT_INVALID_ARGUMENT(run_public_training(o), "checkpoint", "one method at a time");
}

TEST(PublicTrainingCommand, FromTheCommandLineAlsoByItsFormerName) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  for (const char* name : {"public-training", "fim"}) {
    const auto [status, output] =
        testing::run_command(std::string(binary) + " " + name + " --data x.npz --public-fraction 1.5");
    EXPECT_NE(status, 0);
    EXPECT_NE(output.find("--public-fraction = 1.5: must lie in (0, 1)"), std::string::npos) << name << output;
    const auto [help_status, help] = testing::run_command(std::string(binary) + " " + name + " --help");
    EXPECT_EQ(help_status, 0);
    for (const char* flag : {"--public-fraction", "--freeze-fraction", "--methods", "--lambda", "--snr",
                             "--gradient-steps", "--pretrain-steps", "--noise-multiplier"})
      EXPECT_NE(help.find(flag), std::string::npos) << name << " " << flag;
  }
  // The command list names the job by its name only.
  const auto [list_status, list] = testing::run_command(std::string(binary) + " --help");
  EXPECT_NE(list.find("public-training"), std::string::npos) << list;
}

}  // namespace
}  // namespace filkit
