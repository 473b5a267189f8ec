// ARFF reading: declared attribute types, quoting, comments, missing values, and errors.
#include "filkit/data/dataset.hpp"
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/data/text_table.hpp"

#include "test_util.hpp"

namespace filkit {
namespace {

using testing::TempDir;

const std::string kWeather = R"(% The classic weather data, abridged.
@RELATION weather

@attribute outlook {sunny, overcast, 'light rain'}
@attribute temperature real
@attribute 'relative humidity' NUMERIC
@attribute note string
@attribute play {yes, no}

@data
sunny, 85, 85, 'hot, dry', no
overcast, 83, ?, "it\'s fine", yes
% a comment between rows
'light rain', 70, 96, windy, yes   % trailing comment
sunny, 72, 95, ?, no
)";

TEST(ArffReader, ReadsDeclaredTypesQuotedValuesAndLineNumbers) {
  TempDir dir;
  const TextTable table = read_arff(dir.write("weather.arff", kWeather));
  EXPECT_EQ(table.header, (std::vector<std::string>{"outlook", "temperature", "relative humidity", "note", "play"}));
  EXPECT_EQ(table.types, (std::vector<ColumnType>{ColumnType::kNominal, ColumnType::kNumeric, ColumnType::kNumeric,
                                                  ColumnType::kString, ColumnType::kNominal}));
  ASSERT_EQ(table.rows.size(), 4u);
  EXPECT_EQ(table.rows[0], (std::vector<std::string>{"sunny", "85", "85", "hot, dry", "no"}));
  EXPECT_EQ(table.rows[1][2], "?");
  EXPECT_EQ(table.rows[1][3], "it's fine");
  EXPECT_EQ(table.rows[2], (std::vector<std::string>{"light rain", "70", "96", "windy", "yes"}));
  EXPECT_EQ(table.lines, (std::vector<Index>{11, 12, 14, 15}));
}

TEST(ArffReader, MakesNominalAttributesCategoricalAndNumericOnesStandardised) {
  TempDir dir;
  TextTable table = read_arff(dir.write("weather.arff", kWeather));
  TabularOptions options;
  options.target = "play";
  options.drop = {"note"};
  const Dataset data = TabularEncoder::fit(table, options).transform(table);
  EXPECT_EQ(data.dropped_rows, 1);  // the '?' humidity
  // Levels are those of the kept training rows ("overcast" went with the dropped row), sorted.
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"outlook=light rain", "temperature", "relative humidity"}));
  EXPECT_EQ(data.attribute("outlook").dropped_level, "sunny");
  EXPECT_NEAR(data.X.col(2).mean(), 0.0, 1e-12);
  EXPECT_EQ(data.class_names, (std::vector<std::string>{"no", "yes"}));
}

TEST(ArffReader, AcceptsCrlfLineEndsAndAByteOrderMark) {
  TempDir dir;
  const TextTable table =
      read_arff(dir.write("w.arff", "\xEF\xBB\xBF@relation r\r\n@attribute a {x,y}\r\n@data\r\ny\r\n"));
  EXPECT_EQ(table.rows, (std::vector<std::vector<std::string>>{{"y"}}));
}

TEST(ArffReader, RejectsUndeclaredNominalValueNamingLineAndLevels) {
  TempDir dir;
  const std::string path = dir.write("bad.arff", "@relation r\n@attribute a {x,y}\n@data\nx\nz\n");
  EXPECT_INVALID_ARGUMENT(read_arff(path), path, "line 5", "'z'", "attribute 'a'", "'x', 'y'");
}

TEST(ArffReader, RejectsNonNumericValueOfNumericAttribute) {
  TempDir dir;
  const std::string path = dir.write("bad.arff", "@attribute a integer\n@data\n1\nmany\n");
  EXPECT_INVALID_ARGUMENT(read_arff(path), path, "line 4", "numeric", "'many'");
}

TEST(ArffReader, RejectsRowOfTheWrongWidth) {
  TempDir dir;
  const std::string path = dir.write("bad.arff", "@attribute a real\n@attribute b real\n@data\n1,2,3\n");
  EXPECT_INVALID_ARGUMENT(read_arff(path), "line 4", "3 values", "2 attributes");
}

TEST(ArffReader, RejectsSparseRowsAndDateAttributes) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_arff(dir.write("s.arff", "@attribute a real\n@data\n{0 1}\n")), "line 3", "sparse");
  EXPECT_INVALID_ARGUMENT(read_arff(dir.write("d.arff", "@attribute when date 'yyyy-MM-dd'\n@data\n")), "line 1",
                          "attribute 'when'", "date");
}

TEST(ArffReader, RejectsFileWithoutDataSection) {
  TempDir dir;
  const std::string path = dir.write("nodata.arff", "@relation r\n@attribute a real\n");
  EXPECT_INVALID_ARGUMENT(read_arff(path), path, "no @data");
}

TEST(ArffReader, RejectsUnknownKeywordAndRepeatedAttribute) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_arff(dir.write("k.arff", "@relation r\n@atribute a real\n@data\n")), "line 2",
                          "'@atribute'");
  EXPECT_INVALID_ARGUMENT(read_arff(dir.write("r.arff", "@attribute a real\n@attribute a real\n@data\n")), "line 2",
                          "'a' is declared twice");
}

TEST(ArffReader, RejectsUnterminatedQuote) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_arff(dir.write("q.arff", "@attribute a string\n@data\n'open\n")), "line 3",
                          "unterminated");
}

}  // namespace
}  // namespace filkit
