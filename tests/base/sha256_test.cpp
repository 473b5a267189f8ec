#include "filkit/base/sha256.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace filkit {
namespace {

// The test vectors of FIPS 180-2, appendix B (one block, two blocks, a million 'a's), and the
// empty message (NIST's example values).
TEST(Sha256, MatchesTheFipsTestVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, OfAFileReadInPiecesIsThatOfItsBytes) {
  const testing::TempDir dir;
  const std::string path = dir.file("a.bin");
  std::string bytes;
  for (long long k = 0; k < 3000000; ++k) bytes += static_cast<char>(k * 7919 % 251);  // over two 1 MiB pieces
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(file_sha256_hex(path), sha256_hex(bytes));
  EXPECT_INVALID_ARGUMENT(file_sha256_hex(dir.file("missing")), "missing' is not a regular file");
  // A device (here through a link, as a hostile store would give it) is refused, not read for ever.
  std::filesystem::create_symlink("/dev/zero", dir.file("zero"));
  EXPECT_INVALID_ARGUMENT(file_sha256_hex(dir.file("zero")), "zero' is not a regular file");
  std::filesystem::create_directory(dir.file("sub"));
  EXPECT_INVALID_ARGUMENT(file_sha256_hex(dir.file("sub")), "sub' is not a regular file");
}

}  // namespace
}  // namespace filkit
