// Built-in tabular datasets with a sensitive attribute: the roles that IWPC (a regression with a
// multi-level sensitive attribute) and UCI Adult (a classification with a binary one) play in the
// attribute-inference experiments of the FIL paper (section 6.4, figures 6 and 7).
//
//   income-regression      kernlab's `income` (8993 rows, all categorical), target INCOME coded
//                          by the rank of its range (1 = under $10,000 ... 9 = $75,000 or more),
//                          sensitive MARITAL.STATUS (5 levels: Divorced, Married, Single,
//                          Together, Widowed).
//   income-classification  the same rows, target INCOME >= $50,000 (the ranges [50,000-75,000)
//                          and [75,000-): class 1 ">=50000", else class 0 "<50000"), sensitive
//                          MARITAL.STATUS combined into Married / Not married, as the paper
//                          combines Adult's marital levels ("Together", cohabiting, is not married).
//   credit-g               Weka's German credit ARFF (1000 rows), target `class` (0 bad, 1 good),
//                          sensitive `sex`, read from personal_status ("male ..." / "female ..."),
//                          which it replaces: its marital part mixes levels ("female
//                          div/dep/mar") and cannot be split into married / not married.
//
// DUAL.INCOMES is left out of both income tasks: its level "Not Married" spells out the marital
// status, as Adult's relationship column does (which the paper removes for the same reason).
// Every attribute is one-hot encoded with its last level dropped (TabularEncoder); numeric
// credit-g columns are standardised with training statistics. Rows with a missing cell are
// dropped by default (6876 of income's 8993 rows are complete) or given a level of their own
// (DataOptions::missing_policy). The split is DataOptions::test_fraction (default 0.2) by
// shuffle_split with DataOptions::seed; test rows with a level that never occurs in the training
// rows (the model has no weight for it) are left out too by default, counted in the test part's
// dropped_rows (DataOptions::unseen_levels).
//
// Files: income from $FILKIT_DATA_DIR/income.csv, else ${XDG_CACHE_HOME:-$HOME/.cache}/filkit/
// income.csv (exported from the Debian package r-cran-kernlab by scripts/setup.sh); credit-g from
// $FILKIT_DATA_DIR/credit-g.arff, /usr/share/doc/weka/examples/credit-g.arff (Debian package
// weka), else the cache (where scripts/setup.sh unpacks a gzipped copy).
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/data/text_table.hpp"

#include <string>
#include <vector>

namespace filkit {

enum class TabularTask { kRegression, kClassification };
template <>
struct EnumNames<TabularTask> {
  static constexpr const char* what = "tabular task";
  static constexpr std::pair<TabularTask, const char*> names[] = {{TabularTask::kRegression, "regression"},
                                                                  {TabularTask::kClassification, "classification"}};
};

/// One built-in tabular dataset and the task it poses.
struct TabularDatasetInfo {
  std::string name;  ///< e.g. "income-regression"
  std::string file;  ///< source file name: "income.csv" or "credit-g.arff"
  TabularTask task = TabularTask::kClassification;
  std::string target;                 ///< target column of the source file
  std::string sensitive_attribute;    ///< the attribute attribute-inference attacks target
  std::vector<std::string> left_out;  ///< source columns not used as features
  std::string description;
};

/// Every built-in tabular dataset, in a fixed order.
const std::vector<TabularDatasetInfo>& tabular_datasets();
std::vector<std::string> tabular_dataset_names();
/// The dataset called `name`, or nullptr.
const TabularDatasetInfo* find_tabular_dataset(const std::string& name);

/// Path of the dataset's source file. Throws std::invalid_argument naming the searched paths and
/// `scripts/setup.sh` when it is missing, or listing the known names for an unknown `name`.
std::string tabular_dataset_file(const std::string& name);

/// The source table rewritten for the task: target coded, sensitive attribute derived, left-out
/// columns removed. Throws std::invalid_argument naming the file and line of an unknown target
/// or marital level.
TextTable tabular_task_table(const TextTable& source, const TabularDatasetInfo& info);

/// Reads, rewrites, splits and encodes `options.data` (a tabular_dataset_names() entry); the
/// encoder is fitted on the training rows. The hook load_dataset() calls. Throws
/// std::invalid_argument if target, categorical or drop are set (the dataset defines them),
/// if regression is set for a classification task, or classes for a regression task.
DatasetSplit load_tabular_dataset(const DataOptions& options);

}  // namespace filkit
