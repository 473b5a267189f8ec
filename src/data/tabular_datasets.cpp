#include "filkit/data/tabular_datasets.hpp"

#include "filkit/base/errors.hpp"
#include "base/environment.hpp"
#include "base/parsing.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

const std::vector<TabularDatasetInfo>& tabular_datasets() {
  static const std::vector<TabularDatasetInfo> list = {
      {"income-regression",
       "income.csv",
       TabularTask::kRegression,
       "INCOME",
       "MARITAL.STATUS",
       {"DUAL.INCOMES"},
       "kernlab income: least squares on the income range's rank 1..9, sensitive MARITAL.STATUS (5 levels)"},
      {"income-classification",
       "income.csv",
       TabularTask::kClassification,
       "INCOME",
       "MARITAL.STATUS",
       {"DUAL.INCOMES"},
       "kernlab income: income >= $50,000 or not, sensitive MARITAL.STATUS as Married / Not married"},
      {"credit-g",
       "credit-g.arff",
       TabularTask::kClassification,
       "class",
       "sex",
       {},
       "Weka German credit: class good or bad, sensitive sex (from personal_status)"},
  };
  return list;
}

std::vector<std::string> tabular_dataset_names() {
  std::vector<std::string> names;
  for (const TabularDatasetInfo& info : tabular_datasets()) names.push_back(info.name);
  return names;
}

const TabularDatasetInfo* find_tabular_dataset(const std::string& name) {
  for (const TabularDatasetInfo& info : tabular_datasets())
    if (info.name == name) return &info;
  return nullptr;
}

namespace {

std::vector<std::string> candidate_files(const TabularDatasetInfo& info) {
  std::vector<std::string> files;
  if (const std::string root = environment_variable("FILKIT_DATA_DIR"); !root.empty())
    files.push_back((fs::path(root) / info.file).string());
  if (info.file == "credit-g.arff") files.push_back("/usr/share/doc/weka/examples/credit-g.arff");
  files.push_back(filkit_cache_dir() + "/" + info.file);
  return files;
}

const TabularDatasetInfo& info_or_throw(const std::string& name) {
  const TabularDatasetInfo* info = find_tabular_dataset(name);
  if (info == nullptr)
    throw OptionError::with_text(
        "data", "unknown tabular dataset '" + name + "'; known: " + detail::quoted_list(tabular_dataset_names()));
  return *info;
}

std::size_t column_of(const TextTable& table, const std::string& name) {
  const auto found = std::find(table.header.begin(), table.header.end(), name);
  if (found == table.header.end())
    throw DataError("'" + table.source + "' has no column '" + detail::visible(name) +
                    "'; its columns: " + detail::quoted_list(table.header));
  return static_cast<std::size_t>(found - table.header.begin());
}

[[noreturn]] void bad_cell(const TextTable& table, std::size_t row, const std::string& column,
                           const std::string& what) {
  const std::string where =
      row < table.lines.size() ? "line " + std::to_string(table.lines[row]) : "row " + std::to_string(row + 1);
  throw DataError("'" + table.source + "' " + where + ": column '" + column + "': " + what);
}

// kernlab's INCOME levels in increasing order (thousands of dollars, "." the thousands separator).
const std::array<std::string, 9> kIncomeLevels = {"-10.000)",        "[10.000-15.000)", "[15.000-20.000)",
                                                  "[20.000-25.000)", "[25.000-30.000)", "[30.000-40.000)",
                                                  "[40.000-50.000)", "[50.000-75.000)", "[75.000-"};
constexpr std::size_t kFirstLevelAbove50000 = 7;

bool is_missing(const std::string& cell) { return cell.empty() || cell == "NA" || cell == "?"; }

// Rewrites every present cell of `column` with `rewrite(row, cell)`; missing cells stay missing.
template <class Rewrite>
void rewrite_column(TextTable& table, const std::string& column, Rewrite rewrite) {
  const std::size_t j = column_of(table, column);
  for (std::size_t row = 0; row < table.rows.size(); ++row) {
    std::string& cell = table.rows[row][j];
    if (!is_missing(cell)) cell = rewrite(row, cell);
  }
}

void code_income(TextTable& table, TabularTask task) {
  rewrite_column(table, "INCOME", [&](std::size_t row, const std::string& cell) -> std::string {
    const auto found = std::find(kIncomeLevels.begin(), kIncomeLevels.end(), cell);
    if (found == kIncomeLevels.end())
      bad_cell(table, row, "INCOME",
               "unknown income range '" + cell + "'; expected one of " +
                   detail::quoted_list({kIncomeLevels.begin(), kIncomeLevels.end()}));
    const auto rank = static_cast<std::size_t>(found - kIncomeLevels.begin());
    if (task == TabularTask::kRegression) return std::to_string(rank + 1);
    return rank >= kFirstLevelAbove50000 ? ">=50000" : "<50000";
  });
}

void combine_marital_status(TextTable& table) {
  static const std::vector<std::string> known = {"Married", "Together", "Divorced", "Widowed", "Single"};
  rewrite_column(table, "MARITAL.STATUS", [&](std::size_t row, const std::string& cell) -> std::string {
    if (std::find(known.begin(), known.end(), cell) == known.end())
      bad_cell(table, row, "MARITAL.STATUS",
               "unknown level '" + cell + "'; expected one of " + detail::quoted_list(known));
    return cell == "Married" ? "Married" : "Not married";
  });
}

void derive_sex(TextTable& table) {
  rewrite_column(table, "personal_status", [&](std::size_t row, const std::string& cell) -> std::string {
    if (cell.rfind("male ", 0) == 0) return "male";
    if (cell.rfind("female ", 0) == 0) return "female";
    bad_cell(table, row, "personal_status", "'" + cell + "' starts with neither 'male ' nor 'female '");
  });
  table.header[column_of(table, "personal_status")] = "sex";
}

void remove_column(TextTable& table, const std::string& name) {
  const std::size_t j = column_of(table, name);
  table.header.erase(table.header.begin() + static_cast<long>(j));
  if (j < table.types.size()) table.types.erase(table.types.begin() + static_cast<long>(j));
  for (auto& row : table.rows) row.erase(row.begin() + static_cast<long>(j));
}

void check_options(const DataOptions& options, const TabularDatasetInfo& info) {
  if (!options.target.empty() || !options.categorical.empty() || !options.drop.empty())
    throw OptionError::with_text("target", "target, categorical and drop cannot be set for the built-in dataset '" +
                                               info.name + "': it defines them (target '" + info.target + "')");
  if (options.regression && info.task == TabularTask::kClassification)
    throw OptionError::with_text("regression", "regression = true, but '" + info.name + "' is a classification task");
  if (!options.classes.empty() && info.task == TabularTask::kRegression)
    throw OptionError::with_text("classes", "classes are set, but '" + info.name + "' is a regression task");
}

}  // namespace

