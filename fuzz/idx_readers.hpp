// The IDX readers on one file, shared by idx_fuzz.cpp (the file as given) and idx_gzip_fuzz.cpp
// (gzip streams made from the input).
#pragma once

#include "filkit/data/idx.hpp"

#include "data/idx_decode.hpp"
#include "fuzz_util.hpp"

namespace filkit::fuzz {

/// Whether `content`, the uncompressed bytes of an IDX file, triggers a finding already recorded
/// in fuzz/README.md, which the targets skip until it is fixed so that fuzzing gets past it: an
/// image header declaring rows or columns 0 with many images (idx-1: read_idx_images loops over
/// up to 2^32 empty images, seconds to minutes), or 0 images of rows x columns over 2^63 (idx-2:
/// signed overflow computing the row length).
inline bool known_idx_finding(std::string_view content) {
  if (content.size() < 16) return false;
  const auto u32 = [&](std::size_t at) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(content.data()) + at;
    return std::uint64_t{bytes[0]} << 24 | std::uint64_t{bytes[1]} << 16 | std::uint64_t{bytes[2]} << 8 | bytes[3];
  };
  if (u32(0) != 0x803) return false;
  const std::uint64_t images = u32(4), rows = u32(8), columns = u32(12);
  const bool no_pixels = (rows == 0 || columns == 0) && images > 1000;
  const bool overflow = images == 0 && rows * columns >= std::uint64_t{1} << 63;
  return no_pixels || overflow;
}

/// Reads `path` as labels and as images; a selection of rows must equal those rows of the whole.
inline void read_idx_every_way(const std::string& path) {
  runs_or_rejects([&] {
    const VectorXd labels = read_idx_labels(path, kFuzzMemory);
    FILKIT_FUZZ_CHECK(((labels.array() >= 0) && (labels.array() <= 255)).all());
  });
  RowMatrix images;
  if (!runs_or_rejects([&] { images = read_idx_images(path, kFuzzMemory); }) || images.rows() == 0) return;
  const std::vector<Index> rows = {images.rows() - 1, 0, images.rows() / 2};
  const RowMatrix selected = detail::read_idx_image_rows(path, rows, images.rows(), kFuzzMemory);
  FILKIT_FUZZ_CHECK(selected.rows() == 3 && selected.cols() == images.cols());
  for (std::size_t k = 0; k < rows.size(); ++k)
    FILKIT_FUZZ_CHECK(selected.row(static_cast<Index>(k)) == images.row(rows[k]));
  // A row outside the file, and a label count that does not match, are errors.
  FILKIT_FUZZ_CHECK(!runs_or_rejects([&] { detail::read_idx_image_rows(path, {images.rows()}, images.rows(), kFuzzMemory); }));
  FILKIT_FUZZ_CHECK(!runs_or_rejects([&] { detail::read_idx_image_rows(path, {0}, images.rows() + 1, kFuzzMemory); }));
}

}  // namespace filkit::fuzz
