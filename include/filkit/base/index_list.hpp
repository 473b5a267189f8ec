// Comma-separated lists of indices ("0,5,17"), as options spell classes, rows and columns.
#pragma once

#include "filkit/base/types.hpp"

#include <string>
#include <vector>

namespace filkit {

/// Parses "0,1,2" into integers (throws std::invalid_argument naming `what` on bad input).
std::vector<Index> parse_index_list(const std::string& text, const std::string& what);

}  // namespace filkit
