// The shared output writer of the jobs (jobs/job.hpp): paths checked before any work, "-" as
// standard output, outputs written as a set, and the DP-SGD resume file kept until they are.
#include "filkit/base/io.hpp"
#include "filkit/jobs/accountant.hpp"
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/jobs/measure.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace filkit {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

AccountantOptions small_accountant() {
  AccountantOptions options;
  options.sample_rate = 0.01;
  options.noise_multiplier = 1.2;
  options.steps = 100;
  return options;
}

TEST(CheckOutputPaths, RefusesBeforeAnyWorkNamingTheOption) {
  const TempDir dir;
  MeasureOptions options;
  options.task.data.data = dir.file("no-such-data.npz");  // loading would fail, were it reached
  JobOutputs outputs;
  outputs.json = dir.file("");
  EXPECT_INVALID_ARGUMENT(run_job<MeasureJob>(options, outputs), "json ", "is a directory");
  outputs = {};
  outputs.extra["release_out"] = dir.write("file.txt", "x") + "/weights.csv";
  EXPECT_INVALID_ARGUMENT(run_job<MeasureJob>(options, outputs), "release_out ", "does not exist");
  outputs = {};
  outputs.report = dir.file("file.txt");
  EXPECT_INVALID_ARGUMENT(run_job<MeasureJob>(options, outputs), "report ", "file.txt: exists and is not a directory");
  outputs.report = "-";
  EXPECT_INVALID_ARGUMENT(run_job<MeasureJob>(options, outputs), "report = -");
  outputs = {};
  outputs.out = "-";  // standard output and devices pass: the data path is what fails
  outputs.json = "/dev/null";
  EXPECT_THROW_NAMING(run_job<MeasureJob>(options, outputs), ResourceError, "no-such-data.npz");
  DpSgdJobOptions dpsgd;  // the resume file is an output too
  dpsgd.data.data = dir.file("no-such-data.npz");
  dpsgd.dpsgd.checkpoint_path = dir.file("");
  EXPECT_INVALID_ARGUMENT(run_job<DpSgdJob>(dpsgd), "checkpoint ", "is a directory");
}

TEST(WriteJobOutputs, DashPrintsTheSummaryOnStandardOutput) {
  JobOutputs outputs;
  outputs.json = "-";
  ::testing::internal::CaptureStdout();
  const AccountantJobResult result = run_job<AccountantJob>(small_accountant(), outputs);
  const nlohmann::json printed = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(printed, result.to_json());
}

TEST(JobOutputsBinary, DashAndDevStdoutPrintTheSummaryAndDevStdoutStaysALink) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY is set by ctest";
  std::vector<std::string> targets = {"-"};
  // Only when the writer would write through it (never replace the system's link).
  if (fs::is_symlink("/dev/stdout") && is_written_through("/dev/stdout")) targets.push_back("/dev/stdout");
  for (const std::string& target : targets) {
    const auto [status, output] = testing::run_command(
        std::string(binary) + " accountant --q 0.01 --noise-multiplier 1.2 --steps 100 --quiet --json " + target);
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(nlohmann::json::parse(output)["command"], "accountant") << target << ": " << output;
  }
  if (targets.size() > 1) EXPECT_TRUE(fs::is_symlink("/dev/stdout"));
}

TEST(WriteJobOutputs, AReportBesideStandardOutputReadsItsOwnCopy) {
  const TempDir dir;
  MeasureOptions options;
  options.task.data.data = testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 8));
  options.task.data.row_scaling = RowScaling::kNone;
  options.task.fit.l2 = 1e-2;
  JobOutputs outputs;
  outputs.json = "-";
  outputs.report = dir.file("report");
  ::testing::internal::CaptureStdout();
  run_job<MeasureJob>(options, outputs);
  const nlohmann::json printed = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  EXPECT_EQ(printed["command"], "measure");
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(outputs.report + "/summary.json")), printed);
  EXPECT_TRUE(fs::exists(outputs.report + "/report.html"));
}

