#include "filkit/data/idx.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/data/dataset.hpp"

#include "data/idx_decode.hpp"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace filkit {

namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

std::string hex(std::uint32_t value) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%08X", value);
  return buffer;
}

std::uint32_t big_endian_u32(const unsigned char* bytes) {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 | std::uint32_t{bytes[2]} << 8 |
         std::uint32_t{bytes[3]};
}

// A byte buffer that is not zero-filled on allocation (a decoded image file is 47 MB).
struct Bytes {
  std::unique_ptr<unsigned char[]> data;
  std::size_t size = 0;
  explicit Bytes(std::size_t n = 0) : data(new unsigned char[n]), size(n) {}
};

Bytes read_file(const std::string& path, ByteSize budget) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw DataError("'" + path + "' is a directory, expected a file");
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!file || std::fseek(file.get(), 0, SEEK_END) != 0) {
    throw ResourceError("cannot open '" + path + "' for reading");
  }
  const long size = std::ftell(file.get());
  if (size < 0 || std::fseek(file.get(), 0, SEEK_SET) != 0) {
    throw ResourceError("cannot open '" + path + "' for reading");
  }
  check_memory(static_cast<std::uint64_t>(size), budget, "reading '" + path + "'");
  Bytes bytes(static_cast<std::size_t>(size));
  if (std::fread(bytes.data.get(), 1, bytes.size, file.get()) != bytes.size) {
    throw ResourceError("cannot read '" + path + "'");
  }
  return bytes;
}

// The decompressed content of `path` through zlib's stream reader: the general path for
// concatenated gzip members, and the one that tells a truncated stream from a corrupt one. It
// stops after `limit` bytes: a gzip bomb inflates no further than its IDX header says it should
// (one byte more shows that it is longer).
std::string read_with_zlib(const std::string& path, std::size_t limit) {
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw ResourceError("cannot open '" + path + "' for reading");
  // Buffers of 1 MiB for whole files; reading a header needs no more than its few bytes.
  const std::size_t chunk_size = std::min<std::size_t>(limit, 1u << 20);
  if (chunk_size > (1u << 16)) gzbuffer(file.get(), 1u << 20);
  std::string content;
  std::vector<char> chunk(std::max<std::size_t>(chunk_size, 1));
  while (content.size() < limit) {
    const auto wanted = static_cast<unsigned>(std::min<std::size_t>(chunk.size(), limit - content.size()));
    const int got = gzread(file.get(), chunk.data(), wanted);
    if (got < 0) {
      int code = 0;
      throw DataError("'" + path + "' is corrupt: " + gzerror(file.get(), &code));
    }
    if (got == 0) {
      // gzread reports a stream cut short only through gzerror, as Z_BUF_ERROR.
      int code = Z_OK;
      gzerror(file.get(), &code);
      if (code == Z_BUF_ERROR) {
        throw DataError("'" + path + "' is truncated: its gzip stream ends early");
      }
      return content;
    }
    content.append(chunk.data(), static_cast<std::size_t>(got));
  }
  return content;
}

// Deflate expands at most 1032:1; a gzip trailer declaring more than that is corrupt, and is
// not worth allocating for.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

