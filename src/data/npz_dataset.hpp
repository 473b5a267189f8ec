// A dataset from an .npz archive: arrays X, y and optionally X_test, y_test, with X a table or
// images (internal to the library; load_dataset is the entry point).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/npy.hpp"

#include <functional>
#include <optional>
#include <string>

namespace filkit::detail {

/// The rows of an array X: a table (n, d) as it is; grey images (n, H, W) as 1 x H x W; colour
/// images (n, C, H, W) as they are, or (n, H, W, C) transposed to channel-major C x H x W rows
/// (ImageShape). `layout` says which a 4-D array is (empty: decided from the shape, see
/// DataOptions::image_layout); `layout_used` is the one taken.
struct ArrayRows {
  RowMatrix X;
  std::optional<ImageShape> image;
  std::optional<ImageLayout> layout_used;
};
/// Throws std::invalid_argument naming `name` and `path` for an array that is not 2-D to 4-D, an
/// image dimension of 0, or a 4-D shape whose layout auto cannot tell.
ArrayRows array_rows(const NpyArray& array, const std::string& name, const std::string& path,
                     std::optional<ImageLayout> layout);

/// The split of the .npz at `path` for `options` (data, classes as loaded, regression,
/// test_fraction, seed, max_memory, image_layout).
DatasetSplit load_npz_dataset(const std::string& path, const DataOptions& options);

/// The same split, but with X (and X_test) read only at the rows `narrow` keeps: the labels are read
/// whole, into datasets whose one column holds each row's index in the archive; `narrow` cuts them
/// (load_dataset's classes, subsets and an MPI rank's shard) and only the remaining rows of X are
/// read (read_npz_rows), so a rank never holds the whole of X.
DatasetSplit load_npz_rows(const std::string& path, const DataOptions& options,
                           const std::function<void(DatasetSplit&)>& narrow);

}  // namespace filkit::detail
