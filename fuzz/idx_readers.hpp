// The IDX readers on one file, shared by idx_fuzz.cpp (the file as given) and idx_gzip_fuzz.cpp
// (gzip streams made from the input).
#pragma once

#include "filkit/data/idx.hpp"

#include "data/idx_decode.hpp"
#include "fuzz_util.hpp"

namespace filkit::fuzz {

/// Reads `path` as labels and as images; a selection of rows must equal those rows of the whole.
inline void read_idx_every_way(const std::string& path) {
  runs_or_rejects([&] {
    const VectorXd labels = read_idx_labels(path, kFuzzMemory);
    FILKIT_FUZZ_CHECK(((labels.array() >= 0) && (labels.array() <= 255)).all());
  });
  RowMatrix images;
  if (!runs_or_rejects([&] { images = read_idx_images(path, kFuzzMemory); }) || images.rows() == 0) return;
  const std::vector<Index> rows = {images.rows() - 1, 0, images.rows() / 2};
  const detail::IdxImages selected = detail::read_idx_image_rows(path, rows, images.rows(), kFuzzMemory);
  FILKIT_FUZZ_CHECK(selected.X.rows() == 3 && selected.X.cols() == images.cols());
  FILKIT_FUZZ_CHECK(selected.shape.channels == 1 && selected.shape.size() == images.cols());
  for (std::size_t k = 0; k < rows.size(); ++k)
    FILKIT_FUZZ_CHECK(selected.X.row(static_cast<Index>(k)) == images.row(rows[k]));
  // A row outside the file, and a label count that does not match, are errors.
  FILKIT_FUZZ_CHECK(
      !runs_or_rejects([&] { detail::read_idx_image_rows(path, {images.rows()}, images.rows(), kFuzzMemory); }));
  FILKIT_FUZZ_CHECK(!runs_or_rejects([&] { detail::read_idx_image_rows(path, {0}, images.rows() + 1, kFuzzMemory); }));
}

}  // namespace filkit::fuzz
