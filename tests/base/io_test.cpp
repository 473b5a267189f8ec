// CSV output: number formatting that reads back exactly, the numeric table path, quoting, and
// the atomic write.
#include "filkit/base/io.hpp"

#include "test_util.hpp"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace filkit {
namespace {

using testing::TempDir;

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
      if (std::isnan(row[j])) EXPECT_EQ(cells[j], "nan");
      else EXPECT_EQ(parse(cells[j]), row[j]) << cells[j];
    }
  }
  EXPECT_FALSE(std::getline(lines, line));
  const std::size_t first = csv.find('\n') + 1;  // -0 is integral too: "0"
  EXPECT_EQ(csv.substr(first, csv.find('\n', first) - first),
            "0,0," + format_double(rows[0][2]) + "," + format_double(rows[0][3]) + ",0");
  EXPECT_NE(csv.find("\n999,99900000,"), std::string::npos);  // 99900000, not 9.99e+07
  EXPECT_NE(csv.find("\n1e+15,-1e+300,nan,inf,5e-324\n"), std::string::npos);
}

TEST(NumericCsv, RejectsARowOfAnotherWidth) {
  EXPECT_INVALID_ARGUMENT(numeric_csv({"a", "b"}, {{1.0, 2.0}, {3.0}}), "1 cells", "header has 2");
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
  EXPECT_INVALID_ARGUMENT(table.add_row({"one"}), "1 cells", "header has 2");
}

}  // namespace
}  // namespace filkit
