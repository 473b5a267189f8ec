// The learned-attack job end to end on a tiny image data set: sgd and dpsgd shadow models, the
// summary, the per-target table, the reconstructions, thread-count independence and bad options.
#include "filkit/jobs/learned_attack.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/data/npy.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
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
  JobOutputs outputs{
      dir.file("targets.csv"), dir.file("summary.json"), "", {{"reconstructions_out", dir.file("images.csv")}}};
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
  EXPECT_EQ(table.header,
            (std::vector<std::string>{"method", "target", "label", "mse", "ssim", "baseline_mse", "baseline_ssim"}));
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

/// Every method's MSE per target and the summary's numbers but the timings.
std::vector<double> attack_numbers(const LearnedAttackJobResult& result) {
  std::vector<double> numbers;
  for (const std::vector<double>& row : result.table().rows) numbers.insert(numbers.end(), row.begin(), row.end());
  return numbers;
}

TEST(LearnedAttackJob, KeepsItsShadowModelsAndAnAttackFromThemIsTheAttackWithout) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  LearnedAttackJobOptions options = tiny_options(dir);
  options.attack.train_shadow_models = 20;
  const LearnedAttackJobResult fresh = run_learned_attack(options);
  options.shadow_models = dir.file("store");  // created by the run
  const LearnedAttackJobResult first = run_learned_attack(options);
  EXPECT_EQ(attack_numbers(first), attack_numbers(fresh));
  for (const char* method : {"sgd", "dpsgd"}) {
    // 20 + 10 rows of softmax regression's 2 x 65 parameters, as numpy writes a float64 array.
    const NpyArray stored = read_npy(dir.file(std::string("store/") + method + ".npy"));
    EXPECT_EQ(stored.shape, (std::vector<Index>{30, 130})) << method;
    EXPECT_EQ(first.to_json()["methods"][method]["shadow_models_loaded"], 0) << method;
  }

  // The same attack again trains nothing; with more shadow models it trains only the new ones, and
  // every result is the one of an attack that trained them all.
  const LearnedAttackJobResult again = run_learned_attack(options);
  EXPECT_EQ(attack_numbers(again), attack_numbers(fresh));
  EXPECT_EQ(again.to_json()["methods"]["sgd"]["shadow_models_loaded"], 30);
  EXPECT_TRUE(again.to_json()["methods"]["sgd"]["seconds"]["shadow_models_per_second"].is_null());
  options.attack.train_shadow_models = 30;
  const LearnedAttackJobResult grown = run_learned_attack(options);
  EXPECT_EQ(grown.to_json()["methods"]["dpsgd"]["shadow_models_loaded"], 30);
  EXPECT_EQ(read_npy(dir.file("store/dpsgd.npy")).shape, (std::vector<Index>{40, 130}));
  LearnedAttackJobOptions unstored = options;
  unstored.shadow_models.clear();
  EXPECT_EQ(attack_numbers(grown), attack_numbers(run_learned_attack(unstored)));
  // Another attacker on the same shadow models needs no training either.
  options.attack.attacker_epochs = 7;
  EXPECT_EQ(run_learned_attack(options).to_json()["methods"]["sgd"]["shadow_models_loaded"], 40);
}

TEST(LearnedAttackJob, RefusesAShadowModelStoreItCannotUseNamingWhy) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  LearnedAttackJobOptions options = tiny_options(dir);
  options.training.methods = {PrivateTrainingMethod::kDpSgd};
  options.attack.train_shadow_models = 20;
  options.shadow_models = dir.file("store");
  run_learned_attack(options);

  LearnedAttackJobOptions noisier = options;
  noisier.training.private_phase.noise_multiplier = 2.0;
  EXPECT_THROW_NAMING(run_learned_attack(noisier), DataError,
                      "store/dpsgd.json' holds shadow models trained with "
                      "training.noise_multiplier = 0.05",
                      "this attack has 2.0", "another directory");
  LearnedAttackJobOptions other_seed = options;
  other_seed.attack.seed = 6;  // other D_fixed and candidates
  EXPECT_THROW_NAMING(run_learned_attack(other_seed), DataError, "seed = 5", "this attack has 6");
  // The gradient model's settings do not decide dpsgd's shadow models.
  LearnedAttackJobOptions other_lambda = options;
  other_lambda.training.gradient_model.lambda = 10.0;
  EXPECT_EQ(run_learned_attack(other_lambda).to_json()["methods"]["dpsgd"]["shadow_models_loaded"], 30);
  // jax's Adam count decides them (recorded only when on, so the stores made before it are taken);
  // the attacker's start does not.
  LearnedAttackJobOptions adam_count = options;
  adam_count.training.private_phase.adam_bias_correction_offset = 1;
  EXPECT_THROW_NAMING(run_learned_attack(adam_count), DataError,
                      "training.adam_bias_correction_offset = \"(not recorded)\"", "this attack has 1");
  LearnedAttackJobOptions jax_attacker = options;
  jax_attacker.attack.attacker_initialisation = NetworkInitialisation::kJax;
  EXPECT_EQ(run_learned_attack(jax_attacker).to_json()["methods"]["dpsgd"]["shadow_models_loaded"], 30);

  // Sizes before anything is read or hashed (issue 50: a link to /dev/zero was hashed for ever):
  // a .npy that is a device, or larger than the array the JSON records.
  const std::string npy = dir.file("store/dpsgd.npy");
  std::filesystem::rename(npy, dir.file("store/kept.npy"));
  std::filesystem::create_symlink("/dev/zero", npy);
  EXPECT_THROW_NAMING(run_learned_attack(options), DataError, "store/dpsgd.npy', which is not a regular file");
  std::filesystem::remove(npy);
  std::filesystem::copy_file(dir.file("store/kept.npy"), npy);
  std::ofstream(npy, std::ios::binary | std::ios::app) << std::string(70000, 'x');
  EXPECT_THROW_NAMING(run_learned_attack(options), DataError, "records 30 shadow models",
                      "more than their 31200 bytes");
  // A .npy that is not the one the JSON records (a save cut between the two files).
  const std::string bytes = npy_bytes(RowMatrix::Zero(30, 130));
  std::ofstream(npy, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_THROW_NAMING(run_learned_attack(options), DataError, "store/dpsgd.json' and '", "do not belong together");
  std::ofstream(dir.file("store/dpsgd.json")) << "{\"format\": \"something else\"}";
  EXPECT_THROW_NAMING(run_learned_attack(options), DataError, "is not a shadow-model store");
  std::filesystem::remove(npy);
  options.shadow_models = dir.file("store/dpsgd.json");
  EXPECT_INVALID_ARGUMENT(options.validate(), "shadow_models", "is not a directory");
  options.shadow_models = dir.file("store/dpsgd.json/inside");
  EXPECT_INVALID_ARGUMENT(run_learned_attack(options), "shadow_models", "cannot be created");
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
