// Spelling of enumerations in flags, Python keywords and JSON: one table per enum, looked up both
// ways, with an error that lists the accepted spellings.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace filkit {

template <typename Enum, std::size_t N>
Enum enum_from_string(const std::string& name, const std::pair<Enum, const char*> (&names)[N], const char* what) {
  std::string expected;
  for (const auto& [value, spelling] : names) {
    if (name == spelling) return value;
    expected += (expected.empty() ? "" : ", ") + std::string(spelling);
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "': expected one of " + expected);
}

template <typename Enum, std::size_t N>
std::string enum_to_string(Enum value, const std::pair<Enum, const char*> (&names)[N]) {
  for (const auto& [candidate, spelling] : names)
    if (candidate == value) return spelling;
  return "unknown";
}

}  // namespace filkit
