// The irfil job: its outputs (weights, eta history, summary) and the `filkit irfil` command.
#include "filkit/jobs/irfil.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace filkit {
namespace {

using testing::TempDir;
using testing::write_categorical_csv;

TEST(IrfilCommand, WritesWeightsEtaHistoryAndSummary) {
  const TempDir dir;
  IrfilJobOptions options;
  options.task.data.data = write_categorical_csv(dir, 150, true, 21, "regression.csv");
  options.task.data.target = "target";
  options.task.data.regression = true;
  options.task.fit.l2 = 1e-3;
  options.task.fit.intercept = true;
  options.irfil.iterations = 4;
  options.attribute = "group";
  options.seed = 3;
  JobOutputs outputs;
  outputs.out = dir.file("irfil.csv");
  outputs.json = dir.file("irfil.json");
  outputs.extra["history_out"] = dir.file("history.csv");
  std::ostringstream printed;
  const IrfilResult result = run_job<IrfilJob>(options, outputs, true, &printed).irfil;
  EXPECT_TRUE(printed.str().empty());
  EXPECT_EQ(result.iterations.size(), 5u);

  const std::vector<std::string> lines = testing::read_lines(outputs.out);
  ASSERT_EQ(lines.size(), 121u);  // 120 training rows (20% held out) and the header
  EXPECT_EQ(lines[0], "index,label,weight,eta_before,eta_after");
  EXPECT_EQ(testing::read_lines(outputs.extra["history_out"])[0],
            "index,label,iteration_0,iteration_1,iteration_2,iteration_3,iteration_4");
  const VectorXd final_weights = read_example_weights(outputs.out, "weight", 120);
  EXPECT_LT((final_weights - result.weights.back()).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_EQ(read_example_weights(outputs.extra["history_out"], "iteration_2", 120), result.weights[2]);

  const nlohmann::json json = nlohmann::json::parse(std::ifstream(outputs.json));
  EXPECT_EQ(json["command"], "irfil");
  EXPECT_EQ(json["settings"]["model"], "least-squares");  // --model auto for a regression
  EXPECT_EQ(json["attribute_columns"].size(), 2u);
  EXPECT_EQ(json["iterations"].size(), 5u);
  EXPECT_NEAR(json["iterations"][4]["eta"]["std"].get<double>(), result.iterations[4].eta.std, 1e-15);
  EXPECT_LT(result.iterations[4].eta.std, result.iterations[0].eta.std);

  run_job<IrfilJob>(options, {}, false, &printed);
  EXPECT_NE(printed.str().find("eta mean"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("test MSE"), std::string::npos) << printed.str();
}

TEST(IrfilCommand, ClassWeightingOfAClassifierAndAnUnknownAttribute) {
  const TempDir dir;
  IrfilJobOptions options;
  options.task.data.data = write_categorical_csv(dir, 150, false, 21, "classes.csv");
  options.task.data.target = "target";
  options.task.fit.l2 = 1e-2;
  options.irfil.iterations = 2;
  options.irfil.weighting = IrfilWeighting::kHybrid;
  const IrfilResult result = run_irfil(options).irfil;
  EXPECT_GT(result.iterations.back().train_accuracy, 0.7);
  options.attribute = "colour";
  EXPECT_INVALID_ARGUMENT(run_irfil(options), "colour", "group");
}

TEST(IrfilBinary, HelpListsTheFlags) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const auto [status, output] = testing::run_command(std::string(binary) + " irfil --help");
  EXPECT_EQ(status, 0) << output;
  for (const char* flag : {"--iterations", "--weighting", "--min-weight", "--max-weight", "--attribute", "--sigma",
                           "--history-out", "--out", "--json", "--quiet", "--data", "--model"})
    EXPECT_NE(output.find(flag), std::string::npos) << flag;
}

TEST(IrfilCommand, WritesTheSameOutputsForAnyThreadCount) {
  // 2400 training rows of 12 features: several blocks of the fits' and FIL's passes, with
  // products Eigen would have split between threads.
  const TempDir dir;
  IrfilJobOptions options;
  options.task.data.data = testing::write_npz_dataset(dir, testing::random_classification(3000, 12, 2, 22));
  options.task.fit.l2 = 1e-3;
  options.task.fit.intercept = true;
  options.irfil.iterations = 2;
  testing::expect_same_job_outputs_for_any_thread_count<IrfilJob>(options);
  options.attribute = "3,4";
  testing::expect_same_job_outputs_for_any_thread_count<IrfilJob>(options);
}

}  // namespace
}  // namespace filkit
