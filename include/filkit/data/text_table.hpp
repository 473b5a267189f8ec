// Text tables: CSV with a header row, and ARFF (Weka's attribute-relation file format), read as
// strings; data/tabular_encoder.hpp turns them into Datasets.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/types.hpp"

#include <string>
#include <vector>

namespace filkit {

/// What a table's header declares about a column's values.
enum class ColumnType {
  kInferred,  ///< CSV: numeric if every non-missing training cell is a number, else categorical
  kNumeric,   ///< ARFF numeric/real/integer: cells are numbers or missing
  kNominal,   ///< ARFF {a,b,...}: cells are declared levels or missing; always categorical
  kString,    ///< ARFF string: free text, treated as categorical
};
template <>
struct EnumNames<ColumnType> {
  static constexpr const char* what = "column type";
  static constexpr std::pair<ColumnType, const char*> names[] = {{ColumnType::kInferred, "inferred"},
                                                                 {ColumnType::kNumeric, "numeric"},
                                                                 {ColumnType::kNominal, "nominal"},
                                                                 {ColumnType::kString, "string"}};
};

/// A table as strings: header and rows, every row the header's width. Cells keep their text
/// (unquoted, surrounding blanks trimmed); whether a cell is missing is decided by
/// TabularOptions::missing, so the reader's missing marker ("?" in ARFF) is stored as is.
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<Index> lines;       ///< 1-based line of `source` where each row starts
                                  ///< (empty in a hand-built table: errors then name rows)
  std::vector<ColumnType> types;  ///< one per column (empty in a hand-built table: inferred)
  std::string source;

  /// The rows `rows` (indices into this table's rows), with their line numbers.
  TextTable select_rows(const std::vector<Index>& rows) const;
};

/// A CSV file with a header row. Cells may be quoted ("a,b", doubled quotes "" for a quote,
/// line breaks inside quotes); blank lines are skipped; a UTF-8 byte order mark is ignored.
/// Errors name the file and line: ragged rows, unterminated quotes, empty or duplicate header
/// names. Every column type is kInferred. A file, or a table of cells, larger than `max_memory`
/// is refused (naming the line reached) before it fills the memory.
TextTable read_csv(const std::string& path, ByteSize max_memory = default_memory_budget());

/// An ARFF file: `@relation`, `@attribute <name> numeric|real|integer|string|{a,b,...}`,
/// `@data` then comma-separated rows; `%` starts a comment line; names and values may be quoted
/// with ' or " (backslash escapes the next character); `?` marks a missing value. Nominal
/// cells must be declared levels and numeric cells numbers (else an error naming the line).
/// Sparse rows ({i v, ...}) and date/relational attributes are rejected; `max_memory` as for CSV.
TextTable read_arff(const std::string& path, ByteSize max_memory = default_memory_budget());

/// Throws std::invalid_argument when `table`'s cells, held as strings, with the `file_bytes` the
/// reader holds, would exceed `max_memory` once it holds `rows` rows; `line` is where the reader is.
void check_table_memory(const TextTable& table, std::size_t rows, Index line, std::uint64_t file_bytes,
                        ByteSize max_memory);

}  // namespace filkit
