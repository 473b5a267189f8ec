#include "filkit/jobs/accountant.hpp"

#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace filkit {
namespace {

// The options and where the summary goes, run as the command line runs the job.
struct AccountantCase : AccountantOptions {
  std::string json_path;
};

void run_accountant(const AccountantCase& job) {
  JobOutputs outputs;
  outputs.json = job.json_path;
  run_job<AccountantJob>(job, outputs);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

AccountantCase opacus_check_case(const std::string& json_path) {
  AccountantCase options;
  options.sample_rate = 0.04;
  options.noise_multiplier = 1.5;
  options.steps = 2250;
  options.json_path = json_path;
  return options;
}

TEST(AccountantCli, WritesJsonWithInputsEpsilonAndRdpCurve) {
  testing::TempDir dir;
  run_accountant(opacus_check_case(dir.file("out.json")));
  const nlohmann::json out = read_json(dir.file("out.json"));
  EXPECT_EQ(out["command"], "accountant");
  EXPECT_EQ(out["filkit_version"], version());
  EXPECT_EQ(out["filkit_build"], build());  // the compiler and instruction sets: the last bits depend on them
  EXPECT_EQ(out["settings"]["sample_rate"], 0.04);
  EXPECT_EQ(out["settings"]["noise_multiplier"], 1.5);
  EXPECT_EQ(out["settings"]["steps"], 2250);
  EXPECT_EQ(out["settings"]["delta"], 1e-5);
  EXPECT_EQ(out["settings"]["orders"], "opacus");
  EXPECT_NEAR(out["eps"].get<double>(), 7.32911, 1e-5);
  EXPECT_EQ(out["optimal_order"], 3.9);
  EXPECT_EQ(out["optimal_order_status"], "interior");
  EXPECT_EQ(out["warning"], "");
  EXPECT_EQ(out["orders"].get<std::vector<double>>(), rdp_orders(OrderGrid::kOpacus));
  const std::vector<double> step_rdp = subsampled_gaussian_rdp(1.5, 0.04, rdp_orders(OrderGrid::kOpacus));
  const std::vector<double> rdp = out["rdp"].get<std::vector<double>>();
  ASSERT_EQ(rdp.size(), step_rdp.size());
  for (std::size_t k = 0; k < rdp.size(); ++k) EXPECT_DOUBLE_EQ(rdp[k], 2250 * step_rdp[k]);
}

TEST(AccountantCli, DerivesStepsFromEpochsBatchSizeAndDatasetSize) {
  testing::TempDir dir;
  AccountantCase options;
  options.batch_size = 150;
  options.n = 60000;
  options.noise_multiplier = 1.3;
  options.epochs = 15;
  options.json_path = dir.file("out.json");
  run_accountant(options);
  const nlohmann::json out = read_json(options.json_path);
  EXPECT_EQ(out["mechanisms"][0]["steps"], 6000);
  EXPECT_DOUBLE_EQ(out["mechanisms"][0]["q"].get<double>(), 0.0025);
  EXPECT_NEAR(out["eps"].get<double>(), 0.7242234026109595, 1e-9);
  EXPECT_EQ(out["optimal_order"], 19);
  // The same through --q, whose binary rounding must not add a step.
  options.batch_size.reset();
  options.n.reset();
  options.sample_rate = 0.0025;
  run_accountant(options);
  EXPECT_EQ(read_json(options.json_path)["mechanisms"][0]["steps"], 6000);
}

TEST(AccountantCli, ComposesRepeatedMechanisms) {
  testing::TempDir dir;
  AccountantCase options = opacus_check_case(dir.file("out.json"));
  options.steps = 1000;
  options.mechanisms = {"0.04,1.5,1000", "0.04,1.5,250"};
  run_accountant(options);
  const nlohmann::json out = read_json(options.json_path);
  EXPECT_EQ(out["mechanisms"].size(), 3u);
  EXPECT_NEAR(out["eps"].get<double>(), 7.32911, 1e-5);
}

// "--mechanism 0.04,1.5,1000" reaches the options split at its commas, as every list flag is:
// the numbers are read in threes whichever way they were split.
TEST(AccountantCli, ReadsMechanismsSplitIntoSingleNumbers) {
  testing::TempDir dir;
  AccountantCase whole = opacus_check_case(dir.file("whole.json")), split = opacus_check_case(dir.file("split.json"));
  whole.steps = split.steps = 1000;
  whole.mechanisms = {"0.04,1.5,1000", "0.04,1.5,250"};
  split.mechanisms = {"0.04", "1.5", "1000", "0.04", "1.5", "250"};
  run_accountant(whole);
  run_accountant(split);
  EXPECT_EQ(read_json(whole.json_path)["eps"], read_json(split.json_path)["eps"]);
  split.mechanisms = {"0.04", "1.5"};
  EXPECT_INVALID_ARGUMENT(run_accountant(split), "mechanism = '0.04,1.5'", "three numbers", "got 2");
}

TEST(AccountantCli, SolvesForTheNoiseMultiplier) {
  testing::TempDir dir;
  AccountantCase options;
  options.sample_rate = 0.01;
  options.steps = 1000;
  options.target_eps = 1.0;
  options.json_path = dir.file("out.json");
  run_accountant(options);
  const nlohmann::json out = read_json(options.json_path);
  const double sigma = out["noise_multiplier"].get<double>();
  EXPECT_EQ(out["mechanisms"][0]["noise_multiplier"], sigma);
  EXPECT_EQ(out["settings"]["target_eps"], 1.0);
  RdpAccountant check;
  check.compose(sigma, 0.01, 1000);
  const double eps = check.get_privacy_spent(1e-5).eps;
  EXPECT_EQ(out["eps"].get<double>(), eps);
  EXPECT_LE(eps, 1.0);
  EXPECT_GT(eps, 0.999);
}

TEST(AccountantCli, AcceptsNamedGridsAndOrderLists) {
  testing::TempDir dir;
  AccountantCase options = opacus_check_case(dir.file("out.json"));
  options.orders = "tf";
  run_accountant(options);
  EXPECT_EQ(read_json(options.json_path)["orders"].size(), 155u);
  options.orders = "2,4,8";
  run_accountant(options);
  const nlohmann::json out = read_json(options.json_path);
  EXPECT_EQ(out["orders"].get<std::vector<double>>(), (std::vector<double>{2, 4, 8}));
  EXPECT_EQ(out["optimal_order"], 4);
  options.noise_multiplier = 0.0;  // infinite RDP is written as "inf": JSON has no infinity
  run_accountant(options);
  EXPECT_EQ(read_json(options.json_path)["eps"], "inf");
}

TEST(AccountantCli, RejectsContradictoryOrMalformedFlags) {
  const auto expect_rejected = [](const std::function<void(AccountantCase&)>& spoil, const std::string& flag) {
    AccountantCase options = opacus_check_case("");
    spoil(options);
    try {
      run_accountant(options);
      ADD_FAILURE() << "accepted bad " << flag;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(flag), std::string::npos) << error.what();
    }
  };
  expect_rejected(
      [](AccountantCase& o) {
        o.batch_size = 10;
        o.n = 100;
      },
      "sample_rate");
  expect_rejected([](AccountantCase& o) { o.epochs = 3; }, "epochs");
  expect_rejected([](AccountantCase& o) { o.noise_multiplier.reset(); }, "noise_multiplier");
  expect_rejected([](AccountantCase& o) { o.target_eps = 1; }, "target_eps");
  expect_rejected([](AccountantCase& o) { o.mechanisms = {"0.1,1"}; }, "mechanism");
  expect_rejected([](AccountantCase& o) { o.mechanisms = {"0.1,x,3"}; }, "mechanism: noise_multiplier 'x'");
  expect_rejected([](AccountantCase& o) { o.orders = "2,x"; }, "orders");
  expect_rejected([](AccountantCase& o) { o.orders = "renyi"; }, "renyi");
  expect_rejected([](AccountantCase& o) { o.orders = "0.5,2"; }, "orders[0]");
  expect_rejected([](AccountantCase& o) { o.sample_rate = 1.5; }, "sample_rate");
  expect_rejected([](AccountantCase& o) { o.delta = 0; }, "delta");
  expect_rejected([](AccountantCase& o) { o.sampling = BatchSampling::kShuffle; },
                  "no accountant covers shuffled epochs");
  expect_rejected(
      [](AccountantCase& o) {
        o.sample_rate.reset();
        o.batch_size = 200;
        o.n = 100;
      },
      "batch_size");
}

TEST(AccountantCli, PldAndSamplingWithoutReplacement) {
  testing::TempDir dir;
  AccountantCase options = opacus_check_case(dir.file("out.json"));
  options.accountant = AccountantKind::kPld;
  options.discretization = 1e-3;
  run_accountant(options);
  nlohmann::json out = read_json(options.json_path);
  EXPECT_EQ(out["accountant"], "pld");
  EXPECT_EQ(out["settings"]["accountant"], "pld");
  EXPECT_EQ(out["discretization"], 1e-3);
  EXPECT_NE(out["neighbouring_relation"].get<std::string>().find("add/remove"), std::string::npos);
  EXPECT_FALSE(out.contains("rdp"));
  PldAccountant check(NeighbouringRelation::kAddRemove, {1e-3});
  check.step(1.5, 0.04, 2250);
  EXPECT_EQ(out["eps"].get<double>(), check.epsilon(1e-5));
  EXPECT_EQ(out["infinity_mass"].get<double>(), check.infinity_mass());
  EXPECT_LT(out["eps"].get<double>(), 7.32911);  // the RDP eps of the same run

  options.sampling = BatchSampling::kUniform;
  options.accountant = AccountantKind::kRdp;
  run_accountant(options);
  out = read_json(options.json_path);
  EXPECT_NE(out["neighbouring_relation"].get<std::string>().find("replace one"), std::string::npos);
  RdpAccountant rdp(rdp_orders(OrderGrid::kOpacus), NeighbouringRelation::kReplaceOne);
  rdp.step(1.5, 0.04, 2250);
  EXPECT_EQ(out["eps"].get<double>(), rdp.epsilon(1e-5));

  // The noise search works for every accountant: here PLD, without replacement.
  options.accountant = AccountantKind::kPld;
  options.noise_multiplier.reset();
  options.steps = 100;
  options.target_eps = 3.0;
  run_accountant(options);
  out = read_json(options.json_path);
  EXPECT_LE(out["eps"].get<double>(), 3.0);
  EXPECT_GT(out["eps"].get<double>(), 3.0 * (1 - 1e-4));
  options.discretization = 0;
  EXPECT_THROW(run_accountant(options), std::invalid_argument);
}

// The report's curves: every point is the accounting of that mechanism on its own, checked
// against a fresh accountant; the accounted run is on both curves; eps grows with the steps and
// falls with the noise.
TEST(AccountantCli, WritesEpsilonAgainstStepsAndAgainstNoiseForTheReport) {
  const AccountantJobResult result = filkit::run_accountant(opacus_check_case(""), false);
  const auto& by_steps = result.eps_by_steps;
  const auto& by_noise = result.eps_by_noise_multiplier;
  ASSERT_GE(by_steps.size(), 30u);
  ASSERT_GE(by_noise.size(), 30u);
  const auto fresh = [](double q, double sigma, std::int64_t steps) {
    RdpAccountant accountant(rdp_orders(OrderGrid::kOpacus));
    accountant.compose(sigma, q, steps);
    return accountant.epsilon(1e-5);
  };
  bool has_run = false;
  for (std::size_t k = 0; k < by_steps.size(); ++k) {
    const auto [steps, eps] = by_steps[k];
    if (k > 0) {
      EXPECT_GT(steps, by_steps[k - 1].first);
      EXPECT_GE(eps, by_steps[k - 1].second);
    }
    if (steps == 2250) {
      has_run = true;
      EXPECT_DOUBLE_EQ(eps, result.spent.eps);
    }
  }
  EXPECT_TRUE(has_run);
  EXPECT_EQ(by_steps.front().first, 1);
  EXPECT_EQ(by_steps.back().first, 4500);
  EXPECT_DOUBLE_EQ(by_steps.front().second, fresh(0.04, 1.5, 1));
  EXPECT_DOUBLE_EQ(by_steps[by_steps.size() / 3].second,
                   fresh(0.04, 1.5, static_cast<std::int64_t>(by_steps[by_steps.size() / 3].first)));
  for (std::size_t k = 1; k < by_noise.size(); ++k) EXPECT_LE(by_noise[k].second, by_noise[k - 1].second);
  EXPECT_DOUBLE_EQ(by_noise.front().first, 1.5 / 4);
  EXPECT_DOUBLE_EQ(by_noise.back().first, 1.5 * 4);
  EXPECT_DOUBLE_EQ(by_noise.front().second, fresh(0.04, 1.5 / 4, 2250));
  // In the summary, and the resolved point count in its settings.
  const nlohmann::json json = result.to_json();
  EXPECT_EQ(json["eps_by_steps"]["steps"].size(), by_steps.size());
  EXPECT_EQ(json["settings"]["curve_points"], 40);
  // The PLD's curves cost a composition a point: only for a report, or when asked for.
  AccountantOptions pld = opacus_check_case("");
  pld.accountant = AccountantKind::kPld;
  pld.steps = 100;
  EXPECT_TRUE(filkit::run_accountant(pld, false).eps_by_steps.empty());
  const AccountantJobResult with_report = filkit::run_accountant(pld, false, true);
  EXPECT_EQ(with_report.eps_by_noise_multiplier.size(), 9u);  // 8 points and the accounted one
  pld.curve_points = 0;
  EXPECT_TRUE(filkit::run_accountant(pld, false, true).eps_by_steps.empty());
  EXPECT_EQ(with_report.table_file(), "eps-by-delta.csv");
  EXPECT_EQ(result.table_file(), "rdp-curve.csv");
}

TEST(AccountantCli, BinaryPrintsSummaryAndWarnsOnStderr) {
  const char* binary = std::getenv("FILKIT_BINARY");
  ASSERT_NE(binary, nullptr) << "FILKIT_BINARY is set by ctest";
  testing::TempDir dir;
  const std::string run = std::string(binary) +
                          " accountant --sample-rate 0.04 --noise-multiplier 1.5 --steps 2250 --delta 1e-5 > " +
                          dir.file("out") + " 2> " + dir.file("err");
  ASSERT_EQ(std::system(run.c_str()), 0);
  EXPECT_NE(read_text(dir.file("out")).find("eps = 7.32911 (optimal order 3.9)"), std::string::npos)
      << read_text(dir.file("out"));
  EXPECT_EQ(read_text(dir.file("err")), "");

  // --q: the former name of --sample-rate, still accepted.
  const std::string edge = std::string(binary) + " accountant --q 0.001 --noise-multiplier 5 --steps 10 > " +
                           dir.file("out") + " 2> " + dir.file("err");
  ASSERT_EQ(std::system(edge.c_str()), 0);
  EXPECT_NE(read_text(dir.file("err")).find("warning: the optimal order 63 is the largest order"), std::string::npos)
      << read_text(dir.file("err"));

  const std::string bad =
      std::string(binary) + " accountant --q 0.04 --steps 10 > " + dir.file("out") + " 2> " + dir.file("err");
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_NE(read_text(dir.file("err")).find("--noise-multiplier: is required"), std::string::npos)
      << read_text(dir.file("err"));

  const std::string pld =
      std::string(binary) +
      " accountant --sample-rate 0.04 --noise-multiplier 1.5 --steps 2250 --accountant pld --sampling uniform > " +
      dir.file("out") + " 2> " + dir.file("err");
  ASSERT_EQ(std::system(pld.c_str()), 0) << read_text(dir.file("err"));
  const std::string summary = read_text(dir.file("out"));
  for (const char* part :
       {"PLD accountant", "replace one example", "discretisation interval 0.0001", "mass at infinite loss"})
    EXPECT_NE(summary.find(part), std::string::npos) << part << " not in: " << summary;
}

}  // namespace
}  // namespace filkit
