// The learned-attack job end to end on a tiny image data set: sgd and dpsgd shadow models, the
// summary, the per-target table, the reconstructions, thread-count independence and bad options.
#include "filkit/jobs/learned_attack.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace filkit {
namespace {

using testing::TempDir;

/// n 8 x 8 images of two classes (class 1 brighter in the left half) as an .npz of shape (n, 8, 8).
std::string write_tiny_images(const TempDir& dir, Index n) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> pixel(0.0, 0.5);
  std::vector<double> x, y;
  for (Index i = 0; i < n; ++i) {
    const int label = static_cast<int>(i % 2);
    for (int h = 0; h < 8; ++h)
      for (int w = 0; w < 8; ++w) x.push_back(pixel(rng) + (label == 1 && w < 4 ? 0.5 : 0.0));
    y.push_back(label);
  }
  const std::string shape = "(" + std::to_string(n) + ", 8, 8)";
  return dir.write("tiny.npz", testing::zip_bytes({{"X.npy", testing::npy_bytes("<f8", shape, testing::raw_bytes(x))},
                                                   {"y.npy", testing::npy_f8(y, static_cast<std::size_t>(n))}},
                                                  false));
}

LearnedAttackJobOptions tiny_options(const TempDir& dir) {
  LearnedAttackJobOptions options;
  options.data.data = write_tiny_images(dir, 130);
  options.data.classes = std::vector<int>{};
  options.data.test_fraction = 0.0;
  options.public_size = 20;
  options.attack.fixed_size = 19;
  options.attack.train_shadow_models = 60;
  options.attack.target_shadow_models = 10;
  options.attack.attacker_hidden = {16};
  options.attack.attacker_epochs = 5;
  options.attack.attacker_batch_size = 16;
  options.attack.seed = 5;
  options.training.methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd};
  options.training.private_phase.batch_size = 20;
  options.training.gradient_model.batch_size = 20;
  return options;
}

TEST(LearnedAttackJob, AttacksSgdAndDpSgdShadowModelsAndWritesEveryOutput) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  const LearnedAttackJobOptions options = tiny_options(dir);
  JobOutputs outputs{dir.file("targets.csv"), dir.file("summary.json"), "", {{"reconstructions_out", dir.file("images.csv")}}};
  const LearnedAttackJobResult result = run_job<LearnedAttackJob>(options, outputs);

  const nlohmann::json json = result.to_json();
  EXPECT_EQ(json["command"], "learned-attack");
  EXPECT_EQ(json["counts"]["public"], 20);
  EXPECT_EQ(json["counts"]["fixed"], 19);
  EXPECT_EQ(json["counts"]["features"], 64);
  EXPECT_NE(json["lpips"].get<std::string>().find("not computed"), std::string::npos);
  for (const char* method : {"sgd", "dpsgd"}) {
    const nlohmann::json& m = json["methods"][method];
    EXPECT_EQ(m["mse"]["count"], 10) << method;
    EXPECT_GT(m["mse"]["mean"].get<double>(), 0.0) << method;
    EXPECT_GT(m["ssim"]["mean"].get<double>(), -1.0) << method;
    EXPECT_LE(m["ssim"]["mean"].get<double>(), 1.0) << method;
    EXPECT_GT(m["perfect_privacy"]["mse"]["mean"].get<double>(), 0.0) << method;
    EXPECT_EQ(m["parameter_count"], 2 * 65) << method;
    EXPECT_GT(m["seconds"]["shadow_models_per_second"].get<double>(), 0.0) << method;
  }
  EXPECT_FALSE(json["methods"].contains("fim"));
  EXPECT_EQ(json["settings"]["methods"], nlohmann::json({"sgd", "dpsgd"}));

  const NumericTable table = result.table();
  EXPECT_EQ(table.header, (std::vector<std::string>{"method", "target", "label", "mse", "ssim", "baseline_mse",
                                                    "baseline_ssim"}));
  ASSERT_EQ(table.rows.size(), 20u);
  EXPECT_EQ(table.rows[0][0], 0.0);   // sgd
  EXPECT_EQ(table.rows[10][0], 1.0);  // dpsgd
  EXPECT_EQ(table.rows[0][1], 60.0);  // the first held-out candidate
  // The baseline is the same for every method: it depends on the labels and training candidates only.
  EXPECT_EQ(table.rows[3][5], table.rows[13][5]);

  const NumericTable images = result.extra_table("reconstructions_out");
  ASSERT_EQ(images.header.size(), 3u + 64u);
  ASSERT_EQ(images.rows.size(), 10u * 4u);  // targets, baselines, sgd, dpsgd
  EXPECT_EQ(images.rows[0][0], -2.0);
  EXPECT_EQ(images.rows[1][0], -1.0);
  EXPECT_EQ(images.rows[20][0], 0.0);
  EXPECT_EQ(images.rows[30][0], 1.0);
  EXPECT_EQ(testing::read_lines(dir.file("images.csv")).size(), 41u);
  EXPECT_EQ(testing::read_lines(dir.file("targets.csv")).size(), 21u);
}

TEST(LearnedAttackJob, GivesTheSameOutputsForAnyThreadCount) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  LearnedAttackJobOptions options = tiny_options(dir);
  options.attack.train_shadow_models = 30;
  testing::expect_same_job_outputs_for_any_thread_count<LearnedAttackJob>(options);
}

TEST(LearnedAttackJob, RefusesOptionsItCannotRunNamingTheField) {
  const TempDir dir;
  LearnedAttackJobOptions options = tiny_options(dir);
  options.training.private_phase.batch_size = 21;
  EXPECT_INVALID_ARGUMENT(options.validate(), "batch_size = 21", "fixed_size + 1 = 20");
  options = tiny_options(dir);
  options.training.gradient_model.batch_size = 21;
  EXPECT_INVALID_ARGUMENT(options.validate(), "gradient_batch_size = 21", "public_size = 20");
  options = tiny_options(dir);
  options.training.methods.clear();
  EXPECT_INVALID_ARGUMENT(options.validate(), "methods");
  options = tiny_options(dir);
  options.attack.train_shadow_models = 0;
  EXPECT_INVALID_ARGUMENT(options.validate(), "train_shadow_models = 0");
  options = tiny_options(dir);
  options.public_size = 100;  // 100 + 19 + 70 > 130 rows
  options.training.gradient_model.batch_size = 20;
  EXPECT_INVALID_ARGUMENT(run_learned_attack(options), "= 189 rows, and the data");
}

}  // namespace
}  // namespace filkit
