// NumPy .npy / .npz (float64, float32, uint8, int64, int32, little-endian, C order).
#pragma once

#include "filkit/base/resources.hpp"
#include "filkit/base/types.hpp"

#include <map>
#include <string>
#include <vector>

namespace filkit {

/// One array: dtype `<f8`, `<f4`, `|u1`, `<i8` or `<i4`, 1-D to 4-D (labels, tables, images of
/// shape (n, H, W), (n, C, H, W) or (n, H, W, C)), converted to double.
struct NpyArray {
  std::vector<Index> shape;
  std::vector<double> values;  ///< C order
};
/// Reads format versions 1.0, 2.0 and 3.0. Throws std::invalid_argument naming the file for a
/// bad magic string or header, an unsupported dtype or shape, Fortran order, a data size that
/// does not match the shape, a value that is NaN, Inf or beyond kMaxInputMagnitude (naming the
/// element), or an array that needs more than `max_memory`.
NpyArray read_npy(const std::string& path, ByteSize max_memory = default_memory_budget());
/// Every array in an .npz archive (stored or deflated members, CRC-32 checked), keyed by name
/// without ".npy". ZIP64 archives (over 4 GiB or 65535 members) are rejected. Before a member is
/// inflated, the size the archive records for it must equal what its array header declares and,
/// with the array's doubles, fit in `max_memory`: a small archive cannot make filkit allocate
/// gigabytes.
std::map<std::string, NpyArray> read_npz(const std::string& path, ByteSize max_memory = default_memory_budget());

/// Reads every member of the zip archive at `path` (an .npz, a TorchScript file) in pieces and
/// checks it against its CRC-32, so that a flipped bit is found before the archive is used.
/// Throws std::invalid_argument "'<path>' is not a readable <kind>: member '<name>' fails its
/// CRC-32 check ..." (or names the corruption of the archive itself). Returns the members' total
/// size unpacked (what a reader of the archive will hold).
std::uint64_t verify_zip_members(const std::string& path, const char* kind);

/// The bytes of an .npy file (format 1.0, dtype '<f8', C order, shape (rows, cols)) holding
/// `values`, for write_output_file: numpy.load reads it, and so does read_npy.
std::string npy_bytes(const RowMatrix& values);

}  // namespace filkit
