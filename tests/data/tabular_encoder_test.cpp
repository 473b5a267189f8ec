// Turning a text table into (X, y): one-hot and standardised columns, the column map, missing
// values, classes, and every error on bad cells.
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include "test_util.hpp"

#include <cmath>

namespace filkit {
namespace {

using testing::TempDir;

// A table typed in directly; row k sits on line k + 2, after the header.
TextTable table(std::vector<std::string> header, std::vector<std::vector<std::string>> rows) {
  TextTable t;
  t.types.assign(header.size(), ColumnType::kInferred);
  t.header = std::move(header);
  for (std::size_t k = 0; k < rows.size(); ++k) t.lines.push_back(static_cast<Index>(k + 2));
  t.rows = std::move(rows);
  t.source = "table.csv";
  return t;
}

TabularOptions target(const std::string& name) {
  TabularOptions options;
  options.target = name;
  return options;
}

const TextTable kPeople =
    table({"age", "sex", "income"},
          {{"20", "Male", "low"}, {"30", "Female", "high"}, {"40", "Male", "high"}, {"50", "Other", "low"}});

TEST(TabularEncoder, OneHotEncodesCategoricalColumnsDroppingTheLastSortedLevel) {
  const Dataset data = TabularEncoder::fit(kPeople, target("income")).transform(kPeople);
  // Levels sorted Female, Male, Other: Other is dropped and encoded as all zeros.
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"age", "sex=Female", "sex=Male"}));
  EXPECT_EQ(data.X.col(1).transpose(), Eigen::RowVector4d(0, 1, 0, 0));
  EXPECT_EQ(data.X.col(2).transpose(), Eigen::RowVector4d(1, 0, 1, 0));
  EXPECT_EQ(data.X.row(3).tail(2).sum(), 0.0);
}

TEST(TabularEncoder, StandardisesNumericColumnsWithTrainingMeanAndStd) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, target("income"));
  const double mean = 35.0, std = std::sqrt((225.0 + 25 + 25 + 225) / 4);  // population std
  EXPECT_DOUBLE_EQ(encoder.columns()[0].mean, mean);
  EXPECT_DOUBLE_EQ(encoder.columns()[0].scale, std);
  const Dataset test = encoder.transform(table({"age", "sex", "income"}, {{"60", "Male", "low"}}));
  EXPECT_DOUBLE_EQ(test.X(0, 0), (60 - mean) / std);
}

TEST(TabularEncoder, GivesConstantColumnsScaleOne) {
  const TextTable constant = table({"x", "y"}, {{"3", "a"}, {"3", "b"}});
  const Dataset data = TabularEncoder::fit(constant, target("y")).transform(constant);
  EXPECT_EQ(data.X.col(0).transpose(), Eigen::RowVector2d(0, 0));
}

TEST(TabularEncoder, RecordsWhichOutputColumnsBelongToEachAttribute) {
  const Dataset data = TabularEncoder::fit(kPeople, target("income")).transform(kPeople);
  ASSERT_EQ(data.attributes.size(), 2u);
  EXPECT_FALSE(data.attribute("age").categorical);
  EXPECT_EQ(data.attribute("age").columns, (std::vector<Index>{0}));
  const AttributeColumns& sex = data.attribute("sex");
  EXPECT_TRUE(sex.categorical);
  EXPECT_EQ(sex.columns, (std::vector<Index>{1, 2}));
  EXPECT_EQ(sex.levels, (std::vector<std::string>{"Female", "Male"}));
  EXPECT_EQ(sex.dropped_level, "Other");
  EXPECT_NO_THROW(data.validate());
}

TEST(TabularEncoder, EncodesClassesAsIndicesOfTheSortedLevels) {
  const Dataset data = TabularEncoder::fit(kPeople, target("income")).transform(kPeople);
  EXPECT_EQ(data.class_names, (std::vector<std::string>{"high", "low"}));
  EXPECT_EQ(data.y.transpose(), Eigen::RowVector4d(1, 0, 0, 1));
}

TEST(TabularEncoder, SortsNumericLevelsByValue) {
  const TextTable digits = table({"x", "y"}, {{"a", "10"}, {"b", "9"}, {"a", "2"}});
  const TabularEncoder encoder = TabularEncoder::fit(digits, target("y"));
  EXPECT_EQ(encoder.classes(), (std::vector<std::string>{"2", "9", "10"}));
}

