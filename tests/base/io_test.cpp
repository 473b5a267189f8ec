// CSV output: number formatting that reads back exactly, the numeric table path, quoting; and
// the output writer: regular files replaced whole, stdout, FIFOs, devices and links written
// through, sets of files written all or nothing, paths checked before the work.
#include "filkit/base/io.hpp"

#include "test_util.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace filkit {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

double parse(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  EXPECT_EQ(*end, '\0') << text;
  return value;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();  // an empty last cell
  return cells;
}

TEST(FormatDouble, IsTheShortestTextThatReadsBackExactly) {
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e-5), "1e-05");
  EXPECT_EQ(format_double(-2.5), "-2.5");
  EXPECT_EQ(format_double(std::nan("")), "nan");
  EXPECT_EQ(format_double(-std::numeric_limits<double>::infinity()), "-inf");
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 100000; ++trial) {  // random bit patterns: every exponent and sign
    const double value = std::bit_cast<double>(rng());
    if (!std::isfinite(value)) continue;
    ASSERT_EQ(std::bit_cast<std::uint64_t>(parse(format_double(value))), std::bit_cast<std::uint64_t>(value))
        << format_double(value);
  }
  for (double value : {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                       std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest()}) {
    EXPECT_EQ(parse(format_double(value)), value);
  }
}

TEST(NumericCsv, WritesIntegersAsIntegersAndEveryOtherValueExactly) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> rows;
  for (int i = 0; i < 1000; ++i) {
    rows.push_back({static_cast<double>(i), 100000.0 * i, normal(rng), std::exp(30.0 * normal(rng)), -0.0});
  }
  rows.push_back({1e15, -1e300, std::nan(""), std::numeric_limits<double>::infinity(), 5e-324});
  rows.push_back({-std::numeric_limits<double>::infinity(), 1.0, 2.0, 3.0, std::nan("")});
  const std::string csv = numeric_csv({"index", "big", "normal", "wide", "zero"}, rows);
  std::stringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "index,big,normal,wide,zero");
  for (const auto& row : rows) {
    ASSERT_TRUE(std::getline(lines, line));
    const std::vector<std::string> cells = split(line);
    ASSERT_EQ(cells.size(), row.size()) << line;
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (!std::isfinite(row[j])) EXPECT_EQ(cells[j], "");
      else EXPECT_EQ(parse(cells[j]), row[j]) << cells[j];
    }
  }
  EXPECT_FALSE(std::getline(lines, line));
  const std::size_t first = csv.find('\n') + 1;  // -0 is integral too: "0"
  EXPECT_EQ(csv.substr(first, csv.find('\n', first) - first),
            "0,0," + format_double(rows[0][2]) + "," + format_double(rows[0][3]) + ",0");
  EXPECT_NE(csv.find("\n999,99900000,"), std::string::npos);                      // 99900000, not 9.99e+07
  EXPECT_NE(csv.find("\n1e+15,-1e+300,,,5e-324\n,1,2,3,\n"), std::string::npos);  // non-finite: empty
}

TEST(NumericCsv, RejectsARowOfAnotherWidth) {
  EXPECT_THROW_NAMING(numeric_csv({"a", "b"}, {{1.0, 2.0}, {3.0}}), std::logic_error, "1 cells", "header has 2");
}

