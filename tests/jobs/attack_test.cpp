// The attack job: its tables and summary against the library, IRFIL weights, bad inputs, the
// `filkit attack` command, and the real income data.
#include "filkit/jobs/attack.hpp"

#include "filkit/data/tabular_datasets.hpp"
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

AttackJobOptions command_options(const std::string& csv) {
  AttackJobOptions options;
  options.task.data.data = csv;
  options.task.data.target = "target";
  options.task.data.regression = true;
  options.task.fit.l2 = 1e-3;
  options.task.fit.intercept = true;
  options.attribute = "group";
  options.attack.sigmas = {1e-3, 1e-1};
  options.attack.trials = 5;
  options.attack.groups = 4;
  return options;
}

TEST(AttackCommand, WritesTablesAndASummaryThatMatchTheLibrary) {
  const TempDir dir;
  AttackJobOptions options = command_options(write_categorical_csv(dir, 200, true, 39, "table.csv"));
  JobOutputs outputs;
  outputs.out = dir.file("attack.csv");
  outputs.json = dir.file("attack.json");
  outputs.extra["examples_out"] = dir.file("examples.csv");
  options.attack.naive_examples = 4;
  std::ostringstream printed;
  const AttackResult result = run_job<AttackJob>(options, outputs, true, &printed).attack;
  EXPECT_TRUE(printed.str().empty());
  std::ifstream table(outputs.out);
  std::string header;
  std::getline(table, header);
  EXPECT_EQ(header,
            "sigma,group,eta_mean,prior,white_box,white_box_std,black_box,black_box_std,train_mse,test_mse,"
            "train_accuracy,test_accuracy");
  const nlohmann::json json = nlohmann::json::parse(std::ifstream(outputs.json));
  EXPECT_EQ(json["command"], "attack");
  EXPECT_EQ(json["settings"]["model"], "least-squares");
  EXPECT_EQ(json["examples"], 160);
  EXPECT_EQ(json["by_sigma"].size(), 2u);
  EXPECT_NEAR(json["by_sigma"][0]["white_box"].get<double>(), result.sigmas[0].white_box, 1e-15);
  EXPECT_LT(json["naive_refit"]["max_difference"].get<double>(), 1e-10);
  EXPECT_GT(result.sigmas[0].white_box, result.sigmas[1].white_box);

  // The same job through the library gives the same accuracies.
  const Task task = prepare_task(options.task, options.seed);
  AttackOptions library;
  library.fit = task.fit;
  library.sigmas = options.attack.sigmas;
  library.trials = options.attack.trials;
  library.groups = options.attack.groups;
  const AttackResult direct =
      attribute_inference(task.data.train, task.data.test, task.data.train.attribute("group"), library);
  EXPECT_EQ(direct.white_box_correct, result.white_box_correct);
  EXPECT_EQ(direct.black_box_correct, result.black_box_correct);

  run_job<AttackJob>(options, {}, false, &printed);
  EXPECT_NE(printed.str().find("white-box"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("naive refit"), std::string::npos) << printed.str();
}

TEST(AttackCommand, UsesIrfilWeightsAndNamesBadInputs) {
  const TempDir dir;
  const std::string csv = write_categorical_csv(dir, 200, true, 39, "table.csv");
  IrfilJobOptions irfil_options;
  irfil_options.task = command_options(csv).task;
  irfil_options.attribute = "group";
  irfil_options.irfil.iterations = 3;
  JobOutputs irfil_outputs;
  irfil_outputs.out = dir.file("weights.csv");
  const IrfilResult weights = run_job<IrfilJob>(irfil_options, irfil_outputs).irfil;

  AttackJobOptions options = command_options(csv);
  options.weights = irfil_outputs.out;
  const AttackResult weighted = run_attack(options).attack;
  // The attacked model is the weighted one: its eta are IRFIL's eta after.
  EXPECT_LT((weighted.eta - weights.eta_after).cwiseAbs().maxCoeff(), 1e-10 * weights.eta_after.maxCoeff());

  options.weights_column = "omega";
  EXPECT_INVALID_ARGUMENT(run_attack(options), "omega", "weights.csv");
  options.weights = "";
  options.attribute = "f0";
  EXPECT_INVALID_ARGUMENT(run_attack(options), "f0", "numeric");
  options.attribute = "";
  EXPECT_INVALID_ARGUMENT(run_attack(options), "attribute");
}

TEST(AttackBinary, HelpListsTheFlags) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const auto [status, output] = testing::run_command(std::string(binary) + " attack --help");
  EXPECT_EQ(status, 0) << output;
  for (const char* flag :
       {"--attribute", "--sigmas", "--trials", "--white-box", "--no-black-box", "--white-box-solver", "--examples",
        "--compare-naive", "--groups", "--weights", "--examples-out", "--out", "--json"})
    EXPECT_NE(output.find(flag), std::string::npos) << flag;
}

TEST(RealIncome, TopEtaDecileIsMoreVulnerableThanTheBottom) {
  try {
    tabular_dataset_file("income-regression");
  } catch (const std::invalid_argument&) {
    GTEST_SKIP() << "income.csv not exported (scripts/setup.sh)";
  }
  AttackJobOptions options;
  options.task.data.data = "income-regression";
  options.task.fit.intercept = true;
  options.task.fit.l2 = 1e-3;
  options.attack.sigmas = {3e-3};
  options.attack.trials = 5;
  options.attack.black_box = false;
  const AttackResult result = run_attack(options).attack;
  EXPECT_EQ(result.candidates.num_levels(), 5);
  const std::vector<double>& by_decile = result.sigmas[0].white_box_by_group;
  EXPECT_GT(by_decile[9], by_decile[0] + 0.1);
}

// `attack --groups 100000` wrote 42 MB of rows of NaN for groups without an example.
TEST(AttackCommand, RefusesMoreGroupsThanAttackedExamples) {
  const TempDir dir;
  AttackJobOptions options = command_options(write_categorical_csv(dir, 60, true, 3, "t.csv"));
  options.attack.max_examples = 20;
  options.attack.groups = 100000;
  EXPECT_INVALID_ARGUMENT(run_attack(options), "groups = 100000", "more than the 20 attacked examples");
}

TEST(AttackCommand, WritesTheSameOutputsForAnyThreadCount) {
  // 2400 training rows of 12 features (the attribute's one-hot columns 0, 1 and 10 numeric):
  // several blocks of the fit's and FIL's passes, with products Eigen would have split.
  const TempDir dir;
  AttackJobOptions options =
      command_options(testing::write_npz_dataset(dir, testing::random_categorical(3000, 10, 3, false, 40)));
  options.task.data.target.clear();
  options.task.data.regression = false;
  options.task.model = ModelKind::kLogistic;
  options.attribute = "0,1";
  options.attack.max_examples = 200;
  testing::expect_same_job_outputs_for_any_thread_count<AttackJob>(options);
}

}  // namespace
}  // namespace filkit
