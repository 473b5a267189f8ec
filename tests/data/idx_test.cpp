// IDX images and labels: raw and gzip files, and every malformed-input error.
#include "filkit/data/idx.hpp"
#include "filkit/data/dataset.hpp"

#include "test_util.hpp"

namespace filkit {
namespace {

using testing::idx_bytes;
using testing::TempDir;

constexpr std::uint32_t kImages = 0x00000803;
constexpr std::uint32_t kLabels = 0x00000801;

// Three 2x2 images with pixels 0..11.
std::string three_images() {
  std::string pixels;
  for (int v = 0; v < 12; ++v) pixels += static_cast<char>(v * 20);
  return idx_bytes(kImages, {3, 2, 2}, pixels);
}

TEST(IdxReader, ReadsImagesAsRowsOfRawPixels) {
  TempDir dir;
  const RowMatrix images = read_idx_images(dir.write("images", three_images()));
  ASSERT_EQ(images.rows(), 3);
  ASSERT_EQ(images.cols(), 4);
  EXPECT_EQ(images(0, 0), 0.0);
  EXPECT_EQ(images(1, 2), 6 * 20.0);
  EXPECT_EQ(images(2, 3), 11 * 20.0);
}

TEST(IdxReader, ReadsGzippedFilesLikeRawOnes) {
  TempDir dir;
  testing::write_gzip(dir.file("images.gz"), three_images());
  EXPECT_EQ(read_idx_images(dir.file("images.gz")), read_idx_images(dir.write("raw", three_images())));
}

TEST(IdxReader, ReadsLabels) {
  TempDir dir;
  const VectorXd labels = read_idx_labels(dir.write("labels", idx_bytes(kLabels, {3}, std::string("\x07\x00\x09", 3))));
  ASSERT_EQ(labels.size(), 3);
  EXPECT_EQ(labels(0), 7.0);
  EXPECT_EQ(labels(1), 0.0);
  EXPECT_EQ(labels(2), 9.0);
}

TEST(IdxReader, RejectsWrongMagicNumber) {
  TempDir dir;
  const std::string path = dir.write("labels", idx_bytes(kLabels, {3}, "abc"));
  EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "0x00000803", "0x00000801");
}

// A zero dimension declares no data bytes whatever the others are (fuzz findings idx-1, idx-2):
// 2^32 - 1 empty images would loop for seconds, 0 images of 2^32 - 1 x 2^32 - 1 overflow.
TEST(IdxReader, RejectsAZeroImageDimension) {
  TempDir dir;
  for (const std::vector<std::uint32_t>& dims : std::vector<std::vector<std::uint32_t>>{
           {4294967295u, 0, 28}, {4294967295u, 28, 0}, {0, 4294967295u, 4294967295u}, {0, 28, 28}}) {
    const std::string path = dir.write("images", idx_bytes(kImages, dims, ""));
    EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "expected at least one image of 1 x 1 pixels");
  }
}

TEST(IdxReader, RejectsTruncatedData) {
  TempDir dir;
  const std::string bytes = three_images();
  const std::string path = dir.write("images", bytes.substr(0, bytes.size() - 1));
  EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "truncated", "12 data bytes, found 11");
}

TEST(IdxReader, RejectsTruncatedHeader) {
  TempDir dir;
  const std::string path = dir.write("labels", std::string("\0\0\x08\x01\0\0", 6));
  EXPECT_INVALID_ARGUMENT(read_idx_labels(path), path, "8-byte IDX header", "found 6");
}

TEST(IdxReader, RejectsBytesBeyondTheDeclaredData) {
  TempDir dir;
  const std::string path = dir.write("labels", idx_bytes(kLabels, {2}, "abc"));
  EXPECT_INVALID_ARGUMENT(read_idx_labels(path), path, "longer than its header says");
}

TEST(IdxReader, RejectsTruncatedGzipStream) {
  TempDir dir;
  testing::write_gzip(dir.file("images.gz"), three_images());
  const std::string gz = testing::read_bytes(dir.file("images.gz"));
  for (std::size_t cut : {3, 12}) {  // inside the trailer, inside the compressed data
    const std::string path = dir.write("cut.gz", gz.substr(0, gz.size() - cut));
    EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "truncated");
  }
}