TEST(NumericCsv, WritesAtomicallyWhatItFormats) {
  TempDir dir;
  const std::vector<std::vector<double>> rows = {{1.0, 0.25}, {2.0, 1.0 / 3.0}};
  write_numeric_csv(dir.file("table.csv"), {"i", "x"}, rows);
  EXPECT_EQ(testing::read_bytes(dir.file("table.csv")), numeric_csv({"i", "x"}, rows));
  EXPECT_EQ(testing::read_bytes(dir.file("table.csv")), "i,x\n1,0.25\n2,0.3333333333333333\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.file("")), {}), 1);  // no temporary left
}

TEST(CsvTable, QuotesCellsWithCommasQuotesAndNewlines) {
  CsvTable table({"name", "note"});
  table.add_row({"plain", "a,b"});
  table.add_row({"say \"hi\"", "two\nlines"});
  EXPECT_EQ(table.to_string(), "name,note\nplain,\"a,b\"\n\"say \"\"hi\"\"\",\"two\nlines\"\n");
  EXPECT_THROW_NAMING(table.add_row({"one"}), std::logic_error, "1 cells", "header has 2");
}

/// The names in a directory, sorted (to see that no temporary is left).
std::vector<std::string> names_in(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteOutputFile, ReplacesARegularFileWholeKeepingItsPermissions) {
  const TempDir dir;
  const std::string path = dir.write("table.csv", "old content, longer than the new one\n");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_output_file(path, "new\n");
  EXPECT_EQ(testing::read_bytes(path), "new\n");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(names_in(dir.file("")), std::vector<std::string>{"table.csv"});
}

TEST(WriteOutputFile, WritesThroughASymbolicLinkAndKeepsTheLink) {
  const TempDir dir;
  const std::string target = dir.write("target.csv", "old content, longer than the new one\n");
  fs::create_symlink(target, dir.file("link.csv"));
  EXPECT_TRUE(is_written_through(dir.file("link.csv")));
  write_output_file(dir.file("link.csv"), "new\n");
  EXPECT_TRUE(fs::is_symlink(dir.file("link.csv")));
  EXPECT_EQ(fs::read_symlink(dir.file("link.csv")), target);
  EXPECT_EQ(testing::read_bytes(target), "new\n");
  // A dangling link: the file it names is created.
  fs::create_symlink("missing.csv", dir.file("dangling.csv"));
  check_output_path("--out", dir.file("dangling.csv"));
  write_output_file(dir.file("dangling.csv"), "created\n");
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.csv")));
  EXPECT_EQ(testing::read_bytes(dir.file("missing.csv")), "created\n");
  EXPECT_EQ(names_in(dir.file("")),
            (std::vector<std::string>{"dangling.csv", "link.csv", "missing.csv", "target.csv"}));
}

TEST(WriteOutputFile, WritesThroughAFifoToItsReader) {
  const TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string content = std::string(200000, 'x') + "\n";  // more than a pipe buffer holds
  check_output_path("--json", fifo);
  ASSERT_TRUE(is_written_through(fifo)) << "would be replaced: no writer would ever open it";
  std::string received;
  std::thread reader([&] { received = testing::read_bytes(fifo); });
  try {
    write_output_file(fifo, content);
  } catch (...) {
    std::ofstream(fifo).close();  // releases the reader waiting for a writer
    reader.join();
    throw;
  }
  reader.join();
  EXPECT_EQ(received, content);
  struct stat status {};
  ASSERT_EQ(::lstat(fifo.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode)) << "still a FIFO";
}

TEST(WriteOutputFile, DashIsStandardOutput) {
  check_output_path("--json", "-");
  ::testing::internal::CaptureStdout();
  write_output_files({{"-", "first\n"}, {"-", "second\n"}});
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "first\nsecond\n");
}

TEST(WriteOutputFile, DevNullStaysACharacterDevice) {
  struct stat before {};
  if (::stat("/dev/null", &before) != 0 || !S_ISCHR(before.st_mode)) GTEST_SKIP() << "no /dev/null device";
  ASSERT_TRUE(is_written_through("/dev/null")) << "would be replaced: not writing";
  check_output_path("--out", "/dev/null");
  write_output_file("/dev/null", "discarded\n");
  struct stat after {};
  ASSERT_EQ(::lstat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_rdev, before.st_rdev);
}

TEST(WriteOutputFiles, ReplaceNothingWhenOneTargetCannotBeWritten) {
  const TempDir dir;
  const std::string a = dir.write("a.csv", "old a\n"), b = dir.write("b.csv", "old b\n");
  const std::string blocker = dir.write("file.txt", "a regular file, not a directory\n");
  EXPECT_THROW(write_output_files({{a, "new a\n"}, {blocker + "/c.csv", "c\n"}, {b, "new b\n"}}), std::runtime_error);
  EXPECT_EQ(testing::read_bytes(a), "old a\n");
  EXPECT_EQ(testing::read_bytes(b), "old b\n");
  EXPECT_EQ(names_in(dir.file("")), (std::vector<std::string>{"a.csv", "b.csv", "file.txt"})) << "temporaries removed";
  write_output_files({{a, "new a\n"}, {b, "new b\n"}});
  EXPECT_EQ(testing::read_bytes(a), "new a\n");
  EXPECT_EQ(testing::read_bytes(b), "new b\n");
}