TEST(TabularEncoder, TreatsListedNumericColumnsAsCategorical) {
  TabularOptions options = target("income");
  options.categorical = {"age"};
  const Dataset data = TabularEncoder::fit(kPeople, options).transform(kPeople);
  EXPECT_EQ(data.attribute("age").levels, (std::vector<std::string>{"20", "30", "40"}));
  EXPECT_EQ(data.attribute("age").dropped_level, "50");
}

TEST(TabularEncoder, IgnoresDroppedColumns) {
  TabularOptions options = target("income");
  options.drop = {"sex"};
  const Dataset data = TabularEncoder::fit(kPeople, options).transform(kPeople);
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"age"}));
}

TEST(TabularEncoder, FindsColumnsByNameInAnotherColumnOrder) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, target("income"));
  const Dataset test = encoder.transform(table({"income", "sex", "age"}, {{"low", "Male", "35"}}));
  EXPECT_EQ(test.X.row(0), Eigen::RowVector3d(0, 0, 1));
}

const TextTable kWithMissing =
    table({"x", "c", "y"}, {{"1", "a", "u"}, {"NA", "b", "v"}, {"3", "?", "u"}, {"4", "b", ""}, {"5", "a", "v"}});

TEST(TabularEncoder, DropsRowsWithMissingCellsAndCountsThem) {
  const Dataset data = TabularEncoder::fit(kWithMissing, target("y")).transform(kWithMissing);
  EXPECT_EQ(data.n(), 2);
  EXPECT_EQ(data.dropped_rows, 3);
  EXPECT_DOUBLE_EQ(TabularEncoder::fit(kWithMissing, target("y")).columns()[0].mean, 3.0);
}

TEST(TabularEncoder, LevelPolicyMakesMissingALevelOfItsOwn) {
  TabularOptions options = target("y");
  options.drop = {"x"};
  options.missing_policy = MissingPolicy::kLevel;
  const Dataset data = TabularEncoder::fit(kWithMissing, options).transform(kWithMissing);
  EXPECT_EQ(data.n(), 4);  // the row without a target still goes
  EXPECT_EQ(data.dropped_rows, 1);
  EXPECT_EQ(data.attribute("c").levels, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(data.attribute("c").dropped_level, kMissingLevel);
}

TEST(TabularEncoder, LevelPolicyRejectsMissingNumericCellNamingTheColumn) {
  TabularOptions options = target("y");
  options.missing_policy = MissingPolicy::kLevel;
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kWithMissing, options), "numeric column 'x'", "line 3");
}

TEST(TabularEncoder, RejectsUnknownTargetListingAvailableColumns) {
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, target("salary")), "'salary'", "'age', 'sex', 'income'");
}

TEST(TabularEncoder, RejectsUnknownCategoricalOrDroppedColumn) {
  TabularOptions options = target("income");
  options.drop = {"height"};
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, options), "'height'", "drop");
}

TabularOptions with_unseen(UnseenLevelPolicy policy) {
  TabularOptions options = target("income");
  options.unseen_levels = policy;
  return options;
}

const TextTable kUnseenTest =
    table({"age", "sex", "income"},
          {{"1", "Male", "low"}, {"2", "Robot", "low"}, {"3", "Female", "medium"}, {"4", "Other", "high"}});

