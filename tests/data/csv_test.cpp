// CSV reading: header, quoting, line numbers, and every malformed-input error.
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include "test_util.hpp"

namespace filkit {
namespace {

using testing::TempDir;

TEST(CsvReader, ReadsHeaderRowsAndTheirLineNumbers) {
  TempDir dir;
  const TextTable table = read_csv(dir.write("t.csv", "age,sex\n39, Male\n\n50,Female\n"));
  EXPECT_EQ(table.header, (std::vector<std::string>{"age", "sex"}));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"39", "Male"}));  // blanks trimmed
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"50", "Female"}));
  EXPECT_EQ(table.lines, (std::vector<Index>{2, 4}));
  EXPECT_EQ(table.types, (std::vector<ColumnType>{ColumnType::kInferred, ColumnType::kInferred}));
  EXPECT_EQ(table.source, dir.file("t.csv"));
}

TEST(CsvReader, UnquotesCellsWithCommasQuotesAndLineBreaks) {
  TempDir dir;
  const TextTable table =
      read_csv(dir.write("t.csv", "a,b\n\"x, y\",\"say \"\"hi\"\"\"\n\"two\nlines\",\"\"\nlast,1\n"));
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"x, y", "say \"hi\""}));
  EXPECT_EQ(table.rows[1], (std::vector<std::string>{"two\nlines", ""}));
  EXPECT_EQ(table.lines, (std::vector<Index>{2, 3, 5}));
}

TEST(CsvReader, AcceptsCrlfLineEndsAndAByteOrderMark) {
  TempDir dir;
  const TextTable table = read_csv(dir.write("t.csv", "\xEF\xBB\xBFx,\"y\"\r\n1,\"2\"\r\n"));
  EXPECT_EQ(table.header, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(table.rows.at(0), (std::vector<std::string>{"1", "2"}));
}

TEST(CsvReader, RejectsRaggedRowNamingItsLine) {
  TempDir dir;
  const std::string path = dir.write("t.csv", "a,b,c\n1,2,3\n\n4,5\n");
  EXPECT_INVALID_ARGUMENT(read_csv(path), path, "line 4", "2 cells", "3 columns");
}

TEST(CsvReader, RejectsUnterminatedQuoteNamingTheLineItOpens) {
  TempDir dir;
  const std::string path = dir.write("t.csv", "a,b\n1,\"open\n2,3\n");
  EXPECT_INVALID_ARGUMENT(read_csv(path), path, "line 2", "unterminated");
}

TEST(CsvReader, RejectsTextAfterAClosingQuote) {
  TempDir dir;
  const std::string path = dir.write("t.csv", "a,b\n\"x\"y,1\n");
  EXPECT_INVALID_ARGUMENT(read_csv(path), path, "line 2", "after a closing quote");
}

TEST(CsvReader, RejectsDuplicateAndEmptyHeaderNames) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_csv(dir.write("dup.csv", "a,b,a\n1,2,3\n")), "line 1", "'a' twice");
  EXPECT_INVALID_ARGUMENT(read_csv(dir.write("empty.csv", ",b\n1,2\n")), "header column 1 has no name");
}

TEST(CsvReader, RejectsFileWithoutHeader) {
  TempDir dir;
  const std::string path = dir.write("t.csv", "\n\n");
  EXPECT_INVALID_ARGUMENT(read_csv(path), path, "expected a header row");
}

TEST(CsvReader, RejectsMissingFile) {
  TempDir dir;
  EXPECT_THROW_NAMING(read_csv(dir.file("absent.csv")), ResourceError, "absent.csv", "cannot open");
}

TEST(TextTable, SelectRowsKeepsLineNumbers) {
  TempDir dir;
  const TextTable table = read_csv(dir.write("t.csv", "a\n1\n2\n3\n"));
  const TextTable picked = table.select_rows({2, 0});
  EXPECT_EQ(picked.rows, (std::vector<std::vector<std::string>>{{"3"}, {"1"}}));
  EXPECT_EQ(picked.lines, (std::vector<Index>{4, 2}));
  EXPECT_INVALID_ARGUMENT(table.select_rows({3}), "row 3");
}

TEST(ColumnType, RoundTripsThroughStrings) {
  for (ColumnType type : {ColumnType::kInferred, ColumnType::kNumeric, ColumnType::kNominal, ColumnType::kString}) {
    EXPECT_EQ(parse_enum<ColumnType>(to_string(type)), type);
  }
  EXPECT_INVALID_ARGUMENT(parse_enum<ColumnType>("date"), "'date'", "inferred, numeric, nominal, string");
}

// A table of 2000 columns is refused at the row that takes its cells past the memory budget,
// before it fills the memory.
TEST(CsvReader, RefusesATableWhoseCellsExceedTheMemoryBudget) {
  TempDir dir;
  std::string header, row;
  for (int j = 0; j < 2000; ++j) {
    header += (j ? ",c" : "c") + std::to_string(j);
    row += j ? ",1" : "1";
  }
  const std::string path = dir.write("wide.csv", header + "\n" + row + "\n" + row + "\n" + row + "\n");
  EXPECT_EQ(read_csv(path).rows.size(), 3u);
  EXPECT_MEMORY_LIMIT(read_csv(path, ByteSize{100000}), "wide.csv' line 3", "2000 columns x 2 rows",
                      "more than max_memory = 100000");
  EXPECT_MEMORY_LIMIT(read_csv(path, ByteSize{1000}), "reading '" + path + "'", "max_memory = 1000");
}

}  // namespace
}  // namespace filkit
