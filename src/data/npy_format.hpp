// Parsing of .npy bytes, shared by the .npy and .npz readers (internal to the library).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/npy.hpp"

#include <string>
#include <string_view>
#include <vector>

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

/// What reading part of an array needs of its header (from the first bytes of the .npy): its shape,
/// the bytes of a value, where the data start, and how values convert to doubles.
struct NpyDataLayout {
  std::vector<Index> shape;
  std::size_t value_bytes = 0;
  std::size_t data_start = 0;
  void (*to_double)(const char* data, std::size_t count, double* out) = nullptr;
};
NpyDataLayout npy_data_layout(std::string_view leading_bytes, const std::string& where);

/// Rows of array `name` of the .npz archive at `path` (`rows`: increasing indices into its first
/// axis; nullptr: every row), as an array whose first dimension is their count. Reads only the
/// archive's directory, the member's header and the bytes up to the last row wanted (a stored
/// member: only those rows' bytes; a deflated one is inflated from its start, keeping only them),
/// so an MPI rank holds its rows, never the whole member. The member's CRC-32 is not checked (it
/// covers all of it); values are checked as read_npz checks them. Throws std::invalid_argument
/// naming the archive and member. `all_rows`, if given, receives the array's first dimension.
NpyArray read_npz_rows(const std::string& path, const std::string& name, const std::vector<Index>* rows,
                       ByteSize max_memory, Index* all_rows = nullptr);
/// The arrays of the .npz archive at `path` (its directory only).
std::vector<std::string> npz_array_names(const std::string& path);

}  // namespace filkit::detail
