// IDX (MNIST format) images and labels. Accepts raw files and gzip-compressed ones (detected
// by content).
#pragma once

#include "filkit/base/types.hpp"

#include <string>

namespace filkit {

/// Images of an idx3 file (magic 0x00000803, unsigned bytes) as an n x (rows*cols) matrix of
/// raw pixel values 0..255.
RowMatrix read_idx_images(const std::string& path);
/// Labels of an idx1 file (magic 0x00000801, unsigned bytes).
VectorXd read_idx_labels(const std::string& path);

}  // namespace filkit