// A single-member gzip stream decoded in one call of libdeflate (several times faster than
// zlib) into a buffer of `expected` bytes, the size its IDX header declares, which the trailer
// must confirm (ISIZE: the last 4 bytes, little-endian, the size mod 2^32). Empty if anything is
// unusual: an absurd ISIZE, a size other than expected, several members, trailing bytes, corrupt
// or truncated data; the caller then falls back to zlib, which decodes the legitimate cases and
// names the fault of the others.
std::optional<Bytes> gunzip_single_member(const Bytes& gz, std::size_t expected) {
  constexpr std::size_t kMinimumGzip = 18;  // 10-byte header, empty deflate stream, 8-byte trailer
  if (gz.size < kMinimumGzip) return std::nullopt;
  const unsigned char* trailer = gz.data.get() + gz.size - 4;
  const std::uint32_t declared = std::uint32_t{trailer[0]} | std::uint32_t{trailer[1]} << 8 |
                                 std::uint32_t{trailer[2]} << 16 | std::uint32_t{trailer[3]} << 24;
  if (declared != static_cast<std::uint32_t>(expected) || expected > kMaxDeflateRatio * gz.size) return std::nullopt;
  const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> decompressor(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (!decompressor) throw std::bad_alloc();
  Bytes content(expected);
  std::size_t in_used = 0, out_used = 0;
  const libdeflate_result result = libdeflate_gzip_decompress_ex(decompressor.get(), gz.data.get(), gz.size,
                                                                 content.data.get(), content.size, &in_used, &out_used);
  if (result != LIBDEFLATE_SUCCESS || in_used != gz.size || out_used != expected) return std::nullopt;
  return content;
}

bool is_gzip(const Bytes& bytes) { return bytes.size >= 2 && bytes.data[0] == 0x1f && bytes.data[1] == 0x8b; }

// The first `count` bytes of `file` as read (decompressed if gzipped; fewer if it is shorter).
std::string leading_bytes(const Bytes& file, const std::string& path, std::size_t count) {
  if (!is_gzip(file)) return std::string(reinterpret_cast<const char*>(file.data.get()), std::min(count, file.size));
  return read_with_zlib(path, count);
}

// The content of `file` (read from `path`), decompressed if gzipped, up to `expected` + 1 bytes.
Bytes decompressed(Bytes file, const std::string& path, std::size_t expected) {
  if (!is_gzip(file)) return file;
  if (std::optional<Bytes> content = gunzip_single_member(file, expected)) return std::move(*content);
  file = Bytes();  // free the compressed copy before zlib decodes the file again
  const std::string content = read_with_zlib(path, expected + 1);
  Bytes copy(content.size());
  std::copy(content.begin(), content.end(), copy.data.get());
  return copy;
}

// An IDX file checked against its expected magic number: its dimensions and its data bytes.
struct IdxFile {
  std::vector<Index> dims;
  Bytes content;
  std::size_t data_offset = 0;
  const unsigned char* data() const { return content.data.get() + data_offset; }
};

// The dimensions an IDX header declares, checked against the expected magic number, and the
// number of data bytes they make (saturating: only a corrupt header declares more than 2^64).
struct IdxHeader {
  std::vector<Index> dims;
  std::uint64_t data_bytes = 1;
};

IdxHeader parse_idx_header(std::string_view header, const std::string& path, std::uint32_t magic,
                           const std::string& kind) {
  const std::size_t n_dims = magic & 0xFFu;
  const std::size_t header_bytes = 4 * (1 + n_dims);
  const auto bytes = reinterpret_cast<const unsigned char*>(header.data());
  const auto fail_header = [&] {
    throw DataError("'" + path + "' is not an " + kind + " file: expected a " + std::to_string(header_bytes) +
                    "-byte IDX header, found " + std::to_string(header.size()) + " bytes");
  };
  if (header.size() < 4) fail_header();
  const std::uint32_t found = big_endian_u32(bytes);
  if (found != magic) {
    throw DataError("'" + path + "' is not an " + kind + " file: expected magic number " + hex(magic) + ", found " +
                    hex(found));
  }
  if (header.size() < header_bytes) fail_header();
  IdxHeader parsed;
  for (std::size_t k = 0; k < n_dims; ++k) {
    parsed.dims.push_back(big_endian_u32(bytes + 4 * (k + 1)));
    parsed.data_bytes = saturating_product(parsed.data_bytes, static_cast<std::uint64_t>(parsed.dims.back()));
  }
  return parsed;
}

// An IDX file checked against its expected magic number: its dimensions and its data bytes. The
// header is read first, so that a file (a gzip bomb above all) whose declared data exceed the
// memory budget is refused before it is inflated, and never inflated beyond what it declares.
IdxFile read_idx(const std::string& path, std::uint32_t magic, const std::string& kind, ByteSize budget) {
  Bytes file = read_file(path, budget);
  const bool gzipped = is_gzip(file);
  const std::size_t header_bytes = 4 * (1 + (magic & 0xFFu));
  const IdxHeader header = parse_idx_header(leading_bytes(file, path, header_bytes), path, magic, kind);
  const std::uint64_t expected = header.data_bytes;
  check_memory(expected == UINT64_MAX ? expected : header_bytes + expected, budget,
               "'" + path + "', whose header declares " + shape_text(header.dims) + " bytes,");
  IdxFile idx{header.dims, decompressed(std::move(file), path, header_bytes + expected), header_bytes};
  const auto found_bytes = static_cast<std::uint64_t>(idx.content.size - header_bytes);
  if (found_bytes != expected) {
    throw DataError("'" + path + "' is " + (found_bytes < expected ? "truncated" : "longer than its header says") +
                    ": the header declares " + std::to_string(expected) + " data bytes, found " +
                    (found_bytes > expected && gzipped ? "more" : std::to_string(found_bytes)));
  }
  return idx;
}

// Pixels to doubles, on both cores for a large matrix (12000 x 784 takes ~10 ms on one).
RowMatrix to_doubles(const unsigned char* pixels, Index count, Index d) {
  RowMatrix images(count, d);
#pragma omp parallel for schedule(static) if (count * d >= (Index{1} << 20))
  for (Index k = 0; k < count; ++k) {
    std::copy(pixels + k * d, pixels + (k + 1) * d, images.row(k).data());
  }
  return images;
}

// The images `rows` of `idx`, or all of them when `rows` is null. A selection's bytes are first
// gathered and the decoded file freed, so that it (47 MB for 60000 images) and the doubles
// (75 MB for 12000 images) are never held at once.
// Pixels an image of `idx`. A zero dimension is refused: it declares no data bytes whatever the
// others are, so the size check bounds neither the count (2^32 - 1 empty images) nor, with no
// images, the product rows x columns (which could overflow).
Index pixels_per_image(const IdxFile& idx, const std::string& path) {
  if (idx.dims[0] == 0 || idx.dims[1] == 0 || idx.dims[2] == 0) {
    throw DataError("'" + path + "' declares " + shape_text(idx.dims) +
                    " images x rows x columns: expected at least one image of 1 x 1 pixels");
  }
  return idx.dims[1] * idx.dims[2];
}

RowMatrix image_rows(IdxFile idx, const std::string& path, const std::vector<Index>* rows, ByteSize budget) {
  const Index n = idx.dims[0];
  const Index d = pixels_per_image(idx, path);
  const auto count = rows == nullptr ? n : static_cast<Index>(rows->size());
  check_memory(idx.content.size + static_cast<std::uint64_t>(count * d) * sizeof(double), budget,
               "converting " + std::to_string(count) + " images of '" + path + "' to doubles");
  if (rows == nullptr) return to_doubles(idx.data(), n, d);
  for (const Index row : *rows) {
    if (row < 0 || row >= n) {
      throw OptionError::with_text(
          "rows", "image " + std::to_string(row) + " is outside '" + path + "' (" + std::to_string(n) + " images)");
    }
  }
  Bytes kept(static_cast<std::size_t>(count * d));
  for (Index k = 0; k < count; ++k) {
    const unsigned char* image = idx.data() + (*rows)[static_cast<std::size_t>(k)] * d;
    std::copy(image, image + d, kept.data.get() + k * d);
  }
  idx.content = Bytes();
  return to_doubles(kept.data.get(), count, d);
}

const std::string kImagesKind = "IDX image (idx3-ubyte)";

// An IDX file read forward in pieces: an uncompressed one by seeking, a gzipped one through zlib's
// stream reader (whose forward seek inflates and discards).
class IdxRowReader {
 public:
  explicit IdxRowReader(const std::string& path) : path_(path) {
    const std::unique_ptr<std::FILE, int (*)(std::FILE*)> probe(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!probe) throw ResourceError("cannot open '" + path + "' for reading");
    unsigned char magic[2] = {0, 0};
    gzipped_ = std::fread(magic, 1, 2, probe.get()) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzipped_) {
      gz_.reset(gzopen(path.c_str(), "rb"));
      if (!gz_) throw ResourceError("cannot open '" + path + "' for reading");
      gzbuffer(gz_.get(), 1u << 20);
    } else {
      file_.reset(std::fopen(path.c_str(), "rb"));
      if (!file_) throw ResourceError("cannot open '" + path + "' for reading");
    }
  }
  bool gzipped() const { return gzipped_; }

  /// Up to `count` bytes from `offset` (forward only when gzipped); returns how many were read.
  std::size_t read_at(std::uint64_t offset, char* out, std::size_t count) {
    if (!gzipped_) {
      if (std::fseek(file_.get(), static_cast<long>(offset), SEEK_SET) != 0) fail();
      return std::fread(out, 1, count, file_.get());
    }
    if (gzseek(gz_.get(), static_cast<z_off_t>(offset), SEEK_SET) < 0) fail();
    std::size_t got = 0;
    while (got < count) {
      const int piece =
          gzread(gz_.get(), out + got, static_cast<unsigned>(std::min<std::size_t>(count - got, 1u << 30)));
      if (piece < 0) fail();
      if (piece == 0) break;
      got += static_cast<std::size_t>(piece);
    }
    return got;
  }

  /// The uncompressed file's size (its data bytes are checked against the header); 0 when gzipped,
  /// whose size is known only by inflating all of it.
  std::uint64_t uncompressed_size() {
    if (gzipped_ || std::fseek(file_.get(), 0, SEEK_END) != 0) return 0;
    return static_cast<std::uint64_t>(std::ftell(file_.get()));
  }

 private:
  [[noreturn]] void fail() const {
    int code = Z_OK;
    throw ResourceError("cannot read '" + path_ + "'" +
                        (gzipped_ && gz_ ? std::string(": ") + gzerror(gz_.get(), &code) : std::string()));
  }

  std::string path_;
  bool gzipped_ = false;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, std::fclose};
  std::unique_ptr<gzFile_s, int (*)(gzFile)> gz_{nullptr, gzclose};
};

