#include "filkit/data/tabular_encoder.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include "filkit/base/summary.hpp"

#include "base/parsing.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace filkit {

namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The column `name` of `table`. A name missing from the table is an OptionError about `option` when
// an option named it (the training table), else a DataError (a test table lacking a training column).
std::size_t column_index(const TextTable& table, const std::string& name, const std::string& role,
                         const char* option = nullptr) {
  const auto found = std::find(table.header.begin(), table.header.end(), name);
  if (found == table.header.end()) {
    const std::string message = "'" + table.source + "' has no column '" + detail::visible(name) + "' (" + role +
                                "); available: " + detail::quoted_list(table.header);
    if (option != nullptr) throw OptionError::with_text(option, message);
    throw DataError(message);
  }
  return static_cast<std::size_t>(found - table.header.begin());
}

// "line 5" (or "row 4" of a hand-built table), and ", column 3" (counted from 1, as editors and
// spreadsheets count) when the fault is in one cell.
std::string position(const TextTable& table, std::size_t row, std::optional<std::size_t> column) {
  std::string where =
      row < table.lines.size() ? "line " + std::to_string(table.lines[row]) : "row " + std::to_string(row + 1);
  if (column) where += ", column " + std::to_string(*column + 1);
  return where;
}

[[noreturn]] void fail_at(const TextTable& table, std::size_t row, const std::string& what,
                          std::optional<std::size_t> column = std::nullopt) {
  throw DataError("'" + table.source + "' " + position(table, row, column) + ": " + what);
}

// Tables built by hand may leave `lines` and `types` empty; anything else must fit the header.
void check_shape(const TextTable& table) {
  const auto fail = [&](const std::string& what) {
    throw DataError("malformed table '" + table.source + "': " + what);
  };
  if (!table.lines.empty() && table.lines.size() != table.rows.size()) {
    fail(std::to_string(table.lines.size()) + " line numbers for " + std::to_string(table.rows.size()) + " rows");
  }
  if (!table.types.empty() && table.types.size() != table.header.size()) {
    fail(std::to_string(table.types.size()) + " column types for " + std::to_string(table.header.size()) + " columns");
  }
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    if (table.rows[i].size() != table.header.size()) {
      fail_at(table, i,
              std::to_string(table.rows[i].size()) + " cells, but the header has " +
                  std::to_string(table.header.size()) + " columns");
    }
  }
}

// The value of a numeric cell; non-numbers, NaN, Inf, numbers beyond a double's range and
// magnitudes beyond kMaxInputMagnitude are errors naming the line and column.
double numeric_cell(const TextTable& table, std::size_t row, std::size_t column) {
  const std::string& cell = table.rows[row][column];
  const auto value = detail::parse_number(cell);
  const std::string name = "column '" + table.header[column] + "'";
  if (!value) fail_at(table, row, name + " is numeric, found '" + cell + "'", column);
  const std::string problem = input_value_problem(*value);
  if (!problem.empty()) fail_at(table, row, name + " holds '" + cell + "', which " + problem, column);
  return *value;
}

// Numerically when every level is a number ("2" before "10"), else lexicographically; the
// missing level last, so that it is the dropped (all-zero) one.
void sort_levels(std::vector<std::string>& levels) {
  const auto missing = std::remove(levels.begin(), levels.end(), kMissingLevel);
  const bool had_missing = missing != levels.end();
  levels.erase(missing, levels.end());
  const bool numeric =
      std::all_of(levels.begin(), levels.end(), [](const std::string& l) { return detail::parse_number(l); });
  if (numeric) {
    std::sort(levels.begin(), levels.end(), [](const std::string& a, const std::string& b) {
      const double x = *detail::parse_number(a), y = *detail::parse_number(b);
      return x != y ? x < y : a < b;
    });
  } else {
    std::sort(levels.begin(), levels.end());
  }
  if (had_missing) levels.push_back(kMissingLevel);
}

// Where the encoder's columns are in one particular table (found by name).
struct ColumnPositions {
  std::size_t target = 0;
  std::vector<std::size_t> features;
};

}  // namespace

