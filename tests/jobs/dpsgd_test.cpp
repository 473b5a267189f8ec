// The DP-SGD job and the `filkit dpsgd` command: in-process and once as a binary.
#include "filkit/jobs/dpsgd.hpp"

#include "filkit/base/finite.hpp"
#include "filkit/base/io.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/privacy/step_privacy.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

namespace filkit {
namespace {

using testing::TempDir;

DpSgdJobOptions small_dpsgd_job(const std::string& path) {
  DpSgdJobOptions options;
  options.data.data = path;
  options.dpsgd.batch_size = 25;
  options.dpsgd.steps = 40;
  options.dpsgd.step_size = 0.5;
  options.dpsgd.runs = 2;
  options.dpsgd.report_epochs = {2.0};
  options.dpsgd.seed = 5;
  return options;
}

TEST(DpSgdCommand, WritesPerExampleTableAndSummaryThatMatchTheLibrary) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(250, 5, 3, 3)));
  options.model = ModelChoice::kSoftmax;
  options.dpsgd.label = LabelPrivacy::kPrivate;
  JobOutputs outputs;
  outputs.out = dir.file("dpsgd.csv");
  outputs.json = dir.file("summary.json");
  outputs.extra["models_out"] = dir.file("models.csv");
  std::ostringstream printed;
  const DpSgdJobResult result = run_job<DpSgdJob>(options, outputs, true, &printed);
  EXPECT_TRUE(printed.str().empty()) << "--quiet prints nothing";

  // The same numbers as a direct library call on the same split.
  const DpSgdResult direct = train_dpsgd(result.data.train, result.data.test, options.training_options());
  EXPECT_EQ(direct.final_snapshot().fisher_trace, result.training.final_snapshot().fisher_trace);
  EXPECT_EQ(result.training.private_dims, 5 + 3);

  const std::vector<std::string> lines = testing::read_lines(outputs.out);
  ASSERT_EQ(static_cast<Index>(lines.size()), 2 * result.data.train.n() + 1);  // steps 16 and 40
  EXPECT_EQ(lines[0],
            "step,epoch,index,label,times_sampled,eta,dfil,attribute_mse_bound,example_mse_bound,fisher_trace,"
            "fisher_trace_standard_error,fisher_trace_run0,fisher_trace_run1");
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(outputs.json));
  EXPECT_EQ(summary["command"], "dpsgd");
  EXPECT_EQ(summary["n"], 200);
  EXPECT_EQ(summary["d"], 5);
  EXPECT_EQ(summary["seed"], 5);
  EXPECT_EQ(summary["settings"]["sampling"], "uniform");
  EXPECT_EQ(summary["settings"]["runs"], 2);
  EXPECT_EQ(summary["run_seeds"].size(), 2u);
  ASSERT_EQ(summary["snapshots"].size(), 2u);
  EXPECT_EQ(summary["snapshots"][0]["step"], 16);
  const VectorXd dfil = result.training.final_snapshot().dfil(result.training.private_dims);
  EXPECT_NEAR(summary["snapshots"][1]["dfil"]["max"].get<double>(), dfil.maxCoeff(), 1e-15);
  EXPECT_NEAR(summary["snapshots"][1]["rdp"]["eps"].get<double>(), result.training.final_snapshot().privacy.eps, 1e-15);
  EXPECT_GT(summary["snapshots"][1]["rdp"]["mse_bound"].get<double>(), 0.0);
  // The max and median dFIL over two runs: each run's, and bootstrap intervals with their MSE bounds.
  const RunBootstrap& runs = result.training.final_snapshot().dfil_over_runs;
  const nlohmann::json& final_dfil = summary["snapshots"][1]["dfil"];
  EXPECT_EQ(final_dfil["max_per_run"].size(), 2u);
  EXPECT_EQ(final_dfil["median_per_run"][1].get<double>(), runs.per_run[1].median);
  EXPECT_EQ(final_dfil["max_interval"][0].get<double>(), runs.max_interval->lower);
  EXPECT_EQ(final_dfil["median_interval"][1].get<double>(), runs.median_interval->upper);
  EXPECT_EQ(final_dfil["mse_bound_at_max_interval"][0].get<double>(), 1.0 / std::pow(runs.max_interval->upper, 2));
  EXPECT_EQ(final_dfil["mse_bound_at_max_interval"][1].get<double>(), 1.0 / std::pow(runs.max_interval->lower, 2));
  EXPECT_LE(final_dfil["mse_bound_at_median_interval"][0].get<double>(),
            final_dfil["mse_bound_at_median"].get<double>());
  EXPECT_EQ(final_dfil["mse_bound_at_max_per_run"][0].get<double>(), 1.0 / std::pow(runs.per_run[0].max, 2));
  EXPECT_EQ(summary["bootstrap"]["seed"].get<std::uint64_t>(), result.training.bootstrap_seed);
  EXPECT_EQ(summary["bootstrap"]["resamples"], 1000);
  EXPECT_EQ(summary["bootstrap"]["level"], 0.95);
  EXPECT_EQ(summary["bootstrap"]["intervals"], true);
  EXPECT_EQ(summary["settings"]["confidence_level"], 0.95);
  // Each run's traces in the table: run 1 of the last example of the final snapshot.
  const std::string last_cell = "," + format_double(result.training.final_snapshot().fisher_trace_per_run(1, 199));
  EXPECT_TRUE(lines.back().ends_with(last_cell)) << lines.back() << " vs " << last_cell;
  EXPECT_TRUE(summary.contains("filkit_version"));
  EXPECT_TRUE(summary["seconds"].contains("training"));
  EXPECT_TRUE(summary["seconds"].contains("bootstrap"));
  EXPECT_TRUE(summary.contains("preprocessing"));
  EXPECT_EQ(summary["settings"]["trace"], "exact");  // auto, resolved for a GLM
  // delta behind kappa: the paper's rule 1/(n T) by default, recorded where it is used, so that T
  // steps fail with probability at most 1/n; kappa follows from it (q = 25/200, sigma 1).
  const double delta = 1.0 / (200.0 * 40.0);
  EXPECT_DOUBLE_EQ(summary["settings"]["kappa_delta"].get<double>(), delta);
  EXPECT_DOUBLE_EQ(summary["kappa_delta"].get<double>(), delta);
  EXPECT_DOUBLE_EQ(summary["kappa_failure_probability"].get<double>(), 1.0 / 200.0);
  EXPECT_DOUBLE_EQ(result.training.kappa, subsampling_kappa(25.0 / 200.0, 1.0, delta));
  EXPECT_NE(result.training.kappa, subsampling_kappa(25.0 / 200.0, 1.0, 1e-5));

  // --models-out: each run's final parameters, to the bit (shortest round-trip numbers).
  const std::vector<std::string> models = testing::read_lines(outputs.extra["models_out"]);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].substr(0, 12), "run,w0,w1,w2");
  for (std::size_t run = 0; run < 2; ++run) {
    std::vector<double> cells;
    std::stringstream line(models[1 + run]);
    for (std::string cell; std::getline(line, cell, ',');) cells.push_back(std::stod(cell));
    const VectorXd& w = result.training.parameters[run];
    ASSERT_EQ(cells.size(), static_cast<std::size_t>(1 + w.size()));
    EXPECT_EQ(cells[0], static_cast<double>(run));
    for (Index j = 0; j < w.size(); ++j) EXPECT_EQ(cells[static_cast<std::size_t>(1 + j)], w(j)) << j;
  }
}