// The images `rows` (increasing) of an IDX file, reading only what they need: of an uncompressed
// file their bytes, of a gzipped one the stream inflated up to the last of them. A rank of a
// sharded job holds its own rows, never the whole file (docs/distributed.md). Returns nothing for
// rows out of increasing order, or a gzipped file without `stream_gzip` (the caller then reads the
// file whole). A gzipped file's data after the last row wanted are not inflated, so a file cut
// short there is found only by the ranks reading that far.
std::optional<detail::IdxImages> read_image_rows(const std::string& path, const std::vector<Index>& rows,
                                                 Index expected_count, ByteSize budget, bool stream_gzip) {
  if (std::adjacent_find(rows.begin(), rows.end(), std::greater_equal<Index>()) != rows.end()) return std::nullopt;
  IdxRowReader reader(path);
  if (reader.gzipped() && !stream_gzip) return std::nullopt;
  std::string header(16, '\0');
  header.resize(reader.read_at(0, header.data(), header.size()));
  const IdxHeader parsed = parse_idx_header(header, path, kImagesMagic, kImagesKind);
  if (!reader.gzipped()) {
    const std::uint64_t found_bytes = reader.uncompressed_size() - header.size();
    if (found_bytes != parsed.data_bytes) {
      throw DataError("'" + path + "' is " +
                      (found_bytes < parsed.data_bytes ? "truncated" : "longer than its header says") +
                      ": the header declares " + std::to_string(parsed.data_bytes) + " data bytes, found " +
                      std::to_string(found_bytes));
    }
  }
  IdxFile dims_only{parsed.dims, Bytes(), header.size()};
  const Index d = pixels_per_image(dims_only, path);
  if (parsed.dims[0] != expected_count) {
    throw DataError("'" + path + "' holds " + std::to_string(parsed.dims[0]) + " images, but its label file holds " +
                    std::to_string(expected_count) + " labels");
  }
  const auto count = static_cast<Index>(rows.size());
  check_memory(static_cast<std::uint64_t>(count * d) * (1 + sizeof(double)), budget,
               "reading " + std::to_string(count) + " images of '" + path + "' as doubles");
  Bytes kept(static_cast<std::size_t>(count * d));
  for (Index k = 0; k < count;) {  // runs of consecutive rows, one read each
    Index run = 1;
    while (k + run < count && rows[k + run] == rows[k] + run) ++run;
    if (rows[k] < 0 || rows[k] + run > parsed.dims[0])
      throw OptionError::with_text("rows", "image " + std::to_string(rows[k] < 0 ? rows[k] : rows[k] + run - 1) +
                                               " is outside '" + path + "' (" + std::to_string(parsed.dims[0]) +
                                               " images)");
    const std::uint64_t offset = header.size() + static_cast<std::uint64_t>(rows[k] * d);
    const auto bytes = static_cast<std::size_t>(run * d);
    if (reader.read_at(offset, reinterpret_cast<char*>(kept.data.get() + k * d), bytes) != bytes)
      throw DataError("'" + path + "' is truncated: the header declares " + std::to_string(parsed.dims[0]) +
                      " images, but image " + std::to_string(rows[k] + run - 1) + " is cut short");
    k += run;
  }
  return detail::IdxImages{to_doubles(kept.data.get(), count, d), ImageShape{1, parsed.dims[1], parsed.dims[2]}};
}

}  // namespace

