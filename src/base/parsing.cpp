#include "base/parsing.hpp"

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
  if (std::filesystem::is_directory(path, error))
    throw std::invalid_argument("'" + path + "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::invalid_argument("cannot open '" + path + "' for reading");
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
  if (in.bad()) throw std::invalid_argument("error while reading '" + path + "'");
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

std::string quoted_list(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& name : names) list += (list.empty() ? "'" : ", '") + name + "'";
  return list;
}

}  // namespace filkit::detail