void TabularOptions::validate() const {
  if (target.empty()) option_error("target", "empty; name the target column");
  if (contains(drop, target)) {
    option_error("target", "'" + target + "'", "is also in " + option_name("drop") + "; it cannot be both");
  }
  if (!target_categorical && contains(categorical, target)) {
    option_error("target", "'" + target + "'",
                 "is listed as " + option_name("categorical") + " but the target is real-valued (" +
                     option_name("regression") + " needs a numeric target)");
  }
  for (const auto& name : categorical) {
    if (contains(drop, name)) {
      option_error("categorical",
                   "column '" + name + "' is in both " + option_name("categorical") + " and " + option_name("drop"));
    }
  }
}

namespace {

bool is_missing(const std::string& cell, const TabularOptions& options) { return contains(options.missing, cell); }

// A numeric feature cell; a missing one reaches here only under MissingPolicy::kLevel.
double numeric_feature(const TextTable& table, std::size_t row, std::size_t column, const TabularOptions& options) {
  if (is_missing(table.rows[row][column], options)) {
    fail_at(table, row,
            "numeric column '" + table.header[column] +
                "' has a missing value; missing_policy 'level' applies to "
                "categorical columns only (use 'drop' or fill the value)",
            column);
  }
  return numeric_cell(table, row, column);
}

// The rows that are encoded: target present and, under kDrop, every feature present.
std::vector<std::size_t> usable_rows(const TextTable& table, const ColumnPositions& positions,
                                     const TabularOptions& options) {
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const auto& row = table.rows[i];
    if (is_missing(row[positions.target], options)) continue;
    const bool complete = std::none_of(positions.features.begin(), positions.features.end(),
                                       [&](std::size_t j) { return is_missing(row[j], options); });
    if (complete || options.missing_policy == MissingPolicy::kLevel) rows.push_back(i);
  }
  return rows;
}

bool treat_as_categorical(const TextTable& table, const std::vector<std::size_t>& rows, std::size_t column,
                          const TabularOptions& options) {
  if (contains(options.categorical, table.header[column])) return true;
  const ColumnType type = table.types.empty() ? ColumnType::kInferred : table.types[column];
  if (type == ColumnType::kNominal || type == ColumnType::kString) return true;
  if (type == ColumnType::kNumeric) return false;
  return std::any_of(rows.begin(), rows.end(), [&](std::size_t i) {
    const std::string& cell = table.rows[i][column];
    return !is_missing(cell, options) && !detail::parse_number(cell);
  });
}

std::vector<std::string> sorted_levels(const TextTable& table, const std::vector<std::size_t>& rows, std::size_t column,
                                       const TabularOptions& options) {
  std::set<std::string> seen;
  for (std::size_t i : rows) {
    const std::string& cell = table.rows[i][column];
    seen.insert(is_missing(cell, options) ? kMissingLevel : cell);
  }
  std::vector<std::string> levels(seen.begin(), seen.end());
  sort_levels(levels);
  return levels;
}

TabularEncoder::Column fit_column(const TextTable& table, const std::vector<std::size_t>& rows, std::size_t column,
                                  const TabularOptions& options) {
  TabularEncoder::Column fitted;
  fitted.name = table.header[column];
  fitted.categorical = treat_as_categorical(table, rows, column, options);
  if (fitted.categorical) {
    fitted.levels = sorted_levels(table, rows, column, options);
    return fitted;
  }
  VectorXd values(static_cast<Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r)
    values(static_cast<Index>(r)) = numeric_feature(table, rows[r], column, options);
  fitted.mean = mean_without_overflow(values);
  const double deviation = root_mean_square_deviation(values, fitted.mean, static_cast<double>(values.size()));
  fitted.scale = deviation > 0.0 ? deviation : 1.0;
  return fitted;
}

std::vector<std::string> fit_classes(const TextTable& table, const std::vector<std::size_t>& rows, std::size_t target,
                                     const TabularOptions& options) {
  std::vector<std::string> classes = sorted_levels(table, rows, target, options);
  if (classes.size() < 2) {
    throw DataError("target '" + table.header[target] + "' of '" + table.source + "' has the single class " +
                    detail::quoted_list(classes) + " in the training rows; classification needs at least two");
  }
  return classes;
}

