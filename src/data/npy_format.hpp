// Parsing of .npy bytes, shared by the .npy and .npz readers (internal to the library).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/npy.hpp"

#include <string>
#include <string_view>

namespace filkit::detail {

/// The array held by the .npy bytes `bytes`; errors name `where` (a file, or a member of one).
/// Refuses values that are NaN, Inf or beyond kMaxInputMagnitude (naming the element), and an
/// array whose doubles with `bytes` need more than `max_memory`.
NpyArray parse_npy(std::string_view bytes, const std::string& where, ByteSize max_memory);

/// What a .npy header declares, read from the first bytes of the file (enough to hold the header):
/// the size of the whole file, and the number of values.
struct NpySize {
  std::uint64_t file_bytes = 0;  ///< UINT64_MAX for a shape beyond 2^64 bytes
  std::uint64_t values = 0;
};
NpySize npy_size(std::string_view leading_bytes, const std::string& where);

}  // namespace filkit::detail
