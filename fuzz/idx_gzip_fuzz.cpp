// IDX through gzip (src/data/idx.cpp: libdeflate's single-member path, zlib's fallback): the input
// is a mode byte and the IDX content, which this target compresses into the file, so that the
// fuzzer varies the content while the gzip layers stay valid or are broken on purpose:
//   bit 0  two gzip members, split at a point given by the content's length and bits 4-7
//   bit 1  trailing garbage after the last member
//   bit 2  the last member cut short by a few bytes
//   bit 3  a wrong ISIZE (uncompressed size) in the last trailer
#include "idx_readers.hpp"

#include <zlib.h>

namespace {

std::string gzip(std::string_view content) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&stream, static_cast<uLong>(content.size())) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data()));
  stream.avail_in = static_cast<uInt>(content.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const unsigned mode = data[0];
  const std::string_view content = filkit::fuzz::as_text(data + 1, size - 1);
  std::string file;
  if (mode & 1u) {
    const std::size_t cut = content.size() * (mode >> 4) / 16;
    file = gzip(content.substr(0, cut)) + gzip(content.substr(cut));
  } else {
    file = gzip(content);
  }
  if (mode & 8u) file[file.size() - 1 - (mode >> 4) % 4] ^= static_cast<char>(0x5a);
  if (mode & 4u) file.resize(file.size() - 1 - (mode >> 4) % 12);
  if (mode & 2u) file += std::string("\x1f\x8b\0garbage", 1 + (mode >> 4) % 10);
  filkit::fuzz::read_idx_every_way(filkit::fuzz::write_input("input-idx-ubyte.gz", file));
  return 0;
}
