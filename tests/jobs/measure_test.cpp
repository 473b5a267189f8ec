// The measurement job and the `filkit measure` command: in-process, once as a binary, and on the
// built-in data against the FIL paper's Table 1.
#include "filkit/jobs/measure.hpp"

#include "filkit/base/summary.hpp"
#include "filkit/leakage/fil.hpp"
#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace filkit {
namespace {

using testing::TempDir;

MeasureOptions small_measure_job(const std::string& path) {
  MeasureOptions options;
  options.task.data.data = path;
  options.task.data.row_scaling = RowScaling::kNone;
  options.task.fit.l2 = 1e-2;
  options.seed = 5;
  return options;
}

TEST(MeasureCommand, WritesPerExampleTableAndSummaryThatMatchTheLibrary) {
  const TempDir dir;
  const Dataset data = testing::random_classification(250, 5, 2, 3);
  MeasureOptions options = small_measure_job(testing::write_npz_dataset(dir, data));
  JobOutputs outputs;
  outputs.out = dir.file("fil.csv");
  outputs.json = dir.file("summary.json");
  outputs.extra["release_out"] = dir.file("release.csv");
  options.attribute = "0,1";
  options.subsets = {"all", "class=1", "rows=" + dir.write("rows.txt", "0\n3\n\n7\n")};
  std::ostringstream printed;
  const MeasureResult result = run_job<MeasureJob>(options, outputs, true, &printed);
  EXPECT_TRUE(printed.str().empty()) << "--quiet prints nothing";

  // The per-example eta equals a direct library computation on the same training split.
  const Model model = fit(result.data.train, options.task.fit_options());
  const PerExampleFil direct = FisherInformationLoss(model, result.data.train).per_example();
  EXPECT_LT((direct.eta - result.fil.eta).norm(), 1e-12 * direct.eta.norm());

  const std::vector<std::string> lines = testing::read_lines(outputs.out);
  ASSERT_EQ(static_cast<Index>(lines.size()), result.data.train.n() + 1);
  EXPECT_EQ(lines[0], "index,label,eta,dfil,attribute_mse_bound,example_mse_bound,loss,gradient_norm,attribute_eta");
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(outputs.json));
  EXPECT_EQ(summary["n"], 200);  // 20% held out
  EXPECT_EQ(summary["d"], 5);
  EXPECT_EQ(summary["seed"], 5);
  EXPECT_NEAR(summary["eta"]["mean"].get<double>(), direct.eta.mean(), 1e-14);
  EXPECT_NEAR(summary["eta"]["std"].get<double>(), summarize(direct.eta).std, 1e-14);
  ASSERT_EQ(summary["groups"].size(), 3u);
  EXPECT_EQ(summary["groups"][2]["examples"], 3);
  EXPECT_TRUE(summary["attribute"]["all_examples"]["eta"].get<double>() > 0);
  EXPECT_TRUE(summary.contains("filkit_version"));
  EXPECT_NE(summary["filkit_build"].get<std::string>().find("instruction sets: "), std::string::npos);
  EXPECT_TRUE(summary["seconds"].contains("fil"));

  // The release is seeded: the same seed gives the same w'.
  const std::vector<std::string> first = testing::read_lines(outputs.extra["release_out"]);
  run_job<MeasureJob>(options, outputs);
  EXPECT_EQ(testing::read_lines(outputs.extra["release_out"]), first);
}

TEST(MeasureCommand, ComposedReleasesGrowFilBySqrtOfTheirNumber) {
  const TempDir dir;
  MeasureOptions options =
      small_measure_job(testing::write_npz_dataset(dir, testing::random_classification(120, 4, 2, 4)));
  std::ostringstream printed;
  const MeasureResult one = run_measure(options);
  options.releases = 4;
  const MeasureResult four = run_measure(options);
  EXPECT_LT((four.fil.eta - 2.0 * one.fil.eta).norm(), 1e-12 * one.fil.eta.norm());
}