// Feature names and the column map of the encoded X.
void describe_columns(const std::vector<TabularEncoder::Column>& columns, Dataset& data) {
  Index next = 0;
  for (const auto& column : columns) {
    AttributeColumns attribute;
    attribute.name = column.name;
    attribute.categorical = column.categorical;
    if (!column.categorical) {
      attribute.columns.push_back(next++);
      data.feature_names.push_back(column.name);
    } else {
      attribute.dropped_level = column.levels.back();
      for (std::size_t l = 0; l + 1 < column.levels.size(); ++l) {
        attribute.columns.push_back(next++);
        attribute.levels.push_back(column.levels[l]);
        data.feature_names.push_back(column.name + "=" + column.levels[l]);
      }
    }
    data.attributes.push_back(std::move(attribute));
  }
}

using LevelIndex = std::unordered_map<std::string, Index>;

LevelIndex index_levels(const std::vector<std::string>& levels) {
  LevelIndex index;
  for (std::size_t l = 0; l < levels.size(); ++l) index.emplace(levels[l], static_cast<Index>(l));
  return index;
}

constexpr Index kUnseen = -1;

// The index of a row's level among `levels`; kUnseen for a level not among them, or an error
// naming it under UnseenLevelPolicy::kError.
Index level_of(const TextTable& table, std::size_t row, std::size_t column, const LevelIndex& levels,
               const TabularOptions& options, const std::string& role) {
  const std::string& cell = table.rows[row][column];
  const std::string level = is_missing(cell, options) ? kMissingLevel : cell;
  const auto found = levels.find(level);
  if (found != levels.end()) return found->second;
  if (options.unseen_levels != UnseenLevelPolicy::kError) return kUnseen;
  fail_at(table, row,
          role + " '" + level + "' of column '" + table.header[column] +
              "' was not seen in the training rows (unseen_levels: drop or zero such rows instead)",
          column);
}

// Encodes rows of one table with a fitted encoder's columns, found by name in that table.
struct RowEncoder {
  RowEncoder(const TextTable& rows, const TabularOptions& settings,
             const std::vector<TabularEncoder::Column>& fitted_columns, const std::vector<std::string>& class_levels)
      : table(rows), options(settings), columns(fitted_columns), classes(index_levels(class_levels)) {
    positions.target = column_index(table, options.target, "the target");
    // By a map: a search of the header for each of 100000 columns would take minutes.
    const LevelIndex by_name = index_levels(table.header);
    for (const auto& column : columns) {
      const auto found = by_name.find(column.name);
      positions.features.push_back(found != by_name.end() ? static_cast<std::size_t>(found->second)
                                                          : column_index(table, column.name, "a training column"));
      levels.push_back(index_levels(column.levels));
    }
  }

  // Writes standardised numbers and one-hot blocks into `out` (zero on entry).
  void encode_features(std::size_t row, const std::vector<AttributeColumns>& attributes, RowMatrix::RowXpr out) const {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const auto& output = attributes[c].columns;
      const std::size_t j = positions.features[c];
      if (!columns[c].categorical) {
        out(output[0]) = (numeric_feature(table, row, j, options) - columns[c].mean) / columns[c].scale;
        continue;
      }
      const Index level = level_of(table, row, j, levels[c], options, "level");
      // The dropped level, and an unseen one under kZero, stay all-zero.
      if (level != kUnseen && static_cast<std::size_t>(level) < output.size())
        out(output[static_cast<std::size_t>(level)]) = 1.0;
    }
  }

  double encode_target(std::size_t row) const {
    if (!options.target_categorical) return numeric_cell(table, row, positions.target);
    return static_cast<double>(level_of(table, row, positions.target, classes, options, "class"));
  }

  // Whether a row has a categorical level or a class unseen in training (kUnseen: error policies
  // have thrown already), and whether the row is left out for it (kDrop, or its class).
  struct Unseen {
    bool any = false, leave_out = false;
  };
  Unseen unseen(std::size_t row) const {
    Unseen result;
    for (std::size_t c = 0; c < columns.size(); ++c)
      if (columns[c].categorical && level_of(table, row, positions.features[c], levels[c], options, "level") == kUnseen)
        result.any = true;
    const bool unseen_class =
        options.target_categorical && level_of(table, row, positions.target, classes, options, "class") == kUnseen;
    result.any = result.any || unseen_class;
    result.leave_out = unseen_class || (result.any && options.unseen_levels == UnseenLevelPolicy::kDrop);
    return result;
  }

  const TextTable& table;
  const TabularOptions& options;
  const std::vector<TabularEncoder::Column>& columns;
  ColumnPositions positions;
  std::vector<LevelIndex> levels;
  LevelIndex classes;
};