TEST(DpSgdCommand, OneRunHasNoIntervalsAndSaysSo) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(100, 3, 2, 4)));
  options.dpsgd.runs = 1;
  JobOutputs outputs;
  outputs.out = dir.file("dpsgd.csv");
  outputs.json = dir.file("summary.json");
  std::ostringstream printed;
  const DpSgdJobResult result = run_job<DpSgdJob>(options, outputs, false, &printed);
  EXPECT_NE(printed.str().find("one run: no confidence intervals for the max and median dFIL"), std::string::npos)
      << printed.str();
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(outputs.json));
  for (const char* key :
       {"max_interval", "median_interval", "mse_bound_at_max_interval", "mse_bound_at_median_interval"})
    EXPECT_TRUE(summary["snapshots"][1]["dfil"][key].is_null()) << key;
  EXPECT_EQ(summary["snapshots"][1]["dfil"]["max_per_run"][0], summary["snapshots"][1]["dfil"]["max"]);
  EXPECT_EQ(summary["bootstrap"]["intervals"], false);
  EXPECT_NE(summary["bootstrap"]["note"].get<std::string>().find("one run"), std::string::npos);
  EXPECT_EQ(testing::read_lines(outputs.out)[0].find("fisher_trace_run"), std::string::npos);

  options.dpsgd.runs = 3;
  std::ostringstream three;
  JobOutputs three_outputs;
  three_outputs.json = dir.file("three.json");
  run_job<DpSgdJob>(options, three_outputs, false, &three);
  // The summary says which max it prints: of the run-averaged traces, beside each run's own.
  EXPECT_NE(three.str().find("dFIL over 3 runs. 'averaged': the max (median) over examples of the dFIL of the "
                             "traces averaged over the runs"),
            std::string::npos)
      << three.str();
  EXPECT_NE(three.str().find("95% bootstrap intervals: 1000 resamples of the runs, seed"), std::string::npos);
  EXPECT_NE(three.str().find("each run"), std::string::npos);
  const nlohmann::json dfil = nlohmann::json::parse(std::ifstream(three_outputs.json))["snapshots"][1]["dfil"];
  double mean_square = 0;
  for (const nlohmann::json& max : dfil["max_per_run"]) mean_square += max.get<double>() * max.get<double>() / 3;
  EXPECT_LE(dfil["max"].get<double>(), std::sqrt(mean_square) * (1 + 1e-12));  // the printed promise
}

