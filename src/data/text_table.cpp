#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include <stdexcept>

namespace filkit {

std::string to_string(ColumnType type) {
  switch (type) {
    case ColumnType::kInferred: return "inferred";
    case ColumnType::kNumeric: return "numeric";
    case ColumnType::kNominal: return "nominal";
    case ColumnType::kString: return "string";
  }
  throw std::invalid_argument("unknown ColumnType " + std::to_string(static_cast<int>(type)));
}

ColumnType column_type_from_string(const std::string& name) {
  for (ColumnType type : {ColumnType::kInferred, ColumnType::kNumeric, ColumnType::kNominal,
                          ColumnType::kString}) {
    if (to_string(type) == name) return type;
  }
  throw std::invalid_argument("column type '" + name +
                              "' must be one of 'inferred', 'numeric', 'nominal', 'string'");
}

TextTable TextTable::select_rows(const std::vector<Index>& indices) const {
  TextTable selected{header, {}, {}, types, source};
  selected.rows.reserve(indices.size());
  selected.lines.reserve(indices.size());
  for (Index i : indices) {
    if (i < 0 || i >= static_cast<Index>(rows.size())) {
      throw std::invalid_argument("select_rows: row " + std::to_string(i) + " outside 0.." +
                                  std::to_string(static_cast<Index>(rows.size()) - 1) + " of " +
                                  source);
    }
    selected.rows.push_back(rows[static_cast<std::size_t>(i)]);
    if (!lines.empty()) selected.lines.push_back(lines[static_cast<std::size_t>(i)]);
  }
  return selected;
}

}  // namespace filkit