std::string tabular_dataset_file(const std::string& name) {
  const TabularDatasetInfo& info = info_or_throw(name);
  const std::vector<std::string> files = candidate_files(info);
  for (const std::string& file : files)
    if (fs::is_regular_file(file)) return file;
  throw ResourceError("built-in dataset '" + name + "' not found; searched " + detail::quoted_list(files) +
                      ". Run scripts/setup.sh (it installs r-cran-kernlab and weka and exports " +
                      "income.csv), or set FILKIT_DATA_DIR to a directory holding " + info.file);
}

TextTable tabular_task_table(const TextTable& source, const TabularDatasetInfo& info) {
  TextTable table = source;
  if (info.file == "income.csv") {
    code_income(table, info.task);
    if (info.task == TabularTask::kClassification) combine_marital_status(table);
  } else {
    derive_sex(table);
  }
  for (const std::string& column : info.left_out) remove_column(table, column);
  return table;
}

DatasetSplit load_tabular_dataset(const DataOptions& options) {
  const TabularDatasetInfo& info = info_or_throw(options.data);
  check_options(options, info);
  const std::string path = tabular_dataset_file(info.name);
  const TextTable source =
      info.file == "income.csv" ? read_csv(path, options.max_memory) : read_arff(path, options.max_memory);
  const TextTable table = tabular_task_table(source, info);

  TabularOptions tabular;
  tabular.target = info.target;
  tabular.target_categorical = info.task == TabularTask::kClassification;
  tabular.missing_policy = options.missing_policy;
  tabular.unseen_levels = options.unseen_levels;
  tabular.max_memory = options.max_memory;
  DatasetSplit split = encode_split(table, tabular, options.test_fraction, options.seed);
  for (Dataset* part : {&split.train, &split.test}) part->source = info.name + " (" + path + ")";
  return split;
}

}  // namespace filkit