// Larger than zlib's and libdeflate's internal buffers, with varied content: 300 images 28x28.
std::string many_images() {
  std::string pixels;
  for (int v = 0; v < 300 * 784; ++v) pixels += static_cast<char>((v * 7 + v / 784) % 256);
  return idx_bytes(kImages, {300, 28, 28}, pixels);
}

TEST(IdxReader, ReadsLargeGzippedFilesLikeRawOnes) {
  TempDir dir;
  testing::write_gzip(dir.file("images.gz"), many_images());
  const RowMatrix images = read_idx_images(dir.file("images.gz"));
  EXPECT_EQ(images, read_idx_images(dir.write("raw", many_images())));
  const int last = 300 * 784 - 1;
  EXPECT_EQ(images(299, 783), static_cast<double>((last * 7 + last / 784) % 256));
}

// gzip allows several members one after another (cat a.gz b.gz): decoded as their concatenation.
TEST(IdxReader, ReadsConcatenatedGzipMembers) {
  TempDir dir;
  const std::string bytes = many_images();
  const std::size_t half = bytes.size() / 2;
  testing::write_gzip(dir.file("a.gz"), bytes.substr(0, half));
  testing::write_gzip(dir.file("b.gz"), bytes.substr(half));
  const std::string path =
      dir.write("both.gz", testing::read_bytes(dir.file("a.gz")) + testing::read_bytes(dir.file("b.gz")));
  EXPECT_EQ(read_idx_images(path), read_idx_images(dir.write("raw", bytes)));
}

TEST(IdxReader, RejectsCorruptGzipData) {
  TempDir dir;
  testing::write_gzip(dir.file("images.gz"), many_images());
  std::string gz = testing::read_bytes(dir.file("images.gz"));
  gz[gz.size() / 2] = static_cast<char>(gz[gz.size() / 2] ^ 0x55);
  const std::string path = dir.write("corrupt.gz", gz);
  EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "corrupt");
}

// A trailer declaring far more bytes than deflate can expand the stream to is corrupt, and is
// reported without allocating what it declares.
TEST(IdxReader, RejectsAnAbsurdDeclaredSize) {
  TempDir dir;
  testing::write_gzip(dir.file("images.gz"), three_images());
  std::string gz = testing::read_bytes(dir.file("images.gz"));
  gz.replace(gz.size() - 4, 4, testing::little_endian(0xFFFFFFF0u, 4));
  const std::string path = dir.write("absurd.gz", gz);
  EXPECT_INVALID_ARGUMENT(read_idx_images(path), path, "corrupt");
}

TEST(IdxReader, RejectsMissingFile) {
  TempDir dir;
  EXPECT_THROW_NAMING(read_idx_labels(dir.file("absent")), ResourceError, dir.file("absent"), "cannot open");
}

// 1.5 MB of zeros gzip to a couple of kilobytes: the header's shape is read first and refused
// beyond the budget, before anything is inflated.
TEST(IdxReader, RefusesAGzipBombByItsDeclaredShape) {
  TempDir dir;
  const std::string images = idx_bytes(kImages, {2000, 28, 28}, std::string(2000 * 784, '\0'));
  testing::write_gzip(dir.file("bomb.gz"), images);
  ASSERT_LT(testing::read_bytes(dir.file("bomb.gz")).size(), 16u << 10);
  EXPECT_EQ(read_idx_images(dir.file("bomb.gz"), ByteSize{64u << 20}).rows(), 2000);
  EXPECT_MEMORY_LIMIT(read_idx_images(dir.file("bomb.gz"), ByteSize{64u << 10}), "bomb.gz'",
                      "header declares 2000 x 28 x 28 bytes", "needs 1.5 MiB", "max_memory = 64K");
  // Within the budget for the bytes but not for their doubles.
  EXPECT_MEMORY_LIMIT(read_idx_images(dir.file("bomb.gz"), ByteSize{4u << 20}), "converting 2000 images",
                      "max_memory = 4M");
}

// A gzip stream is inflated no further than its header declares.
TEST(IdxReader, RejectsAGzipStreamLongerThanItsHeaderSays) {
  TempDir dir;
  testing::write_gzip(dir.file("labels.gz"), idx_bytes(kLabels, {2}, std::string(1 << 20, '\1')));
  EXPECT_INVALID_ARGUMENT(read_idx_labels(dir.file("labels.gz")), "longer than its header says",
                          "declares 2 data bytes, found more");
}

}  // namespace
}  // namespace filkit
