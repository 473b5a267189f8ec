#include "filkit/base/index_list.hpp"

#include "filkit/base/errors.hpp"

#include <charconv>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace filkit {

std::vector<Index> parse_index_list(const std::string& text, const std::string& what) {
  std::vector<Index> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto begin = item.find_first_not_of(' ');
    const auto end = item.find_last_not_of(' ');
    const std::string trimmed = begin == std::string::npos ? "" : item.substr(begin, end - begin + 1);
    if (trimmed.empty() || trimmed.find_first_not_of("0123456789") != std::string::npos)
      throw OptionError::with_text(what,
                                   what + ": expected non-negative integers separated by commas, got '" + text + "'");
    Index value = 0;
    const auto [stop, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
    if (error != std::errc() || stop != trimmed.data() + trimmed.size())
      throw OptionError::with_text(what, what + ": '" + trimmed + "' is beyond the largest index, " +
                                             std::to_string(std::numeric_limits<Index>::max()));
    values.push_back(value);
  }
  if (values.empty()) throw OptionError::with_text(what, what + ": empty list");
  return values;
}

}  // namespace filkit
