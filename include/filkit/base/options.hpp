// Options declared once (docs/architecture.md, "Options"). Every option struct S that users set
// has, next to its definition, a function
//
//   template <class Visit> void visit_fields(S& options, Visit&& visit);
//
// that calls visit(name, field, help) for each user-facing field, in the order a user reads them.
// The command line (one flag --name-with-dashes a field), the Python keywords (name) and the
// "settings" of every JSON summary all walk that one declaration, so a default or a spelling is
// written once. A field of type std::optional<T> is spelled "auto" when empty: the job resolves it
// for the data at hand and records the resolved value.
#pragma once

#include "filkit/base/checks.hpp"
#include "filkit/base/enum_names.hpp"
#include "filkit/base/resources.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace filkit {

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};
template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};

/// Options renamed so that the command line, Python and the summaries share one vocabulary: the
/// former name is still read as the option (the command line's --q, a Python keyword q=, a
/// summary's settings.q), and nothing writes it.
struct RenamedOption {
  std::string_view former, name;
};
inline constexpr RenamedOption kRenamedOptions[] = {
    {"q", "sample_rate"},             // the accountant's; -q is --quiet on every command
    {"scale", "row_scaling"},         // filkit.preprocess's name, which says what is scaled
    {"pixel_scale", "scale_pixels"},  // filkit.preprocess's name
};

/// The names nearest to `typed` by edit distance (a typo or a swap of neighbours per 4 letters,
/// at least 2; or a name `typed` starts), the best first, at most 3; empty when none is close:
/// the suggestions for a mistyped flag or keyword (src/base/options.cpp).
std::vector<std::string> nearest_names(const std::string& typed, const std::vector<std::string>& names);

/// The former name of option `name` (kRenamedOptions), or empty.
constexpr std::string_view former_option_name(std::string_view name) {
  for (const RenamedOption& renamed : kRenamedOptions)
    if (renamed.name == name) return renamed.former;
  return {};
}

/// The value of a field as recorded in the JSON settings: numbers, booleans, strings, enums by
/// their spelling, vectors as arrays, an empty optional as "auto".
template <typename T>
nlohmann::json option_to_json(const T& value) {
  if constexpr (is_optional<T>::value) {
    return value ? option_to_json(*value) : nlohmann::json("auto");
  } else if constexpr (is_vector<T>::value) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& element : value) array.push_back(option_to_json(element));
    return array;
  } else if constexpr (std::is_enum_v<T> || std::is_same_v<T, ByteSize>) {
    return to_string(value);
  } else if constexpr (std::is_floating_point_v<T>) {
    // JSON has no infinities: spell them as the command line and Python accept them.
    if (value != value) return "nan";
    if (value == std::numeric_limits<T>::infinity()) return "inf";
    if (value == -std::numeric_limits<T>::infinity()) return "-inf";
    return value;
  } else {
    return value;
  }
}

