// Small helpers shared by the dataset loaders (internal to the library).
#pragma once

#include "filkit/base/resources.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace filkit::detail {

/// The whole file as bytes; throws std::invalid_argument naming the path if it cannot be read, or
/// if it is larger than `budget` (the memory budget, max_memory), before reading it.
std::string read_file_bytes(const std::string& path, ByteSize budget = default_memory_budget());

/// `text` without leading and trailing blanks (spaces, tabs, carriage returns).
std::string_view trim(std::string_view text);

std::string to_lower(std::string_view text);

/// The number spelled by the whole of `text` ("1", "-2.5e3", "+4", "nan", "inf"), or nothing.
/// A number beyond a double's range ("1e400") is still a number: +-Inf, for the caller to refuse.
std::optional<double> parse_number(std::string_view text);

/// A number for a message or a class name: "3" for integral values, else "0.5" (%g).
std::string format_number(double value);

/// `text` as a message shows it: control characters as \r, \t, \n or \xHH, the invisible code
/// points a file can hide in a name or cell (a byte-order mark U+FEFF, zero-width spaces U+200B to
/// U+200F, U+2060, a no-break space U+00A0) as \u{FEFF}, and bytes that are not UTF-8 as \xHH.
std::string visible(std::string_view text);

/// "'a', 'b', 'c'": names for an error message (each visible()).
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace filkit::detail