TEST(DpSgdCommand, StatesTheAccountantItsRelationAndTheEffectiveNoiseMultiplier) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(100, 3, 2, 4)));
  options.dpsgd.runs = 1;
  options.dpsgd.accountant = AccountantKind::kPld;
  options.dpsgd.discretization = 2e-4;
  const double effective = options.dpsgd.noise_multiplier / soft_clip_norm_bound();
  for (const auto& [sampling, relation, covered] :
       {std::tuple{BatchSampling::kUniform, "replace one example", true},
        std::tuple{BatchSampling::kPoisson, "add/remove one example", true},
        std::tuple{BatchSampling::kShuffle, "add/remove one example", false}}) {
    options.dpsgd.sampling = sampling;
    JobOutputs outputs;
    outputs.json = dir.file("summary.json");
    std::ostringstream printed;
    const DpSgdJobResult result = run_job<DpSgdJob>(options, outputs, false, &printed);
    const std::string text = printed.str();
    EXPECT_NE(text.find("pld accountant (loss grid h = " + format_double(2e-4) + "), " + std::string(relation)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("effective noise multiplier " + format_double(effective)), std::string::npos) << text;
    EXPECT_NE(text.find("1.11524 C"), std::string::npos) << "the reason is printed: " << text;
    EXPECT_NE(text.find("PLD eps"), std::string::npos) << text;
    EXPECT_EQ(text.find("shuffled epochs") != std::string::npos, !covered) << text;
    const nlohmann::json summary = nlohmann::json::parse(std::ifstream(outputs.json));
    const nlohmann::json& accounting = summary["accounting"];
    EXPECT_EQ(accounting["accountant"], "pld");
    EXPECT_EQ(accounting["discretization"], 2e-4);
    EXPECT_EQ(summary["settings"]["discretization"], 2e-4);
    EXPECT_EQ(accounting["sampling"], sampling == BatchSampling::kUniform ? "uniform" : "poisson");
    EXPECT_NE(accounting["neighbouring_relation"].get<std::string>().find(relation), std::string::npos);
    EXPECT_DOUBLE_EQ(accounting["effective_noise_multiplier"].get<double>(), effective);
    EXPECT_EQ(accounting["covers_sampler"], covered);
    EXPECT_EQ(accounting["note"].is_null(), covered);
    EXPECT_EQ(summary["settings"]["accountant"], "pld");
    EXPECT_EQ(summary["snapshots"][1]["epsilon"].get<double>(), result.training.final_snapshot().epsilon);
    EXPECT_LT(summary["snapshots"][1]["epsilon"].get<double>(), summary["snapshots"][1]["rdp"]["eps"].get<double>());
  }
}