TEST(TabularEncoder, ErrorPolicyRejectsUnseenTestLevelNamingColumnLevelAndLine) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, with_unseen(UnseenLevelPolicy::kError));
  const TextTable test = table({"age", "sex", "income"}, {{"1", "Male", "low"}, {"2", "Robot", "low"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "'Robot'", "column 'sex'", "line 3", "unseen_levels");
}

TEST(TabularEncoder, ErrorPolicyRejectsUnseenTestClass) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, with_unseen(UnseenLevelPolicy::kError));
  const TextTable test = table({"age", "sex", "income"}, {{"1", "Male", "medium"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "class 'medium'", "column 'income'", "line 2");
}

TEST(TabularEncoder, DropPolicyLeavesOutRowsWithUnseenLevelsOrClassesAndCountsThem) {
  ASSERT_EQ(TabularOptions{}.unseen_levels, UnseenLevelPolicy::kDrop);  // the default
  const Dataset data = TabularEncoder::fit(kPeople, with_unseen(UnseenLevelPolicy::kDrop)).transform(kUnseenTest);
  ASSERT_EQ(data.n(), 2);  // Male/low and Other/high: rows 1 and 4
  EXPECT_EQ(data.dropped_rows, 2);
  EXPECT_EQ(data.unseen_level_rows, 2);
  const Dataset seen = TabularEncoder::fit(kPeople, target("income"))
                           .transform(table({"age", "sex", "income"}, {{"1", "Male", "low"}, {"4", "Other", "high"}}));
  EXPECT_EQ(data.X, seen.X);
  EXPECT_EQ(data.y, seen.y);
}

TEST(TabularEncoder, ZeroPolicyEncodesUnseenLevelsAsAllZeroAndDropsUnseenClasses) {
  const Dataset data = TabularEncoder::fit(kPeople, with_unseen(UnseenLevelPolicy::kZero)).transform(kUnseenTest);
  ASSERT_EQ(data.n(), 3);  // the unknown class "medium" still goes
  EXPECT_EQ(data.dropped_rows, 1);
  EXPECT_EQ(data.unseen_level_rows, 2);
  const std::vector<Index>& sex = data.attribute("sex").columns;  // Female, Male (Other dropped)
  ASSERT_EQ(sex.size(), 2u);
  EXPECT_EQ(data.X(0, sex[1]), 1.0);  // Male
  EXPECT_EQ(data.X(1, sex[0]), 0.0);  // Robot: all zero, as the dropped level Other
  EXPECT_EQ(data.X(1, sex[1]), 0.0);
  EXPECT_EQ(data.X(2, sex[0]), 0.0);  // Other
  EXPECT_EQ(data.X(2, sex[1]), 0.0);
  EXPECT_EQ(data.y(1), 1.0);  // classes high, low: "low" is 1
}

TEST(UnseenLevelPolicy, RoundTripsThroughStrings) {
  for (UnseenLevelPolicy policy : {UnseenLevelPolicy::kDrop, UnseenLevelPolicy::kZero, UnseenLevelPolicy::kError})
    EXPECT_EQ(parse_enum<UnseenLevelPolicy>(to_string(policy)), policy);
  EXPECT_INVALID_ARGUMENT(parse_enum<UnseenLevelPolicy>("ignore"), "ignore", "drop", "zero", "error");
}

TEST(TabularEncoder, RejectsNanAndInfCells) {
  for (const std::string bad : {"nan", "inf", "-Infinity"}) {
    const TextTable t = table({"x", "y"}, {{"1", "a"}, {bad, "b"}});
    EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(t, target("y")), "column 'x'", "line 3", bad);
  }
}

TEST(TabularEncoder, RejectsNonNumericCellInColumnNumericInTraining) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, target("income"));
  const TextTable test = table({"age", "sex", "income"}, {{"old", "Male", "low"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "column 'age' is numeric", "'old'", "line 2");
}

TEST(TabularEncoder, ReadsRegressionTargetsAsNumbers) {
  TabularOptions options = target("age");
  options.target_categorical = false;
  const Dataset data = TabularEncoder::fit(kPeople, options).transform(kPeople);
  EXPECT_EQ(data.y.transpose(), Eigen::RowVector4d(20, 30, 40, 50));
  EXPECT_TRUE(data.class_names.empty());
}

TEST(TabularEncoder, RejectsNonNumericRegressionTarget) {
  TabularOptions options = target("sex");
  options.target_categorical = false;
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, options).transform(kPeople), "column 'sex'", "'Male'", "line 2");
}

TEST(TabularEncoder, RejectsSingleClassTarget) {
  const TextTable t = table({"x", "y"}, {{"1", "a"}, {"2", "a"}});
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(t, target("y")), "single class", "at least two");
}

TEST(TabularEncoder, AcceptsHandBuiltTablesWithoutLinesOrTypes) {
  TextTable bare;
  bare.header = {"x", "y"};
  bare.rows = {{"1", "a"}, {"2", "b"}, {"z", "a"}};
  bare.source = "bare";
  const Dataset data = TabularEncoder::fit(bare, target("y")).transform(bare);
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"x=1", "x=2"}));
  bare.rows.push_back({"1"});
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(bare, target("y")), "row 4", "1 cells");
}

