#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include "base/parsing.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace filkit {

namespace {

// A character-level reader of RFC 4180 records that tracks line numbers, so quoted cells may
// span lines and every error can say where it happened.
class CsvReader {
 public:
  CsvReader(std::string text, std::string path) : text_(std::move(text)), path_(std::move(path)) {
    if (text_.starts_with("\xEF\xBB\xBF")) pos_ = 3;  // UTF-8 byte order mark
    // UTF-16 or UTF-32 (a spreadsheet's "Unicode text"): every other byte NUL, which was reported as a
    // count of cells on some line. Said as what it is (issue 50).
    const bool utf16_bom = text_.starts_with("\xFF\xFE") || text_.starts_with("\xFE\xFF");
    const std::size_t nul = text_.find('\0', 0);
    if (utf16_bom || (nul != std::string::npos && nul < 4096))
      throw DataError("'" + path_ + "' is not UTF-8 text: " +
                      (utf16_bom ? std::string("it starts with a UTF-16 byte-order mark")
                                 : "it holds NUL bytes (UTF-16 or UTF-32, or binary data)") +
                      "; save it as CSV in UTF-8");
  }

  bool done() const { return pos_ >= text_.size(); }
  std::size_t size() const { return text_.size(); }
  Index line() const { return line_; }

  /// The next record's cells; a blank line gives no cells.
  std::vector<std::string> next_record() {
    std::vector<std::string> cells;
    bool quoted_any = false;
    for (;;) {
      skip_blanks();
      const bool quoted = pos_ < text_.size() && text_[pos_] == '"';
      quoted_any = quoted_any || quoted;
      cells.push_back(quoted ? quoted_cell() : bare_cell());
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      end_record();
      break;
    }
    if (cells.size() == 1 && cells[0].empty() && !quoted_any) cells.clear();
    return cells;
  }

  [[noreturn]] void fail(Index line, const std::string& what) const {
    throw DataError("'" + path_ + "' line " + std::to_string(line) + ": " + what);
  }

 private:
  void skip_blanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }

  std::string bare_cell() {
    const std::size_t end = std::min(text_.find_first_of(",\n", pos_), text_.size());
    // A carriage return inside a cell, not the CR of a CRLF: lines that end in CR alone, which
    // would otherwise run into one record (and a header naming cells of later lines).
    const std::size_t cr = text_.find('\r', pos_);
    if (cr != std::string::npos && cr + 1 < end)
      fail(line_,
           "a carriage return (CR) not followed by a line feed: the file's lines end in CR alone (classic "
           "Mac OS line endings), which filkit does not read; save it with LF or CRLF line endings");
    std::string cell(detail::trim(std::string_view(text_).substr(pos_, end - pos_)));
    pos_ = end;
    return cell;
  }

  std::string quoted_cell() {
    const Index opened = line_;
    std::string cell;
    ++pos_;
    for (;;) {
      const std::size_t quote = text_.find('"', pos_);
      if (quote == std::string::npos) fail(opened, "unterminated quoted cell");
      for (std::size_t k = pos_; k < quote; ++k) line_ += text_[k] == '\n';
      cell.append(text_, pos_, quote - pos_);
      pos_ = quote + 1;
      if (pos_ < text_.size() && text_[pos_] == '"') {  // "" is an escaped quote
        cell += '"';
        ++pos_;
        continue;
      }
      break;
    }
    skip_blanks();
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n') {
      fail(line_, std::string("unexpected character '") + text_[pos_] + "' after a closing quote");
    }
    return cell;
  }

  void end_record() {
    if (pos_ < text_.size()) {  // at a '\n'
      ++pos_;
      ++line_;
    }
  }

  std::string text_;
  std::string path_;
  std::size_t pos_ = 0;
  Index line_ = 1;
};

void check_header(const std::vector<std::string>& header, CsvReader& reader, Index line) {
  std::set<std::string> seen;
  for (std::size_t j = 0; j < header.size(); ++j) {
    if (header[j].empty()) {
      reader.fail(line, "header column " + std::to_string(j + 1) + " has no name");
    }
    if (!seen.insert(header[j]).second) {
      reader.fail(line, "header names column '" + header[j] + "' twice");
    }
  }
}

}  // namespace

TextTable read_csv(const std::string& path, ByteSize max_memory) {
  CsvReader reader(detail::read_file_bytes(path, max_memory), path);
  TextTable table;
  table.source = path;
  while (!reader.done() && table.header.empty()) {
    const Index line = reader.line();
    table.header = reader.next_record();
    if (!table.header.empty()) check_header(table.header, reader, line);
  }
  if (table.header.empty()) {
    throw DataError("'" + path + "' is empty: expected a header row");
  }
  table.types.assign(table.header.size(), ColumnType::kInferred);
  while (!reader.done()) {
    const Index line = reader.line();
    std::vector<std::string> cells = reader.next_record();
    if (cells.empty()) continue;
    if (cells.size() != table.header.size()) {
      reader.fail(line, std::to_string(cells.size()) + " cells, but the header has " +
                            std::to_string(table.header.size()) + " columns");
    }
    check_table_memory(table, table.rows.size() + 1, line, reader.size(), max_memory);
    table.rows.push_back(std::move(cells));
    table.lines.push_back(line);
  }
  return table;
}

}  // namespace filkit