TEST(DpSgdCommand, BadOptionsNameTheField) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 4)));
  options.dpsgd.noise_multiplier = -1.0;
  try {
    run_dpsgd(options);
    ADD_FAILURE() << "accepted sigma = -1";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("noise_multiplier"), std::string::npos) << error.what();
  }
  options = small_dpsgd_job(options.data.data);
  options.dpsgd.batch_size = 1000;
  EXPECT_THROW(run_dpsgd(options), std::invalid_argument);
}

TEST(DpSgdBinary, PrintsHelpAndTheSummaryTable) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const TempDir dir;
  const std::string data = testing::write_npz_dataset(dir, testing::random_classification(80, 3, 2, 6));
  const auto run = testing::run_command;
  const auto help = run(std::string(binary) + " dpsgd --help");
  EXPECT_EQ(help.first, 0);
  for (const char* flag : {"--data",
                           "--model",
                           "--batch-size",
                           "--sampling",
                           "--steps",
                           "--step-size",
                           "--clip-norm",
                           "--noise-multiplier",
                           "--momentum",
                           "--subsampling",
                           "--trace",
                           "--spectral",
                           "--runs",
                           "--report-epochs",
                           "--checkpoint",
                           "--out",
                           "--json",
                           "--seed",
                           "--bootstrap-resamples",
                           "--confidence-level"})
    EXPECT_NE(help.second.find(flag), std::string::npos) << flag;
  const auto job = run(std::string(binary) + " dpsgd --data " + data + " --batch-size 16 --steps 20 --report-epochs 1");
  EXPECT_EQ(job.first, 0) << job.second;
  EXPECT_NE(job.second.find("median dFIL"), std::string::npos) << job.second;
  EXPECT_NE(job.second.find("RDP eps"), std::string::npos) << job.second;
  const auto bad = run(std::string(binary) + " dpsgd --data " + data + " --batch-size 16 --steps 20 --clip-norm 0");
  EXPECT_NE(bad.first, 0);
  EXPECT_NE(bad.second.find("--clip-norm = 0: must be > 0"), std::string::npos) << bad.second;
}

// `filkit dpsgd --step-size 1e308` reported NaN dFIL for every example and exited 0.
TEST(DpSgdCommand, ADivergingRunIsAnErrorNamingTheStepAndTheStepSize) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 4)));
  options.dpsgd.step_size = 1e308;
  options.dpsgd.steps = 1000;
  options.dpsgd.report_epochs = {};
  try {
    run_dpsgd(options);
    ADD_FAILURE() << "a diverged run passed";
  } catch (const NonFiniteResult& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("training (run 0, step "), std::string::npos) << message;
    EXPECT_NE(message.find("training diverged: step_size = 1e+308 is likely too large"), std::string::npos) << message;
  }
}

// `--report-epochs 1e300` is step 1e301, which llround cannot represent: it silently ran step 1.
TEST(DpSgdCommand, ReportEpochsBeyondTheStepsAreRefusedEvenWhenHuge) {
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 4)));
  options.dpsgd.report_epochs = {1e300};
  EXPECT_INVALID_ARGUMENT(run_dpsgd(options), "report_epochs = 1e+300", "beyond steps = 40");
  options.dpsgd.report_epochs = {};
  options.dpsgd.steps = std::numeric_limits<Index>::max() / 2 + 1;
  EXPECT_INVALID_ARGUMENT(run_dpsgd(options), "steps = ", "times runs = 2 makes", "more than 1e15");
}

TEST(DpSgdCommand, WritesTheSameOutputsForAnyThreadCount) {
  // Batches of 256 examples of 50 features and 10 classes: products Eigen would have split.
  const TempDir dir;
  DpSgdJobOptions options =
      small_dpsgd_job(testing::write_npz_dataset(dir, testing::random_classification(1500, 50, 10, 4)));
  options.model = ModelChoice::kSoftmax;
  options.dpsgd.batch_size = 256;
  options.dpsgd.steps = 6;
  options.dpsgd.report_epochs = {};
  testing::expect_same_job_outputs_for_any_thread_count<DpSgdJob>(options);
}

}  // namespace
}  // namespace filkit
