// The built-in tabular datasets: task coding on small fixtures written like the real files, the
// error when a file is missing, and (when installed) the real income and credit-g data.
#include "filkit/data/tabular_datasets.hpp"

#include "test_util.hpp"

#include <algorithm>
#include <string>

namespace filkit {
namespace {

using testing::ScopedEnvironment;
using testing::TempDir;

// Rows as kernlab's income exports them (write.csv: quoted, NA as an empty cell).
const char* kIncomeHeader =
    "\"INCOME\",\"SEX\",\"MARITAL.STATUS\",\"AGE\",\"EDUCATION\",\"OCCUPATION\",\"AREA\",\"DUAL.INCOMES\","
    "\"HOUSEHOLD.SIZE\",\"UNDER18\",\"HOUSEHOLDER\",\"HOME.TYPE\",\"ETHNIC.CLASS\",\"LANGUAGE\"\n";

std::string income_row(const std::string& income, const std::string& sex, const std::string& marital) {
  return "\"" + income + "\",\"" + sex + "\"," + (marital.empty() ? "" : "\"" + marital + "\"") +
         ",\"25-34\",\"College graduate\",\"Homemaker\",\"10+ years\",\"No\",\"Three\",\"None\",\"Own\","
         "\"House\",\"White\",\"English\"\n";
}

std::string income_fixture() {
  return std::string(kIncomeHeader) + income_row("-10.000)", "F", "Single") +
         income_row("[40.000-50.000)", "M", "Together") + income_row("[50.000-75.000)", "F", "Married") +
         income_row("[75.000-", "M", "Divorced") + income_row("[10.000-15.000)", "F", "") +
         income_row("[30.000-40.000)", "M", "Widowed");
}

DataOptions whole(const std::string& name) {
  DataOptions options;
  options.data = name;
  options.test_fraction = 0.0;
  return options;
}

TEST(TabularDatasets, IncomeRegressionCodesTheRankOfTheIncomeRange) {
  const TempDir dir;
  dir.write("income.csv", income_fixture());
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  const DatasetSplit split = load_dataset(whole("income-regression"));
  const Dataset& train = split.train;
  ASSERT_EQ(train.n(), 5);  // the row with a missing marital status is dropped
  EXPECT_EQ(train.dropped_rows, 1);
  EXPECT_EQ(train.y, (VectorXd(5) << 1, 7, 8, 9, 6).finished());
  EXPECT_TRUE(train.class_names.empty());
  const AttributeColumns& marital = train.attribute("MARITAL.STATUS");
  EXPECT_EQ(marital.levels, (std::vector<std::string>{"Divorced", "Married", "Single", "Together"}));
  EXPECT_EQ(marital.dropped_level, "Widowed");
  EXPECT_THROW(train.attribute("DUAL.INCOMES"), std::invalid_argument);  // it spells out marital status
  EXPECT_NE(train.source.find("income-regression"), std::string::npos);
}

TEST(TabularDatasets, IncomeClassificationSplitsAt50000AndCombinesMaritalLevels) {
  const TempDir dir;
  dir.write("income.csv", income_fixture());
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  DataOptions options = whole("income-classification");
  options.missing_policy = MissingPolicy::kLevel;  // keeps the row without a marital status
  const Dataset train = load_dataset(options).train;
  ASSERT_EQ(train.n(), 6);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"<50000", ">=50000"}));
  EXPECT_EQ(train.y, (VectorXd(6) << 0, 0, 1, 1, 0, 0).finished());
  const AttributeColumns& married = train.attribute("MARITAL.STATUS");
  EXPECT_EQ(married.levels, (std::vector<std::string>{"Married", "Not married"}));
  EXPECT_EQ(married.dropped_level, kMissingLevel);
  // Single, Together, Married, Divorced, (missing), Widowed.
  const std::vector<double> first = {0, 0, 1, 0, 0, 0}, second = {1, 1, 0, 1, 0, 1};
  for (Index i = 0; i < 6; ++i) {
    EXPECT_EQ(train.X(i, married.columns[0]), first[static_cast<std::size_t>(i)]) << i;
    EXPECT_EQ(train.X(i, married.columns[1]), second[static_cast<std::size_t>(i)]) << i;
  }
}

TEST(TabularDatasets, CreditGReplacesPersonalStatusBySex) {
  const TempDir dir;
  dir.write("credit-g.arff",
            "@relation german_credit\n"
            "@attribute duration numeric\n"
            "@attribute personal_status { 'male div/sep', 'female div/dep/mar', 'male single', 'male mar/wid', "
            "'female single'}\n"
            "@attribute class { good, bad}\n"
            "@data\n"
            "6,'male single',good\n48,'female div/dep/mar',bad\n12,'male mar/wid',good\n24,'female single',bad\n");
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  const Dataset train = load_dataset(whole("credit-g")).train;
  ASSERT_EQ(train.n(), 4);
  EXPECT_EQ(train.class_names, (std::vector<std::string>{"bad", "good"}));
  EXPECT_EQ(train.y, (VectorXd(4) << 1, 0, 1, 0).finished());
  const AttributeColumns& sex = train.attribute("sex");
  EXPECT_EQ(sex.levels, std::vector<std::string>{"female"});
  EXPECT_EQ(sex.dropped_level, "male");
  EXPECT_EQ(train.X.col(sex.columns[0]), (VectorXd(4) << 0, 1, 0, 1).finished());
  EXPECT_THROW(train.attribute("personal_status"), std::invalid_argument);
}

TEST(TabularDatasets, AnUnknownIncomeRangeNamesFileLineAndColumn) {
  const TempDir dir;
  const std::string path = dir.write("income.csv", std::string(kIncomeHeader) + income_row("-10.000)", "F", "Single") +
                                                       income_row("[100.000-", "M", "Single"));
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  EXPECT_INVALID_ARGUMENT(load_dataset(whole("income-regression")), path, "line 3", "INCOME", "[100.000-");
}

