#include "filkit/data/dataset.hpp"
#include "filkit/data/idx.hpp"

#include "data/idx_decode.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace filkit {

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

std::string hex(std::uint32_t value) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%08X", value);
  return buffer;
}

std::uint32_t big_endian_u32(const std::string& bytes, std::size_t offset) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint32_t>(
                                              static_cast<unsigned char>(bytes[offset + k])); };
  return byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3);
}

// The decompressed content of `path`; gzread passes uncompressed files through unchanged.
std::string read_maybe_gzipped(const std::string& path) {
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw std::invalid_argument("cannot open '" + path + "' for reading");
  gzbuffer(file.get(), 1u << 20);
  std::string content;
  std::vector<char> chunk(1u << 20);
  for (;;) {
    const int got = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      int code = 0;
      throw std::invalid_argument("'" + path + "' is corrupt: " + gzerror(file.get(), &code));
    }
    if (got == 0) {
      // gzread reports a stream cut short only through gzerror, as Z_BUF_ERROR.
      int code = Z_OK;
      gzerror(file.get(), &code);
      if (code == Z_BUF_ERROR) {
        throw std::invalid_argument("'" + path + "' is truncated: its gzip stream ends early");
      }
      return content;
    }
    content.append(chunk.data(), static_cast<std::size_t>(got));
  }
}

// An IDX file checked against its expected magic number: its dimensions and its data bytes.
struct IdxFile {
  std::vector<Index> dims;
  std::string content;
  std::size_t data_offset = 0;
};

IdxFile read_idx(const std::string& path, std::uint32_t magic, const std::string& kind) {
  IdxFile idx{{}, read_maybe_gzipped(path), 0};
  const std::size_t n_dims = magic & 0xFFu;
  const std::size_t header_bytes = 4 * (1 + n_dims);
  const auto fail_header = [&] {
    throw std::invalid_argument("'" + path + "' is not an " + kind + " file: expected a " +
                                std::to_string(header_bytes) + "-byte IDX header, found " +
                                std::to_string(idx.content.size()) + " bytes");
  };
  if (idx.content.size() < 4) fail_header();
  const std::uint32_t found = big_endian_u32(idx.content, 0);
  if (found != magic) {
    throw std::invalid_argument("'" + path + "' is not an " + kind + " file: expected magic number " +
                                hex(magic) + ", found " + hex(found));
  }
  if (idx.content.size() < header_bytes) fail_header();
  Index expected = 1;
  bool overflow = false;  // only a corrupt header declares more than 2^63 bytes
  for (std::size_t k = 0; k < n_dims; ++k) {
    idx.dims.push_back(big_endian_u32(idx.content, 4 * (k + 1)));
    overflow = overflow || __builtin_mul_overflow(expected, idx.dims.back(), &expected);
  }
  idx.data_offset = header_bytes;
  const auto found_bytes = static_cast<Index>(idx.content.size() - header_bytes);
  if (overflow || found_bytes != expected) {
    throw std::invalid_argument(
        "'" + path + "' is " + (found_bytes < expected ? "truncated" : "longer than its header says") +
        ": the header declares " + std::to_string(expected) + " data bytes, found " +
        std::to_string(found_bytes));
  }
  return idx;
}

// The images `rows` of `idx`, or all of them when `rows` is null.
RowMatrix image_rows(const IdxFile& idx, const std::string& path, const std::vector<Index>* rows) {
  const Index n = idx.dims[0];
  const Index d = idx.dims[1] * idx.dims[2];
  const auto* pixels = reinterpret_cast<const unsigned char*>(idx.content.data() + idx.data_offset);
  if (rows == nullptr) {
    RowMatrix images(n, d);
    std::copy(pixels, pixels + n * d, images.data());
    return images;
  }
  RowMatrix images(static_cast<Index>(rows->size()), d);
  for (std::size_t k = 0; k < rows->size(); ++k) {
    const Index row = (*rows)[k];
    if (row < 0 || row >= n) {
      throw std::invalid_argument("image " + std::to_string(row) + " is outside '" + path + "' (" +
                                  std::to_string(n) + " images)");
    }
    std::copy(pixels + row * d, pixels + (row + 1) * d, images.row(static_cast<Index>(k)).data());
  }
  return images;
}

const std::string kImagesKind = "IDX image (idx3-ubyte)";

}  // namespace

namespace detail {

RowMatrix read_idx_image_rows(const std::string& path, const std::vector<Index>& rows,
                              Index expected_count) {
  const IdxFile idx = read_idx(path, kImagesMagic, kImagesKind);
  if (idx.dims[0] != expected_count) {
    throw std::invalid_argument("'" + path + "' holds " + std::to_string(idx.dims[0]) +
                                " images, but its label file holds " +
                                std::to_string(expected_count) + " labels");
  }
  return image_rows(idx, path, &rows);
}

}  // namespace detail

RowMatrix read_idx_images(const std::string& path) {
  return image_rows(read_idx(path, kImagesMagic, kImagesKind), path, nullptr);
}

VectorXd read_idx_labels(const std::string& path) {
  const IdxFile idx = read_idx(path, kLabelsMagic, "IDX label (idx1-ubyte)");
  const auto* labels = reinterpret_cast<const unsigned char*>(idx.content.data() + idx.data_offset);
  VectorXd y(idx.dims[0]);
  std::copy(labels, labels + idx.dims[0], y.data());
  return y;
}

}  // namespace filkit