namespace detail {

IdxImages read_idx_image_rows(const std::string& path, const std::vector<Index>& rows, Index expected_count,
                              ByteSize budget, bool shard) {
  if (std::optional<IdxImages> images = read_image_rows(path, rows, expected_count, budget, shard))
    return std::move(*images);
  IdxFile idx = read_idx(path, kImagesMagic, kImagesKind, budget);
  if (idx.dims[0] != expected_count) {
    throw DataError("'" + path + "' holds " + std::to_string(idx.dims[0]) + " images, but its label file holds " +
                    std::to_string(expected_count) + " labels");
  }
  const ImageShape shape{1, idx.dims[1], idx.dims[2]};
  return {image_rows(std::move(idx), path, &rows, budget), shape};
}

}  // namespace detail

RowMatrix read_idx_images(const std::string& path, ByteSize budget) {
  return image_rows(read_idx(path, kImagesMagic, kImagesKind, budget), path, nullptr, budget);
}

VectorXd read_idx_labels(const std::string& path, ByteSize budget) {
  const IdxFile idx = read_idx(path, kLabelsMagic, "IDX label (idx1-ubyte)", budget);
  const unsigned char* labels = idx.data();
  VectorXd y(idx.dims[0]);
  std::copy(labels, labels + idx.dims[0], y.data());
  return y;
}

}  // namespace filkit
