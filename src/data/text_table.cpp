#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include <stdexcept>

namespace filkit {



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