TEST(MeasureCommand, CountsTestRowsWithALevelNoTrainingRowHasByTheUnseenLevelsOption) {
  // 40 rows; the last one's colour "violet" occurs nowhere else, and the first seed whose split
  // (test fraction 0.25) puts it into the test part is used: dropped by default, kept with zeros,
  // or an error.
  const TempDir dir;
  std::string csv = "x,colour,label\n";
  for (int i = 0; i < 39; ++i)
    csv += std::to_string(i % 7) + "," + (i % 2 ? "red" : "blue") + "," + (i % 3 ? "no" : "yes") + "\n";
  csv += "3,violet,no\n";
  MeasureOptions options = small_measure_job(dir.write("table.csv", csv));
  options.task.data.target = "label";
  options.task.data.test_fraction = 0.25;
  for (options.seed = 0;; ++options.seed) {
    ASSERT_LT(options.seed, 100u);
    const std::vector<Index> test = shuffle_split(40, 0.25, options.seed).test;
    if (std::find(test.begin(), test.end(), 39) != test.end()) break;
  }
  const auto summary = [&] { return run_measure(options).to_json(); };
  const nlohmann::json dropped = summary();
  EXPECT_EQ(dropped["unseen_level_rows"], 1);
  EXPECT_EQ(dropped["dropped_rows"]["test"], 1);
  EXPECT_EQ(dropped["n_test"], 9);
  EXPECT_EQ(dropped["settings"]["unseen_levels"], "drop");
  options.task.data.unseen_levels = UnseenLevelPolicy::kZero;
  const nlohmann::json zeroed = summary();
  EXPECT_EQ(zeroed["unseen_level_rows"], 1);
  EXPECT_EQ(zeroed["dropped_rows"]["test"], 0);
  EXPECT_EQ(zeroed["n_test"], 10);
  options.task.data.unseen_levels = UnseenLevelPolicy::kError;
  EXPECT_INVALID_ARGUMENT(run_measure(options), "table.csv", "line 41", "'violet'", "'colour'");
}

TEST(MeasureCommand, NamesTheFileAndLineOfABadRowFile) {
  const TempDir dir;
  MeasureOptions options =
      small_measure_job(testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 5)));
  const std::string rows = dir.write("rows.txt", "1\n2\nthree\n");
  options.subsets = {"rows=" + rows};
  std::ostringstream printed;
  try {
    run_measure(options);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(rows + ":3"), std::string::npos) << error.what();
  }
  options.subsets = {"group=1"};
  EXPECT_THROW(run_measure(options), std::invalid_argument);
  options.subsets = {};
  options.attribute = "9";
  EXPECT_THROW(run_measure(options), std::invalid_argument);
}

TEST(MeasureBinary, PrintsHelpAndTheSummaryTable) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const TempDir dir;
  const std::string data = testing::write_npz_dataset(dir, testing::random_classification(80, 3, 2, 6));
  const auto run = testing::run_command;
  const auto help = run(std::string(binary) + " measure --help");
  EXPECT_EQ(help.first, 0);
  for (const char* flag : {"--data", "--classes", "--pca", "--row-scaling", "--model", "--l2", "--intercept", "--sigma",
                           "--label", "--attribute", "--subset", "--out", "--json", "--seed", "--threads"})
    EXPECT_NE(help.second.find(flag), std::string::npos) << flag;
  const auto job = run(std::string(binary) + " measure --data " + data + " --row-scaling none --l2 0.01");
  EXPECT_EQ(job.first, 0) << job.second;
  EXPECT_NE(job.second.find("eta (FIL)"), std::string::npos) << job.second;
  const auto bad = run(std::string(binary) + " measure --data " + dir.file("missing.csv"));
  EXPECT_NE(bad.first, 0);
  EXPECT_NE(bad.second.find("missing.csv"), std::string::npos) << bad.second;
}

TEST(PublishedValues, MnistZeroVsOneMatchesTable1OfTheFilPaper) {
  // FIL paper, Table 1 (MNIST 0 vs 1, PCA 20, sigma 1): logistic (lambda 8e-4) eta 0.027 +- 0.012,
  // train accuracy 99.8; linear 0.040 +- 0.014 (lambda 0, as in the authors' scripts).
  if (!testing::builtin_available("mnist")) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  if (testing::kAddressSanitizer) GTEST_SKIP() << testing::kPublishedValuesInRelease;
  MeasureOptions options;
  options.task.data.data = "mnist";
  std::ostringstream printed;
  const MeasureResult logistic = run_measure(options);
  EXPECT_EQ(logistic.data.train.n(), 12665);
  EXPECT_EQ(logistic.data.train.d(), 20);
  const Summary eta = summarize(logistic.fil.eta);
  EXPECT_NEAR(eta.mean, 0.027, 0.0005);
  EXPECT_NEAR(eta.std, 0.012, 0.0005);
  EXPECT_NEAR(logistic.train_accuracy, 0.998, 0.003);

  options.task.model = ModelKind::kLeastSquares;
  options.task.fit.l2 = 0.0;
  const Summary linear = summarize(run_measure(options).fil.eta);
  EXPECT_NEAR(linear.mean, 0.040, 0.0005);
  EXPECT_NEAR(linear.std, 0.014, 0.0005);
}