TEST(TabularDatasets, AMissingFileNamesTheSearchedPathsAndTheSetupScript) {
  const TempDir dir;
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("nothing"));
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.file("cache"));
  EXPECT_THROW_NAMING(load_dataset(whole("income-classification")), ResourceError, "scripts/setup.sh", "income.csv",
                      dir.file("cache") + "/filkit/income.csv");
}

TEST(TabularDatasets, OptionsThatTheDatasetDefinesAreRejected) {
  DataOptions options = whole("income-classification");
  options.regression = true;
  EXPECT_INVALID_ARGUMENT(load_tabular_dataset(options), "regression", "classification");
  options = whole("income-regression");
  options.classes = {0, 1};
  EXPECT_INVALID_ARGUMENT(load_tabular_dataset(options), "classes", "regression");
  options = whole("credit-g");
  options.target = "duration";
  EXPECT_INVALID_ARGUMENT(load_tabular_dataset(options), "target", "credit-g");
  EXPECT_INVALID_ARGUMENT(tabular_dataset_file("income"), "unknown", "income-regression");
}

TEST(TabularTask, RoundTripsThroughStrings) {
  for (TabularTask task : {TabularTask::kRegression, TabularTask::kClassification})
    EXPECT_EQ(parse_enum<TabularTask>(to_string(task)), task);
  EXPECT_INVALID_ARGUMENT(parse_enum<TabularTask>("ranking"), "ranking", "regression");
}

TEST(TabularDatasets, TestRowsWithLevelsUnseenInTrainingAreLeftOut) {
  const TempDir dir;
  std::string csv = kIncomeHeader;
  for (int i = 0; i < 30; ++i) csv += income_row(i % 2 ? "[75.000-" : "-10.000)", i % 3 ? "F" : "M", "Single");
  csv += income_row("-10.000)", "F", "Widowed");  // the only Widowed row
  dir.write("income.csv", csv);
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  // Find a seed that puts the Widowed row into the test part.
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    DataOptions options = whole("income-regression");
    options.test_fraction = 0.3;
    options.seed = seed;
    const TrainTestIndices parts = shuffle_split(31, 0.3, seed);
    if (std::find(parts.test.begin(), parts.test.end(), 30) == parts.test.end()) continue;
    const DatasetSplit split = load_dataset(options);  // unseen_levels = drop, the default
    EXPECT_EQ(split.test.n() + split.test.dropped_rows, static_cast<Index>(parts.test.size()));
    EXPECT_EQ(split.test.dropped_rows, 1);
    EXPECT_EQ(split.test.unseen_level_rows, 1);
    options.unseen_levels = UnseenLevelPolicy::kZero;  // kept, its marital block all zero
    const DatasetSplit zero = load_dataset(options);
    EXPECT_EQ(zero.test.n(), static_cast<Index>(parts.test.size()));
    EXPECT_EQ(zero.test.unseen_level_rows, 1);
    options.unseen_levels = UnseenLevelPolicy::kError;
    EXPECT_INVALID_ARGUMENT(load_dataset(options), "'Widowed'", "MARITAL.STATUS", "not seen in the training rows");
    return;
  }
  FAIL() << "no seed puts row 30 into the test part";
}

bool installed(const std::string& name) {
  try {
    tabular_dataset_file(name);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

TEST(RealTabularData, IncomeHas6876CompleteRowsAndAReproducibleSplit) {
  if (!installed("income-regression")) GTEST_SKIP() << "income.csv not exported (scripts/setup.sh)";
  DataOptions options;
  options.data = "income-regression";
  options.seed = 7;
  const DatasetSplit split = load_dataset(options);
  // 6876 complete rows, less test rows whose level never occurs in training (rare levels).
  EXPECT_LE(split.train.n() + split.test.n(), 6876);
  EXPECT_GE(split.train.n() + split.test.n(), 6870);
  EXPECT_EQ(split.train.n() + split.test.n() + split.train.dropped_rows + split.test.dropped_rows, 8993);
  EXPECT_NEAR(static_cast<double>(split.test.n()) / 6876.0, 0.2, 0.02);
  EXPECT_EQ(split.train.attribute("MARITAL.STATUS").columns.size(), 4u);
  EXPECT_GE(split.train.y.minCoeff(), 1.0);
  EXPECT_LE(split.train.y.maxCoeff(), 9.0);
  const DatasetSplit again = load_dataset(options);
  EXPECT_EQ(again.train.X, split.train.X);
  options.seed = 8;
  // Another split: other rows (Eigen compares vectors of one size only).
  const VectorXd other = load_dataset(options).train.y;
  EXPECT_FALSE(other.size() == split.train.y.size() && other == split.train.y);

  options.data = "income-classification";
  const Dataset classes = load_dataset(options).train;
  EXPECT_EQ(classes.attribute("MARITAL.STATUS").columns.size(), 1u);
  EXPECT_NEAR(classes.y.mean(), 0.28, 0.03);  // share of households at $50,000 or more among complete rows
}

TEST(RealTabularData, CreditGHas1000RowsAndABinarySex) {
  if (!installed("credit-g")) GTEST_SKIP() << "weka's credit-g.arff not installed (scripts/setup.sh)";
  DataOptions options;
  options.data = "credit-g";
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n() + split.test.n() + split.test.dropped_rows, 1000);
  EXPECT_EQ(split.train.n(), 800);
  EXPECT_EQ(split.train.attribute("sex").columns.size(), 1u);
  EXPECT_NEAR(split.train.y.mean(), 0.7, 0.03);  // 700 good of 1000
}

}  // namespace
}  // namespace filkit