TEST(WriteJobOutputs, ReplaceNothingWhenOneOutputCannotBeWritten) {
  const TempDir dir;
  const AccountantJobResult result = run_job<AccountantJob>(small_accountant());
  JobOutputs outputs;
  outputs.json = dir.write("summary.json", "old summary\n");
  outputs.out = dir.write("file.txt", "a file, not a directory\n") + "/rdp.csv";  // past the early check
  EXPECT_THROW(write_job_outputs(result, outputs, true), std::runtime_error);
  EXPECT_EQ(testing::read_bytes(outputs.json), "old summary\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("")), {}), 2) << "temporaries removed";
  outputs.out = dir.file("rdp.csv");
  write_job_outputs(result, outputs, true);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(outputs.json)), result.to_json());
  EXPECT_EQ(testing::read_bytes(outputs.out), result.table().to_csv());
}

DpSgdJobOptions small_dpsgd(const std::string& data, const std::string& checkpoint) {
  DpSgdJobOptions options;
  options.data.data = data;
  options.dpsgd.batch_size = 20;
  options.dpsgd.steps = 12;
  options.dpsgd.runs = 2;
  options.dpsgd.seed = 4;
  options.dpsgd.checkpoint_path = checkpoint;
  options.dpsgd.checkpoint_every = 5;
  return options;
}

TEST(DpSgdResumeFile, OutlivesAFailedWriteAndGoesOnceTheOutputsAreWritten) {
  const TempDir dir;
  const std::string state = dir.file("state.cbor");
  const DpSgdJobOptions options =
      small_dpsgd(testing::write_npz_dataset(dir, testing::random_classification(100, 4, 2, 9)), state);
  const DpSgdJobResult result = run_dpsgd(options);
  ASSERT_TRUE(result.training.complete);
  ASSERT_TRUE(fs::exists(state)) << "saved every 5 steps and kept by run_dpsgd";

  JobOutputs failing;
  failing.json = dir.file("summary.json");
  failing.out = dir.write("file.txt", "a file, not a directory\n") + "/dpsgd.csv";
  EXPECT_THROW(write_job_outputs(result, failing, true), std::runtime_error);
  EXPECT_TRUE(fs::exists(state)) << "the run can be redone by resuming";
  EXPECT_FALSE(fs::exists(failing.json));

  // Rerunning resumes from the last saved step to the same numbers; then the outputs are written
  // and the resume file goes.
  JobOutputs outputs;
  outputs.json = dir.file("summary.json");
  outputs.out = dir.file("dpsgd.csv");
  const DpSgdJobResult rerun = run_job<DpSgdJob>(options, outputs);
  EXPECT_TRUE(rerun.training.resumed);
  EXPECT_EQ(rerun.training.final_snapshot().fisher_trace, result.training.final_snapshot().fisher_trace);
  EXPECT_EQ(rerun.training.parameters, result.training.parameters);
  EXPECT_EQ(testing::read_bytes(outputs.out), result.table().to_csv());
  EXPECT_FALSE(fs::exists(state));
}

TEST(DpSgdResumeFile, StaysWhileTheJobIsIncompleteAndGoesWhenItCompletes) {
  const TempDir dir;
  const std::string state = dir.file("state.cbor");
  DpSgdJobOptions options =
      small_dpsgd(testing::write_npz_dataset(dir, testing::random_classification(100, 4, 2, 9)), state);
  options.dpsgd.checkpoint_every = 0;
  options.dpsgd.stop_after = 15;
  JobOutputs outputs;
  outputs.json = dir.file("summary.json");
  EXPECT_FALSE(run_job<DpSgdJob>(options, outputs).training.complete);
  EXPECT_TRUE(fs::exists(state));
  EXPECT_FALSE(fs::exists(outputs.json)) << "no outputs before the job is complete";
  EXPECT_TRUE(run_job<DpSgdJob>(options, outputs).training.complete);
  EXPECT_TRUE(fs::exists(outputs.json));
  EXPECT_FALSE(fs::exists(state));
}

}  // namespace
}  // namespace filkit
