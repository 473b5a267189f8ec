// Spelling of enumerations in flags, Python keywords and JSON: one table per enum (an EnumNames
// specialisation next to the enum), read both ways, with an error that lists the accepted
// spellings. Option binders (the CLI, Python, the JSON settings) use these for every enum field.
#pragma once

#include "filkit/base/errors.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace filkit {

/// Specialise next to each enum:
///   template <> struct EnumNames<ModelKind> {
///     static constexpr const char* what = "model";
///     static constexpr std::pair<ModelKind, const char*> names[] = {{ModelKind::kLogistic, "logistic"}, ...};
///   };
template <typename Enum>
struct EnumNames;

// C++17-compatible (the LibTorch plugin is compiled as C++17): enums with an EnumNames table.
template <typename Enum, typename = void>
struct has_enum_names : std::false_type {};
template <typename Enum>
struct has_enum_names<Enum, std::void_t<decltype(EnumNames<Enum>::names)>> : std::true_type {};
template <typename Enum>
using if_named_enum = std::enable_if_t<has_enum_names<Enum>::value, int>;

/// The spelling of `value` ("unknown" for a value outside the table).
template <typename Enum, if_named_enum<Enum> = 0>
std::string to_string(Enum value) {
  for (const auto& [candidate, spelling] : EnumNames<Enum>::names)
    if (candidate == value) return spelling;
  return "unknown";
}

/// "a, b, c": every accepted spelling, for help texts and errors.
template <typename Enum, if_named_enum<Enum> = 0>
std::string enum_spellings() {
  std::string spellings;
  for (const auto& entry : EnumNames<Enum>::names)
    spellings += (spellings.empty() ? "" : ", ") + std::string(entry.second);
  return spellings;
}

/// The value spelled `name`; throws OptionError (about the enum's `what`) naming what was expected.
template <typename Enum, if_named_enum<Enum> = 0>
Enum parse_enum(const std::string& name) {
  for (const auto& [value, spelling] : EnumNames<Enum>::names)
    if (name == spelling) return value;
  throw OptionError::with_text(EnumNames<Enum>::what, "unknown " + std::string(EnumNames<Enum>::what) + " '" + name +
                                                          "': expected one of " + enum_spellings<Enum>());
}

}  // namespace filkit