// Refuses an encoded X beyond the memory budget before it is allocated (a table of 100000
// categorical columns one-hot encodes to millions of columns).
void check_encoded_size(const TextTable& table, Index rows, Index width, const TabularOptions& options) {
  const std::uint64_t bytes = saturating_product(
      saturating_product(static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(width)), sizeof(double));
  check_memory(bytes, options.max_memory,
               "encoding '" + table.source + "' (" + std::to_string(rows) + " rows x " + std::to_string(width) +
                   " columns after one-hot encoding, from " + std::to_string(table.header.size()) + " in the file)");
}

}  // namespace

TabularEncoder TabularEncoder::fit(const TextTable& train, const TabularOptions& options) {
  options.validate();
  check_shape(train);
  for (const auto& name : options.categorical) column_index(train, name, "listed as categorical", "categorical");
  for (const auto& name : options.drop) column_index(train, name, "listed in drop", "drop");
  ColumnPositions positions;
  positions.target = column_index(train, options.target, "the target", "target");
  for (std::size_t j = 0; j < train.header.size(); ++j) {
    if (j != positions.target && !contains(options.drop, train.header[j])) {
      positions.features.push_back(j);
    }
  }
  const std::vector<std::size_t> rows = usable_rows(train, positions, options);
  if (rows.empty()) {
    throw DataError("no training row of '" + train.source + "' has the target and every used column present");
  }
  TabularEncoder encoder;
  encoder.options_ = options;
  for (std::size_t j : positions.features) {
    encoder.columns_.push_back(fit_column(train, rows, j, options));
  }
  check_encoded_size(train, static_cast<Index>(rows.size()), encoder.encoded_width(), options);
  if (options.target_categorical) {
    encoder.classes_ = fit_classes(train, rows, positions.target, options);
  }
  return encoder;
}

Index TabularEncoder::encoded_width() const {
  Index width = 0;
  for (const Column& column : columns_)
    width += column.categorical ? std::max<Index>(static_cast<Index>(column.levels.size()) - 1, 0) : 1;
  return width;
}

Dataset TabularEncoder::transform(const TextTable& table) const {
  check_shape(table);
  const RowEncoder encoder(table, options_, columns_, classes_);
  std::vector<std::size_t> rows;
  Index unseen = 0;
  for (std::size_t row : usable_rows(table, encoder.positions, options_)) {
    const RowEncoder::Unseen check = encoder.unseen(row);
    unseen += check.any ? 1 : 0;
    if (!check.leave_out) rows.push_back(row);
  }
  // Every row left out for an unseen level or class: the job would report a test metric of no rows
  // ("test nan") and exit 0 (issue 50).
  if (rows.empty() && unseen > 0)
    throw DataError("'" + table.source + "': every one of its " + std::to_string(unseen) +
                    " test rows has a categorical "
                    "level or class that no training row has, so none is left to test on (unseen_levels: " +
                    std::string(options_.unseen_levels == UnseenLevelPolicy::kDrop ? "drop" : "zero") +
                    "); use zero (an all-zero block for an unseen level), or a split whose test rows share the "
                    "training rows' levels");
  check_encoded_size(table, static_cast<Index>(rows.size()), encoded_width(), options_);
  Dataset data;
  data.source = table.source;
  data.dropped_rows = static_cast<Index>(table.rows.size() - rows.size());
  data.unseen_level_rows = unseen;
  describe_columns(columns_, data);
  data.X = RowMatrix::Zero(static_cast<Index>(rows.size()), static_cast<Index>(data.feature_names.size()));
  data.y.resize(static_cast<Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    encoder.encode_features(rows[r], data.attributes, data.X.row(static_cast<Index>(r)));
    data.y(static_cast<Index>(r)) = encoder.encode_target(rows[r]);
  }
  if (options_.target_categorical) data.class_names = classes_;
  return data;
}

DatasetSplit encode_split(const TextTable& table, const TabularOptions& options, double test_fraction,
                          std::uint64_t seed) {
  const TrainTestIndices parts = shuffle_split(static_cast<Index>(table.rows.size()), test_fraction, seed);
  const TextTable train = table.select_rows(parts.train);
  const TabularEncoder encoder = TabularEncoder::fit(train, options);
  return {encoder.transform(train), encoder.transform(table.select_rows(parts.test))};
}

}  // namespace filkit