TEST(DefaultJob, RunsOnFashionMnistZeroVsOne) {
  if (!testing::builtin_available("fashion-mnist")) GTEST_SKIP() << "Fashion-MNIST not installed (scripts/setup.sh)";
  const MeasureOptions options;  // the defaults are the default job
  std::ostringstream printed;
  const MeasureResult result = run_job<MeasureJob>(options, {}, false, &printed);
  EXPECT_EQ(result.data.train.n(), 12000);
  EXPECT_EQ(result.data.train.d(), 20);
  EXPECT_GT(result.test_accuracy, 0.9);
  EXPECT_NE(printed.str().find("eta (FIL)"), std::string::npos);
}

// A row listed twice in --subset rows=F counted twice in the group; it is refused instead.
TEST(MeasureCommand, RefusesARowListedTwiceInARowFile) {
  const TempDir dir;
  MeasureOptions options =
      small_measure_job(testing::write_npz_dataset(dir, testing::random_classification(60, 3, 2, 5)));
  const std::string rows = dir.write("rows.txt", "1\n4\n2\n4\n");
  options.subsets = {"rows=" + rows};
  EXPECT_INVALID_ARGUMENT(run_measure(options), rows + ":4: row 4 is listed again (first on line 2)");
}

// Flags are read by the library's parser: integers in their range, the thread count bounded by
// the machine, sizes for --max-memory; a std::bad_alloc says what filkit was doing.
TEST(MeasureBinary, RefusesOutOfRangeNumbersAndReportsRunningOutOfMemory) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const TempDir dir;
  const std::string data = testing::write_npz_dataset(dir, testing::random_classification(80, 3, 2, 6));
  const std::string measure = std::string(binary) + " measure --quiet --data " + data + " --row-scaling none ";
  const auto expect_error = [](const std::pair<int, std::string>& run, const std::string& fragment) {
    EXPECT_NE(run.first, 0) << run.second;
    EXPECT_NE(run.second.find(fragment), std::string::npos) << run.second;
  };
  expect_error(testing::run_command(measure + "--threads 100000"), "--threads = 100000: expected 0..");
  expect_error(testing::run_command(measure + "--classes 4294967296,4294967297"),
               "classes = '4294967296': expected an integer in -2147483648..2147483647");
  expect_error(testing::run_command(measure + "--releases 99999999999"), "releases = '99999999999'");
  expect_error(testing::run_command(measure + "--sigma 1e400"), "sigma = '1e400': expected a number of magnitude");
  expect_error(testing::run_command(measure + "--max-memory 2X"), "--max-memory = '2X'");
  expect_error(testing::run_command(measure + "--max-memory 1K"), "more than --max-memory = 1K");
  const auto fine = testing::run_command(measure + "--max-memory 64M --threads 1 --json " + dir.file("s.json"));
  ASSERT_EQ(fine.first, 0) << fine.second;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir.file("s.json")))["settings"]["max_memory"], "64M");

  // An archive recording a 3.9 GB member that its header confirms, with a budget that allows it and
  // an address space that does not: the allocation fails while loading.
  // AddressSanitizer's shadow memory needs terabytes of address space.
  if (testing::kAddressSanitizer) GTEST_SKIP() << "ulimit -v leaves no address space for AddressSanitizer";
  const std::string header_only = testing::npy_bytes("<f8", "(490000000,)", "");
  std::string zip = testing::zip_bytes({{"X.npy", header_only}, {"y.npy", testing::npy_f8({0, 1}, 2)}}, true);
  const std::size_t directory = zip.find(std::string("PK\x01\x02", 4));
  zip.replace(directory + 24, 4, testing::little_endian(header_only.size() + 3920000000ULL, 4));
  const std::string huge = dir.write("huge.npz", zip);
  expect_error(testing::run_command("ulimit -v 1000000; " + std::string(binary) + " measure --quiet --data " + huge +
                                    " --max-memory 100G"),
               "filkit: error: out of memory while loading the data; try a smaller subset");
}

TEST(MeasureCommand, WritesTheSameOutputsForAnyThreadCount) {
  // 2400 training rows make several blocks of every pass: preprocessing, fit, FIL.
  const TempDir dir;
  MeasureOptions options =
      small_measure_job(testing::write_npz_dataset(dir, testing::random_classification(3000, 12, 2, 9)));
  options.task.data.pca = 8;
  options.task.data.row_scaling = RowScaling::kGlobalMax;
  options.attribute = "0,1";
  options.subsets = {"all", "class=1"};
  testing::expect_same_job_outputs_for_any_thread_count<MeasureJob>(options);
}

}  // namespace
}  // namespace filkit