/// Parses the text of one option value (a flag's argument, a Python string): numbers must be
/// whole tokens (integers within their type's range, doubles within a double's), enums one of
/// their spellings, sizes as parse_byte_size reads them, vectors comma-separated, optionals "auto"
/// or a value. Throws OptionError naming `name` and what was expected.
template <typename T>
void option_from_text(const std::string& name, const std::string& text, T& value) {
  const auto fail = [&](const std::string& expected) { option_error(name, "'" + text + "'", "expected " + expected); };
  if constexpr (is_optional<T>::value) {
    if (text == "auto") {
      value.reset();
    } else {
      typename T::value_type inner{};
      option_from_text(name, text, inner);
      value = std::move(inner);
    }
  } else if constexpr (is_vector<T>::value) {
    value.clear();
    if (text.empty()) return;
    // "all" reads naturally for a list of classes: the empty list keeps every class.
    if (std::is_arithmetic_v<typename T::value_type> && text == "all") return;
    std::size_t start = 0;
    while (start <= text.size() && !text.empty()) {
      const std::size_t comma = text.find(',', start);
      const std::string token = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      typename T::value_type element{};
      option_from_text(name, token, element);
      value.push_back(std::move(element));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else if constexpr (std::is_enum_v<T>) {
    try {
      value = parse_enum<T>(text);
    } catch (const std::invalid_argument&) {
      fail("one of " + enum_spellings<T>());
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if (text == "true" || text == "1" || text == "on") value = true;
    else if (text == "false" || text == "0" || text == "off") value = false;
    else fail("true or false");
  } else if constexpr (std::is_same_v<T, std::string>) {
    // The settings are recorded in the JSON summary, which holds UTF-8 only: refused here, before
    // the job, rather than when the summary is written after it. The text is not echoed.
    try {
      (void)nlohmann::json(text).dump();
    } catch (const nlohmann::json::type_error& error) {
      const std::string what = error.what();
      option_error(name, "the text is not UTF-8 (" + what.substr(what.find("] ") + 2) +
                             "); options are recorded in the JSON summary, which holds UTF-8 text only");
    }
    value = text;
  } else if constexpr (std::is_same_v<T, ByteSize>) {
    value = parse_byte_size(name, text);
  } else if constexpr (std::is_floating_point_v<T>) {
    // strtod, not stod: a value too small for a double is that value rounded (ERANGE, but no
    // error); one too large is refused rather than read as infinity.
    errno = 0;
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size()) fail("a number");
    if (errno == ERANGE && (parsed > 1.0 || parsed < -1.0)) fail("a number of magnitude at most 1.8e308");
    value = static_cast<T>(parsed);
  } else {
    static_assert(std::is_integral_v<T>, "option fields are numbers, booleans, strings, enums or vectors of them");
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc::result_out_of_range)
      fail("an integer in " + std::to_string(std::numeric_limits<T>::min()) + ".." +
           std::to_string(std::numeric_limits<T>::max()));
    if (error != std::errc() || end != text.data() + text.size())
      fail(std::is_signed_v<T> ? "an integer" : "a non-negative integer");
  }
}

/// Throws OptionError naming `name` and the value when the list `values` names one twice (a list
/// of methods, say, each of which would run and be written twice).
template <typename T>
void refuse_repeats(const std::string& name, const std::vector<T>& values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (values[j] == values[i]) {
        const nlohmann::json shown = option_to_json(values[i]);
        throw OptionError::with_text(name, option_name(name) + " names " +
                                               (shown.is_string() ? shown.get<std::string>() : shown.dump()) +
                                               " twice: name each once");
      }
}

/// Every visited field of `options` as a JSON object (name -> option_to_json(value)).
template <typename Options>
nlohmann::json settings_json(const Options& options) {
  nlohmann::json settings = nlohmann::json::object();
  visit_fields(const_cast<Options&>(options),
               [&](const char* name, const auto& field, const char*) { settings[name] = option_to_json(field); });
  return settings;
}

/// Reads a field back from its recorded setting, the inverse of option_to_json: text (enums,
/// sizes, "auto", "nan", "inf") and numbers are read as option_from_text reads a flag's argument,
/// so they meet the same rules (integers whole and in range); booleans must be JSON booleans and
/// lists JSON arrays. Throws DataError naming `name` and what was expected: the setting comes from
/// a file, and is not the option of this run.
template <typename T>
void option_from_json(const std::string& name, const nlohmann::json& json, T& value) {
  if (json.is_string()) {
    try {
      return option_from_text(name, json.get<std::string>(), value);
    } catch (const OptionError& error) {
      throw DataError(error.what());
    }
  }
  const auto fail = [&](const std::string& expected) {
    throw DataError(name + " = " + json.dump() + ": expected " + expected);
  };
  if constexpr (is_optional<T>::value) {
    typename T::value_type inner{};
    option_from_json(name, json, inner);
    value = std::move(inner);
  } else if constexpr (is_vector<T>::value) {
    if (!json.is_array()) fail("a list");
    T elements;
    for (const nlohmann::json& element_json : json) {
      typename T::value_type element{};
      option_from_json(name, element_json, element);
      elements.push_back(std::move(element));
    }
    value = std::move(elements);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!json.is_boolean()) fail("true or false");
    value = json.get<bool>();
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (!json.is_number()) fail("a number");
    // dump() spells a double so that strtod reads back the same double.
    option_from_json(name, nlohmann::json(json.dump()), value);
  } else {
    fail("text");
  }
}

/// Sets each visited field of `options` that `settings` (a summary's "settings" object, as
/// settings_json writes it) names, by its name or else its former name (kRenamedOptions); fields
/// it does not name keep their values and names it has beyond them are ignored. Throws DataError
/// naming "settings.<name>" for a value that does not fit its field, or if `settings` is not an
/// object.
template <typename Options>
void options_from_settings(const nlohmann::json& settings, Options& options) {
  if (!settings.is_object()) throw DataError("settings: not an object of named values");
  visit_fields(options, [&](const char* name, auto& field, const char*) {
    auto found = settings.find(name);
    // A summary written before a rename holds the former name.
    if (const std::string_view former = former_option_name(name); found == settings.end() && !former.empty()) {
      found = settings.find(std::string(former));
      if (found != settings.end()) return option_from_json("settings." + std::string(former), *found, field);
    }
    if (found != settings.end()) option_from_json(std::string("settings.") + name, *found, field);
  });
}

}  // namespace filkit
