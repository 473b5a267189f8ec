#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"

#include "base/parsing.hpp"

#include <algorithm>
#include <stdexcept>

namespace filkit {

namespace {

[[noreturn]] void fail(const std::string& path, Index line, const std::string& what) {
  throw DataError("'" + path + "' line " + std::to_string(line) + ": " + what);
}

// Reads one value at `pos`: quoted with ' or " (backslash escapes the next character) or bare
// up to `stops`; leaves `pos` after the value and trailing blanks.
std::string next_value(std::string_view text, std::size_t& pos, std::string_view stops, const std::string& path,
                       Index line) {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  if (pos < text.size() && (text[pos] == '\'' || text[pos] == '"')) {
    const char quote = text[pos++];
    std::string value;
    while (pos < text.size() && text[pos] != quote) {
      if (text[pos] == '\\' && pos + 1 < text.size()) ++pos;
      value += text[pos++];
    }
    if (pos >= text.size()) fail(path, line, std::string("unterminated ") + quote + " quote");
    ++pos;
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
    return value;
  }
  const std::size_t end = std::min(text.find_first_of(stops, pos), text.size());
  std::string value(detail::trim(text.substr(pos, end - pos)));
  pos = end;
  return value;
}

// Comma-separated values; an unquoted '%' starts a comment, as in Weka's reader.
std::vector<std::string> split_values(std::string_view text, const std::string& path, Index line) {
  std::vector<std::string> values;
  std::size_t pos = 0;
  for (;;) {
    values.push_back(next_value(text, pos, ",%", path, line));
    if (pos < text.size() && text[pos] == ',') {
      ++pos;
      continue;
    }
    if (pos < text.size() && text[pos] != '%') {
      fail(path, line, std::string("unexpected character '") + text[pos] + "' after a value");
    }
    return values;
  }
}

struct Attribute {
  std::string name;
  ColumnType type = ColumnType::kNumeric;
  std::vector<std::string> levels;  // nominal only
};

Attribute parse_attribute(std::string_view declaration, const std::string& path, Index line) {
  Attribute attribute;
  std::size_t pos = 0;
  attribute.name = next_value(declaration, pos, " \t{", path, line);
  if (attribute.name.empty()) fail(path, line, "@attribute without a name");
  const std::string_view type = detail::trim(declaration.substr(pos));
  const std::string lower = detail::to_lower(type);
  if (lower == "numeric" || lower == "real" || lower == "integer") return attribute;
  if (lower == "string") {
    attribute.type = ColumnType::kString;
    return attribute;
  }
  if (type.starts_with('{') && type.ends_with('}')) {
    attribute.type = ColumnType::kNominal;
    attribute.levels = split_values(type.substr(1, type.size() - 2), path, line);
    if (attribute.levels.size() == 1 && attribute.levels[0].empty()) {
      fail(path, line, "nominal attribute '" + attribute.name + "' declares no levels");
    }
    return attribute;
  }
  fail(path, line,
       "attribute '" + attribute.name + "' has type '" + std::string(type) +
           "'; supported: numeric, real, integer, string, {level,...}");
}

void check_row(const std::vector<std::string>& row, const std::vector<Attribute>& attributes, const std::string& path,
               Index line) {
  if (row.size() != attributes.size()) {
    fail(path, line,
         std::to_string(row.size()) + " values, but " + std::to_string(attributes.size()) + " attributes are declared");
  }
  for (std::size_t j = 0; j < row.size(); ++j) {
    const Attribute& attribute = attributes[j];
    if (row[j] == "?") continue;
    if (attribute.type == ColumnType::kNumeric && !detail::parse_number(row[j])) {
      fail(path, line, "attribute '" + attribute.name + "' is numeric, found '" + row[j] + "'");
    }
    if (attribute.type == ColumnType::kNominal &&
        std::find(attribute.levels.begin(), attribute.levels.end(), row[j]) == attribute.levels.end()) {
      fail(path, line,
           "'" + row[j] + "' is not a declared level of attribute '" + attribute.name + "' {" +
               detail::quoted_list(attribute.levels) + "}");
    }
  }
}

// The keyword of a header line ("@attribute" -> "attribute"), lower-case, and what follows it.
std::pair<std::string, std::string_view> keyword(std::string_view line) {
  const std::size_t end = std::min(line.find_first_of(" \t"), line.size());
  return {detail::to_lower(line.substr(1, end - 1)), detail::trim(line.substr(end))};
}

TextTable make_table(const std::vector<Attribute>& attributes, const std::string& path) {
  TextTable table;
  table.source = path;
  for (const auto& attribute : attributes) {
    table.header.push_back(attribute.name);
    table.types.push_back(attribute.type);
  }
  return table;
}

}  // namespace

TextTable read_arff(const std::string& path, ByteSize max_memory) {
  const std::string content = detail::read_file_bytes(path, max_memory);
  std::vector<Attribute> attributes;
  TextTable table;
  bool in_data = false;
  Index line_number = 0;
  const std::size_t after_bom = content.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  for (std::size_t start = after_bom; start < content.size();) {
    const std::size_t end = std::min(content.find('\n', start), content.size());
    const std::string_view line = detail::trim(std::string_view(content).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.starts_with('%')) continue;
    if (in_data) {
      if (line.starts_with('{')) fail(path, line_number, "sparse ARFF rows are not supported");
      std::vector<std::string> row = split_values(line, path, line_number);
      check_row(row, attributes, path, line_number);
      check_table_memory(table, table.rows.size() + 1, line_number, content.size(), max_memory);
      table.rows.push_back(std::move(row));
      table.lines.push_back(line_number);
      continue;
    }
    if (!line.starts_with('@')) fail(path, line_number, "expected @relation, @attribute or @data");
    const auto [word, rest] = keyword(line);
    if (word == "attribute") {
      attributes.push_back(parse_attribute(rest, path, line_number));
      const std::string& name = attributes.back().name;
      if (std::count_if(attributes.begin(), attributes.end(), [&](const Attribute& a) { return a.name == name; }) > 1) {
        fail(path, line_number, "attribute '" + name + "' is declared twice");
      }
    } else if (word == "data") {
      if (attributes.empty()) fail(path, line_number, "@data before any @attribute");
      table = make_table(attributes, path);
      in_data = true;
    } else if (word != "relation") {
      fail(path, line_number, "unknown keyword '@" + word + "'");
    }
  }
  if (!in_data) throw DataError("'" + path + "' has no @data section");
  return table;
}

}  // namespace filkit
