// Parsing of .npy bytes, shared by the .npy and .npz readers (internal to the library).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/npy.hpp"

#include <string>
#include <string_view>

namespace filkit::detail {

/// The array held by the .npy bytes `bytes`; errors name `where` (a file, or a member of one).
NpyArray parse_npy(std::string_view bytes, const std::string& where);

}  // namespace filkit::detail
