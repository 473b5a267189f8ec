#include "filkit/base/sha256.hpp"

#include "filkit/base/errors.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace filkit {

namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotate_right(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/// The hash state, fed bytes in any pieces.
class Sha256 {
 public:
  void update(const unsigned char* bytes, std::size_t count) {
    length_ += count;
    for (std::size_t k = 0; k < count; ++k) {
      block_[filled_++] = bytes[k];
      if (filled_ == 64) {
        compress();
        filled_ = 0;
      }
    }
  }

  std::string hex() {
    const std::uint64_t bits = length_ * 8;
    const unsigned char one = 0x80, zero = 0;
    update(&one, 1);
    while (filled_ != 56) update(&zero, 1);
    unsigned char tail[8];
    for (int k = 0; k < 8; ++k) tail[k] = static_cast<unsigned char>(bits >> (56 - 8 * k));
    update(tail, 8);
    std::string text;
    char digits[9];
    for (std::uint32_t word : state_) {
      std::snprintf(digits, sizeof digits, "%08x", word);
      text += digits;
    }
    return text;
  }

 private:
  void compress() {
    std::uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = (std::uint32_t{block_[4 * t]} << 24) | (std::uint32_t{block_[4 * t + 1]} << 16) |
             (std::uint32_t{block_[4 * t + 2]} << 8) | std::uint32_t{block_[4 * t + 3]};
    for (int t = 16; t < 64; ++t) {
      const std::uint32_t s0 = rotate_right(w[t - 15], 7) ^ rotate_right(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = rotate_right(w[t - 2], 17) ^ rotate_right(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4], f = state_[5],
                  g = state_[6], h = state_[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t big1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
      const std::uint32_t choose = (e & f) ^ (~e & g);
      const std::uint32_t t1 = h + big1 + choose + kRound[static_cast<std::size_t>(t)] + w[t];
      const std::uint32_t big0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
      const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + big0 + majority;
    }
    const std::uint32_t added[8] = {a, b, c, d, e, f, g, h};
    for (int k = 0; k < 8; ++k) state_[static_cast<std::size_t>(k)] += added[k];
  }

  std::array<std::uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  std::size_t filled_ = 0;
  std::uint64_t length_ = 0;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Sha256 hash;
  hash.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return hash.hex();
}

std::string file_sha256_hex(const std::string& path) {
  // A regular file only (links followed): a device or FIFO (a link to /dev/zero) would be read for ever.
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw DataError("'" + path +
                    "' is not a regular file (a device, a FIFO, a directory or missing): "
                    "it cannot be hashed");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ResourceError("cannot open '" + path + "' for reading");
  Sha256 hash;
  std::vector<char> piece(std::size_t{1} << 20);
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
    hash.update(reinterpret_cast<const unsigned char*>(piece.data()), static_cast<std::size_t>(in.gcount()));
    if (in.eof()) break;
  }
  if (in.bad()) throw ResourceError("cannot read '" + path + "'");
  return hash.hex();
}

}  // namespace filkit
