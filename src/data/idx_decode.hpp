// IDX reading with row selection, for loading a few classes of a large image file without
// converting every image to doubles (internal to the library).
#pragma once

#include "filkit/base/resources.hpp"
#include "filkit/base/types.hpp"
#include "filkit/data/dataset.hpp"

#include <string>
#include <vector>

namespace filkit::detail {

/// Images of an idx3 file: one a row, and their shape (1 x rows x columns).
struct IdxImages {
  RowMatrix X;
  ImageShape shape;
};

/// The images `rows` (in that order) of an idx3 file, validated as read_idx_images does.
/// Throws std::invalid_argument unless the file holds `expected_count` images (the number of
/// labels that go with them) and every row is below that count, or if it needs more than
/// `max_memory`. Increasing rows of an uncompressed file are read alone; of a gzipped file, with
/// `shard` (an MPI rank's rows), by inflating the stream only up to the last of them, else the
/// whole file is inflated (faster, and checked to its end).
IdxImages read_idx_image_rows(const std::string& path, const std::vector<Index>& rows, Index expected_count,
                              ByteSize max_memory, bool shard = false);

}  // namespace filkit::detail
