// Encoding a text table into (X, y): one-hot categorical columns, standardised numeric ones,
// fitted on the training rows only.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace filkit {

/// What to do with a row that has a missing cell in a used column.
enum class MissingPolicy {
  kDrop,   ///< leave the row out (counted in Dataset::dropped_rows)
  kLevel,  ///< categorical columns: "<missing>" becomes a level of its own; a missing numeric
           ///< cell is an error; a row with a missing target is still left out
};
template <>
struct EnumNames<MissingPolicy> {
  static constexpr const char* what = "missing policy";
  static constexpr std::pair<MissingPolicy, const char*> names[] = {{MissingPolicy::kDrop, "drop"},
                                                                    {MissingPolicy::kLevel, "level"}};
};

/// What to do with a row whose categorical level (or class) never occurs in the training rows,
/// the levels the encoder was fitted on: only rows encoded after the fit (the test split) can
/// have one. A rare level can fall entirely into the test split for some seeds.
enum class UnseenLevelPolicy {
  kDrop,   ///< leave the row out (counted in Dataset::dropped_rows and Dataset::unseen_level_rows)
  kZero,   ///< an all-zero one-hot block, the encoding of the column's dropped (last) level; a row
           ///< whose class is unseen is still left out (a class cannot be zeroed)
  kError,  ///< std::invalid_argument naming the file, line, column and level
};
template <>
struct EnumNames<UnseenLevelPolicy> {
  static constexpr const char* what = "unseen-level policy";
  static constexpr std::pair<UnseenLevelPolicy, const char*> names[] = {
      {UnseenLevelPolicy::kDrop, "drop"}, {UnseenLevelPolicy::kZero, "zero"}, {UnseenLevelPolicy::kError, "error"}};
};

/// How a table is turned into (X, y).
struct TabularOptions {
  std::string target;                                          ///< target column name (required)
  std::vector<std::string> categorical;                        ///< columns to treat as categorical even if numeric;
                                                               ///< non-numeric columns are always categorical
  std::vector<std::string> drop;                               ///< columns to ignore
  bool target_categorical = true;                              ///< classification (class indices) vs regression
  std::vector<std::string> missing = {"", "NA", "?"};          ///< spellings of a missing value
  MissingPolicy missing_policy = MissingPolicy::kDrop;         ///< default: drop incomplete rows
  UnseenLevelPolicy unseen_levels = UnseenLevelPolicy::kDrop;  ///< default: drop rows with unseen levels
  /// The memory budget: an encoded X (rows x one-hot width doubles) larger than this is refused
  /// before it is allocated.
  ByteSize max_memory = default_memory_budget();
  /// Throws std::invalid_argument if the target is empty, dropped, or categorical for regression.
  void validate() const;
};

/// The level name a missing categorical cell gets under MissingPolicy::kLevel.
inline const std::string kMissingLevel = "<missing>";

/// An encoder fitted on training rows: levels of each categorical column (one-hot, last level
/// dropped), mean and standard deviation of each numeric column, target classes.
/// Applying it to test rows uses the training statistics; a level or class not seen in training
/// is handled by TabularOptions::unseen_levels.
///
/// Levels are sorted numerically when all of them are numbers, else lexicographically;
/// kMissingLevel, when present, is last and so is the dropped (all-zero) level. Numeric
/// columns become (x - mean) / scale with the training mean and population standard deviation
/// (scale 1 when that is 0). Output columns follow the table's column order; feature names are
/// "age" for numeric columns and "SEX=Male" for one-hot columns.
class TabularEncoder {
 public:
  /// Throws std::invalid_argument for unknown column names (listing the available ones),
  /// non-numeric, NaN/Inf or too large (kMaxInputMagnitude) cells in numeric columns, no complete
  /// rows, fewer than two target classes, or an encoding of the training rows beyond max_memory.
  static TabularEncoder fit(const TextTable& train, const TabularOptions& options);
  /// Encodes `table` (columns found by name). Throws std::invalid_argument naming the column,
  /// value and line for unseen levels or classes (UnseenLevelPolicy::kError), non-numeric, NaN/Inf
  /// or too large numeric cells, and before allocating when X would exceed max_memory.
  Dataset transform(const TextTable& table) const;

  struct Column {
    std::string name;
    bool categorical = false;
    std::vector<std::string> levels;  // categorical: levels seen in training, the last dropped
    double mean = 0.0, scale = 1.0;   // numeric: standardisation
  };
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const TabularOptions& options() const { return options_; }
  /// The number of columns of an encoded X: one a numeric column, levels - 1 a categorical one.
  Index encoded_width() const;

 private:
  TabularOptions options_;
  std::vector<Column> columns_;       // feature columns in output order
  std::vector<std::string> classes_;  // target levels (classification)
};

/// A table's seeded train/test split (shuffle_split with `test_fraction` and `seed`), encoded by an
/// encoder fitted on its train rows only: what every tabular loader does once it has its table.
DatasetSplit encode_split(const TextTable& table, const TabularOptions& options, double test_fraction,
                          std::uint64_t seed);

}  // namespace filkit
