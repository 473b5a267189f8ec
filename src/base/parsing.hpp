// Small helpers shared by the dataset loaders (internal to the library).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace filkit::detail {

/// The whole file as bytes; throws std::invalid_argument naming the path if it cannot be read.
std::string read_file_bytes(const std::string& path);

/// `text` without leading and trailing blanks (spaces, tabs, carriage returns).
std::string_view trim(std::string_view text);

std::string to_lower(std::string_view text);

/// The number spelled by the whole of `text` ("1", "-2.5e3", "+4", "nan", "inf"), or nothing.
std::optional<double> parse_number(std::string_view text);

/// A number for a message or a class name: "3" for integral values, else "0.5" (%g).
std::string format_number(double value);

/// "'a', 'b', 'c'": names for an error message.
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace filkit::detail
