#include "filkit/base/index_list.hpp"

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
      throw std::invalid_argument(what + ": expected non-negative integers separated by commas, got '" + text + "'");
    values.push_back(static_cast<Index>(std::stoll(trimmed)));
  }
  if (values.empty()) throw std::invalid_argument(what + ": empty list");
  return values;
}

}  // namespace filkit