TEST(TabularOptions, ValidateNamesTheConflict) {
  EXPECT_INVALID_ARGUMENT(TabularOptions().validate(), "target: empty");
  TabularOptions options = target("y");
  options.drop = {"y"};
  EXPECT_INVALID_ARGUMENT(options.validate(), "target = 'y'", "drop");
}

TEST(MissingPolicy, RoundTripsThroughStrings) {
  for (MissingPolicy policy : {MissingPolicy::kDrop, MissingPolicy::kLevel}) {
    EXPECT_EQ(parse_enum<MissingPolicy>(to_string(policy)), policy);
  }
  EXPECT_INVALID_ARGUMENT(parse_enum<MissingPolicy>("impute"), "'impute'", "drop, level");
}

TEST(TabularEncoder, EncodesACsvFileEndToEnd) {
  TempDir dir;
  const TextTable t = read_csv(dir.write("t.csv", "SEX,hours,label\nMale,40,1\nFemale,20,0\n"));
  const Dataset data = TabularEncoder::fit(t, target("label")).transform(t);
  EXPECT_EQ(data.feature_names, (std::vector<std::string>{"SEX=Female", "hours"}));
  EXPECT_EQ(data.source, dir.file("t.csv"));
}

// A number beyond a double's range is still a number: the column stays numeric and the cell is
// refused where it is, in training or in a test part, never turned into a one-hot level.
TEST(TabularEncoder, RefusesNumbersBeyondADoublesRangeWhereTheyAre) {
  const TextTable train = table({"x", "w", "y"}, {{"1", "2", "a"}, {"1e400", "3", "b"}, {"3", "4", "a"}});
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(train, target("y")), "'table.csv' line 3, column 1",
                          "column 'x' holds '1e400'", "not finite");
  const TextTable fine = table({"x", "w", "y"}, {{"1", "2", "a"}, {"2", "3", "b"}});
  const TabularEncoder encoder = TabularEncoder::fit(fine, target("y"));
  ASSERT_FALSE(encoder.columns()[0].categorical);
  const TextTable test = table({"x", "w", "y"}, {{"1", "2", "a"}, {"2", "-1e400", "b"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "line 3, column 2", "column 'w' holds '-1e400'");
  // A number too small for a double is that number rounded, not an error.
  const TextTable tiny = table({"x", "y"}, {{"1e-400", "a"}, {"1", "b"}});
  EXPECT_EQ(TabularEncoder::fit(tiny, target("y")).transform(tiny).d(), 1);
}

TEST(TabularEncoder, RefusesMagnitudesWhoseSquaresOverflow) {
  const TextTable t = table({"x", "y"}, {{"1e300", "a"}, {"2e300", "b"}, {"1", "a"}});
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(t, target("y")), "line 2, column 1", "'1e300'", "beyond +-1e150",
                          "rescale");
  const TextTable large = table({"x", "y"}, {{"1e149", "a"}, {"-1e149", "b"}, {"0", "a"}});
  const TabularEncoder encoder = TabularEncoder::fit(large, target("y"));
  EXPECT_NEAR(encoder.columns()[0].scale / (std::sqrt(2.0 / 3.0) * 1e149), 1.0, 1e-12);
  EXPECT_NEAR(encoder.transform(large).X(0, 0), std::sqrt(1.5), 1e-12);
}

TEST(TabularEncoder, RefusesAnEncodingBeyondTheMemoryBudgetBeforeAllocatingIt) {
  // 20 categorical columns of 10 levels each encode 10 rows into 180 columns: 14400 bytes.
  std::vector<std::string> header;
  for (int j = 0; j < 20; ++j) header.push_back("c" + std::to_string(j));
  header.push_back("y");
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < 10; ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < 20; ++j) row.push_back("level" + std::to_string(i));
    row.push_back(i % 2 ? "a" : "b");
    rows.push_back(row);
  }
  const TextTable wide = table(header, rows);
  TabularOptions options = target("y");
  options.max_memory = ByteSize{14400};
  EXPECT_EQ(TabularEncoder::fit(wide, options).transform(wide).d(), 180);
  options.max_memory = ByteSize{10000};
  EXPECT_MEMORY_LIMIT(TabularEncoder::fit(wide, options), "encoding 'table.csv' (10 rows x 180 columns",
                      "from 21 in the file", "more than max_memory = 10000");
}

}  // namespace
}  // namespace filkit
