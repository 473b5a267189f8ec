// The DP-SGD job on networks: the ConvNet end to end with resuming, and the engines a model has.
#include "filkit/base/options.hpp"
#include "filkit/jobs/dpsgd.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>

namespace filkit {
namespace {

using testing::TempDir;

TEST(DpSgdNetworksCommand, RunsTheConvNetOnMnistEndToEndAndResumes) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  DpSgdJobOptions options;
  options.model = ModelChoice::kCnn;
  options.data.data = "mnist";
  options.data.train_size = 60;
  options.data.test_size = 50;
  options.dpsgd.batch_size = 10;
  options.dpsgd.steps = 4;
  options.dpsgd.seed = 3;
  JobOutputs outputs;
  outputs.out = dir.file("cnn.csv");
  outputs.json = dir.file("cnn.json");
  options.dpsgd.checkpoint_path = dir.file("state.cbor");
  options.dpsgd.stop_after = 2;
  try {
    run_job<DpSgdJob>(options, outputs);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("not found") != std::string::npos) GTEST_SKIP() << e.what();
    throw;
  }
  EXPECT_FALSE(std::filesystem::exists(outputs.json)) << "no outputs before the job is complete";
  const DpSgdJobResult result = run_job<DpSgdJob>(options, outputs);
  ASSERT_TRUE(result.training.complete);
  EXPECT_TRUE(result.training.resumed);
  std::ifstream in(outputs.json);
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["parameter_count"], 26010);
  EXPECT_EQ(summary["num_classes"], 10);
  EXPECT_EQ(summary["n"], 60);
  EXPECT_EQ(summary["settings"]["model"], "cnn");
  EXPECT_EQ(summary["settings"]["trace"], "gaussian");  // the autos, resolved for a network
  EXPECT_EQ(summary["settings"]["spectral"], "none");
  EXPECT_EQ(summary["settings"]["probes"], 1);
  EXPECT_EQ(summary["settings"]["classes"], nlohmann::json::array());  // networks: every class
  EXPECT_GT(summary["snapshots"].back()["dfil"]["max"].get<double>(), 0.0);
  EXPECT_EQ(testing::read_lines(outputs.out).size(), 61u);  // header + one row an example
}

TEST(DpSgdNetworksCommand, RejectsEnginesAModelDoesNotHave) {
  DpSgdJobOptions options;
  options.model = ModelChoice::kCnn;
  options.engine = DpSgdEngine::kClosedForm;
  EXPECT_THROW(options.training_options(), std::invalid_argument);
  options.model = ModelChoice::kLogistic;
  options.engine = DpSgdEngine::kTorch;
  EXPECT_THROW(options.training_options(), std::invalid_argument);
  options.model = ModelChoice::kSoftmax;
  EXPECT_TRUE(options.training_options().network.has_value());
  options.engine = DpSgdEngine::kAuto;
  EXPECT_FALSE(options.training_options().network.has_value());
  int probes = 0;
  EXPECT_THROW(option_from_text("probes", "many", probes), std::invalid_argument);
}

}  // namespace
}  // namespace filkit
