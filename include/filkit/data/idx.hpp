// IDX (MNIST format) images and labels. Accepts raw files and gzip-compressed ones (detected
// by content). The header's shape is read first: a file whose declared bytes, or their doubles,
// exceed `max_memory` is refused before it is inflated or converted, and a gzip stream is never
// inflated beyond the size its header declares.
#pragma once

#include "filkit/base/resources.hpp"
#include "filkit/base/types.hpp"

#include <string>

namespace filkit {

/// Images of an idx3 file (magic 0x00000803, unsigned bytes) as an n x (rows*cols) matrix of
/// raw pixel values 0..255.
RowMatrix read_idx_images(const std::string& path, ByteSize max_memory = default_memory_budget());
/// Labels of an idx1 file (magic 0x00000801, unsigned bytes).
VectorXd read_idx_labels(const std::string& path, ByteSize max_memory = default_memory_budget());

}  // namespace filkit
