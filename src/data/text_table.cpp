#include "filkit/data/text_table.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"

#include <stdexcept>

namespace filkit {

void check_table_memory(const TextTable& table, std::size_t rows, Index line, std::uint64_t file_bytes,
                        ByteSize max_memory) {
  // Each cell is a std::string, whose text up to 15 characters is held inside it.
  const std::uint64_t cells = saturating_product(saturating_product(rows, table.header.size()), sizeof(std::string));
  const std::uint64_t bytes = cells > UINT64_MAX - file_bytes ? UINT64_MAX : cells + file_bytes;
  if (bytes <= max_memory.bytes) return;
  check_memory(bytes, max_memory,
               "'" + table.source + "' line " + std::to_string(line) + ": holding its " +
                   std::to_string(table.header.size()) + " columns x " + std::to_string(rows) +
                   " rows of cells (with the file's bytes)");
}

TextTable TextTable::select_rows(const std::vector<Index>& indices) const {
  TextTable selected{header, {}, {}, types, source};
  selected.rows.reserve(indices.size());
  selected.lines.reserve(indices.size());
  for (Index i : indices) {
    if (i < 0 || i >= static_cast<Index>(rows.size())) {
      throw OptionError::with_text("rows", "select_rows: row " + std::to_string(i) + " outside 0.." +
                                               std::to_string(static_cast<Index>(rows.size()) - 1) + " of " + source);
    }
    selected.rows.push_back(rows[static_cast<std::size_t>(i)]);
    if (!lines.empty()) selected.lines.push_back(lines[static_cast<std::size_t>(i)]);
  }
  return selected;
}

}  // namespace filkit