TEST(CheckOutputPath, RefusesDirectoriesAndMissingOrBlockedDirectoriesNamingTheOption) {
  const TempDir dir;
  EXPECT_INVALID_ARGUMENT(check_output_path("--out", dir.file("")), "--out", "is a directory");
  EXPECT_INVALID_ARGUMENT(check_output_path("--json", dir.file("missing/summary.json")), "--json", "missing",
                          "does not exist");
  const std::string blocker = dir.write("file.txt", "x");
  EXPECT_INVALID_ARGUMENT(check_output_path("--release-out", blocker + "/w.csv"), "--release-out", "does not exist");
  fs::create_symlink(dir.file(""), dir.file("link-to-dir"));
  EXPECT_INVALID_ARGUMENT(check_output_path("--out", dir.file("link-to-dir")), "--out", "is a directory");
  check_output_path("--out", dir.file("new.csv"));  // new files, existing ones, standard output pass
  check_output_path("--out", blocker);
  check_output_path("--out", "-");
  // A value that looks like a flag ("--out -q") is far likelier a forgotten value than a file name.
  EXPECT_INVALID_ARGUMENT(check_output_path("--out", "-q"), "--out -q", "looks like a flag", "./-q");
}

TEST(CheckDistinctOutputs, RefusesTwoOptionsNamingOneFileButNotOneDevice) {
  const TempDir dir;
  const std::string file = dir.file("x.csv");
  EXPECT_INVALID_ARGUMENT(check_distinct_outputs({{"--out", file}, {"--json", dir.file("sub/../x.csv")}}), "--json",
                          "the same file as --out");
  fs::create_symlink(file, dir.file("link.csv"));
  EXPECT_INVALID_ARGUMENT(check_distinct_outputs({{"--out", file}, {"--json", dir.file("link.csv")}}), "--json",
                          "the same file as --out");
  check_distinct_outputs({{"--out", "/dev/null"}, {"--json", "/dev/null"}, {"--a", "-"}, {"--b", "-"}, {"--c", ""}});
  check_distinct_outputs({{"--out", file}, {"--json", dir.file("y.json")}});
}

// Progress: elapsed and remaining time; a line of its own when stderr is not a terminal.
TEST(Progress, DurationsReadAsSecondsMinutesHours) {
  EXPECT_EQ(format_duration(0.04), "0.0s");
  EXPECT_EQ(format_duration(59.94), "59.9s");
  EXPECT_EQ(format_duration(125), "2m05s");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 10), "3h07m");
  EXPECT_EQ(format_duration(std::nan("")), "?");
}

TEST(Progress, TextHasElapsedAndRemainingTime) {
  // A quarter done in 10 s: 30 s left at that rate.
  EXPECT_EQ(progress_text("steps", 250, 1000, 10.0, false, false), "steps: 25% (250/1000) 10.0s elapsed, ~30.0s left");
  EXPECT_EQ(progress_text("steps", 250, 1000, 10.0, true, false),
            "steps [######..................]  25% 10.0s elapsed, ~30.0s left");
  // Nothing done yet: no estimate; done: the total time.
  EXPECT_EQ(progress_text("steps", 0, 1000, 1.0, false, false), "steps: 0% (0/1000) 1.0s elapsed");
  EXPECT_EQ(progress_text("steps", 1000, 1000, 75.0, false, true), "steps: 100% (1000/1000) done in 1m15s");
}

TEST(Progress, ResumedWorkCountsInThePercentageNotInTheRate) {
  // 47 of 59 steps done before a resume, 2 more in 20 s: 10 s a step, so 100 s left (not the 4 s
  // that 49 steps in 20 s would predict).
  EXPECT_EQ(progress_text("fim", 49, 59, 20.0, false, false, 47), "fim: 83% (49/59) 20.0s elapsed, ~1m40s left");
  // Just resumed, nothing done here yet: no estimate.
  EXPECT_EQ(progress_text("fim", 47, 59, 3.0, false, false, 47), "fim: 79% (47/59) 3.0s elapsed");
}

TEST(Progress, WritesWholeLinesWhenStderrIsNotATerminal) {
  ::testing::internal::CaptureStderr();  // a file: not a terminal
  {
    Progress bar("work", 4, false, /*line_interval=*/0.0);
    for (int k = 0; k < 4; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      bar.advance();
    }
  }
  const std::string written = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(written.find('\r'), std::string::npos) << written;
  EXPECT_NE(written.find("work: 50% (2/4)"), std::string::npos) << written;
  EXPECT_NE(written.find("left\n"), std::string::npos) << written;
  EXPECT_NE(written.find("work: 100% (4/4) done in "), std::string::npos) << written;
  // A stage ended by an error reports no "done": the error's message follows alone.
  ::testing::internal::CaptureStderr();
  try {
    Progress failing("failing", 4, false, 3600.0);
    failing.advance();
    throw std::runtime_error("stage failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // Quiet writes nothing.
  ::testing::internal::CaptureStderr();
  {
    Progress silent("work", 4, true, 0.0);
    silent.advance(4);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace filkit
