// Turning a text table into (X, y): one-hot and standardised columns, the column map, missing
// values, classes, and every error on bad cells.
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"
#include "filkit/data/tabular_encoder.hpp"

#include "test_util.hpp"

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

const TextTable kPeople = table({"age", "sex", "income"}, {{"20", "Male", "low"},
                                                          {"30", "Female", "high"},
                                                          {"40", "Male", "high"},
                                                          {"50", "Other", "low"}});

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

const TextTable kWithMissing = table({"x", "c", "y"}, {{"1", "a", "u"},
                                                      {"NA", "b", "v"},
                                                      {"3", "?", "u"},
                                                      {"4", "b", ""},
                                                      {"5", "a", "v"}});

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
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, target("salary")), "'salary'",
                          "'age', 'sex', 'income'");
}

TEST(TabularEncoder, RejectsUnknownCategoricalOrDroppedColumn) {
  TabularOptions options = target("income");
  options.drop = {"height"};
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, options), "'height'", "drop");
}

TEST(TabularEncoder, RejectsUnseenTestLevelNamingColumnLevelAndLine) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, target("income"));
  const TextTable test = table({"age", "sex", "income"}, {{"1", "Male", "low"}, {"2", "Robot", "low"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "'Robot'", "column 'sex'", "line 3");
}

TEST(TabularEncoder, RejectsUnseenTestClass) {
  const TabularEncoder encoder = TabularEncoder::fit(kPeople, target("income"));
  const TextTable test = table({"age", "sex", "income"}, {{"1", "Male", "medium"}});
  EXPECT_INVALID_ARGUMENT(encoder.transform(test), "class 'medium'", "column 'income'", "line 2");
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
  EXPECT_INVALID_ARGUMENT(TabularEncoder::fit(kPeople, options).transform(kPeople), "column 'sex'",
                          "'Male'", "line 2");
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
  EXPECT_INVALID_ARGUMENT(TabularOptions().validate(), "target is empty");
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

}  // namespace
}  // namespace filkit
