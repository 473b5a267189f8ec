#include "base/parsing.hpp"

#include "filkit/base/errors.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace filkit::detail {

std::string read_file_bytes(const std::string& path, ByteSize budget) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw DataError("'" + path + "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ResourceError("cannot open '" + path + "' for reading");
  const std::string what = "reading '" + path + "'";
  const std::streamoff size = in.tellg();
  if (size > 0) check_memory(static_cast<std::uint64_t>(size), budget, what);
  in.seekg(0);
  // In chunks, the budget checked as the content grows: a device or pipe (/dev/zero, a FIFO) has
  // no size to check first, and may never end.
  std::string bytes;
  if (size > 0) bytes.reserve(static_cast<std::size_t>(size));  // a regular file: one allocation
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    const auto got = static_cast<std::size_t>(in.gcount());
    check_memory(bytes.size() + got, budget, what);
    bytes.append(chunk.data(), got);
  }
  if (in.bad()) throw ResourceError("error while reading '" + path + "'");
  return bytes;
}

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::string to_lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::optional<double> parse_number(std::string_view text) {
  // from_chars rejects a leading '+', which spreadsheets and R write.
  if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
  double value = 0.0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (stop != end || text.empty()) return std::nullopt;
  if (error == std::errc::result_out_of_range) {
    // A number all the same ("1e400", "1e-400"): strtod gives it rounded, +-Inf beyond a double's
    // range, so that callers refuse it as a non-finite number instead of taking it for a word.
    return std::strtod(std::string(text).c_str(), nullptr);
  }
  if (error != std::errc()) return std::nullopt;
  return value;
}

std::string format_number(double value) {
  char buffer[32];
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(value));
  } else {
    std::snprintf(buffer, sizeof buffer, "%g", value);
  }
  return buffer;
}

std::string visible(std::string_view text) {
  std::string out;
  const auto hex = [&](unsigned value, int digits) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, digits == 2 ? "\\x%02X" : "\\u{%04X}", value);
    out += buffer;
  };
  for (std::size_t k = 0; k < text.size();) {
    const auto byte = static_cast<unsigned char>(text[k]);
    if (byte < 0x20 || byte == 0x7f) {
      if (byte == '\r') out += "\\r";
      else if (byte == '\t') out += "\\t";
      else if (byte == '\n') out += "\\n";
      else hex(byte, 2);
      ++k;
      continue;
    }
    if (byte < 0x80) {
      out += static_cast<char>(byte);
      ++k;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, each continuation byte 10xxxxxx.
    const std::size_t length = byte >= 0xf0 && byte < 0xf8 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc2 && byte < 0xe0 ? 2 : 0;
    bool valid = length > 0 && k + length <= text.size();
    unsigned code = valid ? (length == 2 ? byte & 0x1f : length == 3 ? byte & 0x0f : byte & 0x07) : 0;
    for (std::size_t j = 1; valid && j < length; ++j) {
      const auto next = static_cast<unsigned char>(text[k + j]);
      valid = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3f);
    }
    if (!valid) {
      hex(byte, 2);
      ++k;
      continue;
    }
    const bool invisible = code == 0xfeff || (code >= 0x200b && code <= 0x200f) || code == 0x2060 || code == 0xa0;
    if (invisible) hex(code, 4);
    else out.append(text.substr(k, length));
    k += length;
  }
  return out;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "'" : ", '") + visible(name) + "'";
  return list;
}

}  // namespace filkit::detail
