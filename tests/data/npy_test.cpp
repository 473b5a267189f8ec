// NumPy .npy arrays and .npz archives: every supported dtype and header version, stored and
// deflated members, and every malformed-input error.
#include "filkit/data/npy.hpp"
#include "filkit/data/dataset.hpp"

#include "test_util.hpp"

#include <cmath>
#include <cstdlib>

namespace filkit {
namespace {

using testing::npy_bytes;
using testing::npy_f8;
using testing::raw_bytes;
using testing::TempDir;
using testing::zip_bytes;

const std::vector<double> kSix = {1, 2, 3, 4, 5, 6};

TEST(NpyReader, ReadsEverySupportedDtypeAsDoubles) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> arrays = {
      {"<f8", raw_bytes(kSix)},
      {"<f4", raw_bytes(std::vector<float>{1, 2, 3, 4, 5, 6})},
      {"|u1", raw_bytes(std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6})},
      {"<i8", raw_bytes(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6})},
      {"<i4", raw_bytes(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6})},
  };
  for (const auto& [descr, data] : arrays) {
    const NpyArray array = read_npy(dir.write("a.npy", npy_bytes(descr, "(2, 3)", data)));
    EXPECT_EQ(array.shape, (std::vector<Index>{2, 3})) << descr;
    EXPECT_EQ(array.values, kSix) << descr;
  }
}

TEST(NpyReader, ReadsNegativeAndFractionalValuesExactly) {
  TempDir dir;
  const std::vector<double> values = {-1.5, 0.1, -1e150};  // the largest magnitude accepted
  EXPECT_EQ(read_npy(dir.write("a.npy", npy_f8(values, 3))).values, values);
  const auto ints = read_npy(dir.write("i.npy", npy_bytes("<i4", "(2,)", raw_bytes(std::vector<std::int32_t>{-7, 9}))));
  EXPECT_EQ(ints.values, (std::vector<double>{-7, 9}));
}

TEST(NpyWriter, WritesWhatReadNpyReadsBackExactly) {
  TempDir dir;
  RowMatrix values(3, 5);
  for (Index i = 0; i < values.size(); ++i)
    values.data()[i] = std::ldexp(static_cast<double>(i) - 7.3, static_cast<int>(i) - 4);
  const std::string bytes = filkit::npy_bytes(values);
  // numpy's layout: magic, version 1.0, then a header that ends the preamble at a multiple of 64.
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t data_start = 10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ(data_start % 64, 0u);
  EXPECT_EQ(bytes[data_start - 1], '\n');
  EXPECT_EQ(bytes.size(), data_start + 15 * sizeof(double));
  const NpyArray read = read_npy(dir.write("w.npy", bytes));
  EXPECT_EQ(read.shape, (std::vector<Index>{3, 5}));
  for (Index i = 0; i < 3; ++i)
    for (Index j = 0; j < 5; ++j) EXPECT_EQ(read.values[static_cast<std::size_t>(i * 5 + j)], values(i, j));
  EXPECT_EQ(read_npy(dir.write("empty.npy", filkit::npy_bytes(RowMatrix(0, 4)))).shape, (std::vector<Index>{0, 4}));
}

TEST(NpyReader, ReadsHeaderVersions2And3) {
  TempDir dir;
  for (int version : {2, 3}) {
    const auto array = read_npy(dir.write("a.npy", npy_bytes("<f8", "(6,)", raw_bytes(kSix), version)));
    EXPECT_EQ(array.shape, (std::vector<Index>{6}));
    EXPECT_EQ(array.values, kSix);
  }
}

TEST(NpyReader, RejectsFortranOrder) {
  TempDir dir;
  const std::string path = dir.write("f.npy", npy_bytes("<f8", "(2, 3)", raw_bytes(kSix), 1, true));
  EXPECT_INVALID_ARGUMENT(read_npy(path), path, "Fortran order");
}

TEST(NpyReader, RejectsUnsupportedDtypeListingTheSupportedOnes) {
  TempDir dir;
  for (const std::string descr : {">f8", "<c16", "<u2"}) {
    const std::string path = dir.write("d.npy", npy_bytes(descr, "(1,)", std::string(16, '\0')));
    EXPECT_INVALID_ARGUMENT(read_npy(path), path, "'" + descr + "'", "'<f8', '<f4', '|u1'");
  }
}

TEST(NpyReader, RejectsTruncatedData) {
  TempDir dir;
  const std::string bytes = npy_f8(kSix, 2, 3);
  const std::string path = dir.write("t.npy", bytes.substr(0, bytes.size() - 8));
  EXPECT_INVALID_ARGUMENT(read_npy(path), path, "6 values of 8 bytes", "40 data bytes", "truncated");
}

TEST(NpyReader, RejectsBadMagicVersionAndHeader) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_npy(dir.write("m.npy", "PK\x03\x04 not numpy")), "magic string");
  std::string future = npy_f8(kSix, 6);
  future[6] = 4;
  EXPECT_INVALID_ARGUMENT(read_npy(dir.write("v.npy", future)), "format version 4.0");
  EXPECT_INVALID_ARGUMENT(read_npy(dir.write("h.npy", npy_bytes("<f8", "[6]", raw_bytes(kSix)))), "malformed header");
}

TEST(NpyReader, ReadsImageArraysOfThreeAndFourDimensionsInCOrder) {
  TempDir dir;
  const NpyArray grey = read_npy(dir.write("3d.npy", npy_bytes("<f8", "(1, 2, 3)", raw_bytes(kSix))));
  EXPECT_EQ(grey.shape, (std::vector<Index>{1, 2, 3}));
  EXPECT_EQ(grey.values, kSix);
  const NpyArray colour = read_npy(
      dir.write("4d.npy", npy_bytes("|u1", "(1, 3, 1, 2)", raw_bytes(std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}))));
  EXPECT_EQ(colour.shape, (std::vector<Index>{1, 3, 1, 2}));
  EXPECT_EQ(colour.values, kSix);
}

TEST(NpyReader, RejectsArraysOfNoneOrMoreThanFourDimensions) {
  TempDir dir;
  const std::string five = dir.write("5d.npy", npy_bytes("<f8", "(1, 1, 2, 3, 1)", raw_bytes(kSix)));
  EXPECT_INVALID_ARGUMENT(read_npy(five), five, "5 dimensions", "1-D to 4-D");
  const std::string scalar = dir.write("0d.npy", npy_bytes("<f8", "()", raw_bytes(std::vector<double>{1})));
  EXPECT_INVALID_ARGUMENT(read_npy(scalar), scalar, "0 dimensions", "1-D to 4-D");
}

std::vector<std::pair<std::string, std::string>> two_arrays() {
  return {{"X.npy", npy_f8(kSix, 3, 2)}, {"y.npy", npy_f8({0, 1, 1}, 3)}};
}

TEST(NpzReader, ReadsStoredMembersByName) {
  TempDir dir;
  const auto arrays = read_npz(dir.write("a.npz", zip_bytes(two_arrays(), false)));
  ASSERT_EQ(arrays.size(), 2u);
  EXPECT_EQ(arrays.at("X").shape, (std::vector<Index>{3, 2}));
  EXPECT_EQ(arrays.at("X").values, kSix);
  EXPECT_EQ(arrays.at("y").values, (std::vector<double>{0, 1, 1}));
}

TEST(NpzReader, ReadsDeflatedMembers) {
  TempDir dir;
  const std::string zip = zip_bytes(two_arrays(), true);
  ASSERT_LT(zip.size(), zip_bytes(two_arrays(), false).size());  // really compressed
  const auto arrays = read_npz(dir.write("a.npz", zip));
  EXPECT_EQ(arrays.at("X").values, kSix);
  EXPECT_EQ(arrays.at("y").values, (std::vector<double>{0, 1, 1}));
}

TEST(NpzReader, RejectsMemberFailingItsCrc) {
  TempDir dir;
  std::string zip = zip_bytes(two_arrays(), false);
  const std::size_t last_byte_of_x = 30 + std::string("X.npy").size() + two_arrays()[0].second.size() - 1;
  zip[last_byte_of_x] ^= 0x40;
  const std::string path = dir.write("crc.npz", zip);
  EXPECT_INVALID_ARGUMENT(read_npz(path), path, "'X.npy'", "CRC-32");
}

TEST(NpzReader, RejectsCorruptDeflateStream) {
  TempDir dir;
  std::string zip = zip_bytes(two_arrays(), true);
  zip[30 + 5 + 2] ^= 0x7F;
  EXPECT_INVALID_ARGUMENT(read_npz(dir.write("z.npz", zip)), "'X.npy'");
}

TEST(NpzReader, RejectsFilesThatAreNotZipArchives) {
  TempDir dir;
  EXPECT_INVALID_ARGUMENT(read_npz(dir.write("n.npz", npy_f8(kSix, 6))), "end-of-central-directory");
  EXPECT_INVALID_ARGUMENT(read_npz(dir.write("short.npz", "PK")), "too short");
}

TEST(NpzReader, RejectsTruncatedArchive) {
  TempDir dir;
  const std::string zip = zip_bytes(two_arrays(), false);
  // Keep the directory but lose the middle: the members' offsets now point past the data.
  const std::string cut = zip.substr(0, 40) + zip.substr(zip.size() - 150);
  EXPECT_THROW(read_npz(dir.write("cut.npz", cut)), std::invalid_argument);
}

TEST(NpzReader, RejectsMembersThatAreNotNpyArrays) {
  TempDir dir;
  const std::string path = dir.write("txt.npz", zip_bytes({{"notes.txt", "hello"}}, false));
  EXPECT_INVALID_ARGUMENT(read_npz(path), "'notes.txt'", "not an .npy array");
}

// An archive written by numpy itself (ZIP64 extras in its local headers), when numpy exists.
TEST(NpzReader, ReadsArchivesWrittenByNumpy) {
  TempDir dir;
  const std::string path = dir.file("numpy.npz");
  const std::string script = "import numpy as np; np.savez_compressed('" + path +
                             "', X=np.arange(6, dtype=np.float32).reshape(2, 3), y=np.array([3, 4]))";
  if (std::system(("/usr/bin/python3 -c \"" + script + "\" 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  }
  const auto arrays = read_npz(path);
  EXPECT_EQ(arrays.at("X").shape, (std::vector<Index>{2, 3}));
  EXPECT_EQ(arrays.at("X").values, (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(arrays.at("y").values, (std::vector<double>{3, 4}));
}

TEST(NpyReader, RefusesNonFiniteAndOverflowProneValuesNamingTheElement) {
  TempDir dir;
  const std::string nan = dir.write("nan.npy", npy_f8({1, 2, 3, std::nan(""), 5, 6}, 3, 2));
  EXPECT_INVALID_ARGUMENT(read_npy(nan), "nan.npy'", "element (1, 1)", "is nan", "not finite");
  const std::string huge = dir.write("huge.npy", npy_f8({1, 2, 1e200}, 3));
  EXPECT_INVALID_ARGUMENT(read_npy(huge), "huge.npy'", "element (2)", "1e+200", "beyond +-1e150");
  const std::string inf = dir.write("inf.npz", zip_bytes({{"X.npy", npy_f8({-INFINITY, 0}, 2)}}, true));
  EXPECT_INVALID_ARGUMENT(read_npz(inf), "inf.npz:X.npy'", "element (0)", "-inf");
  // An image array names the element by all four indices: flat index 11 of (2, 3, 1, 2).
  std::vector<double> pixels(12, 0.0);
  pixels[11] = std::nan("");
  const std::string image = dir.write("image.npy", npy_bytes("<f8", "(2, 3, 1, 2)", raw_bytes(pixels)));
  EXPECT_INVALID_ARGUMENT(read_npy(image), "image.npy'", "element (1, 2, 0, 1)", "is nan");
}

// The size an archive records for a member, as a corrupt or hostile archive may state it.
std::string with_recorded_size(std::string zip, std::uint32_t size) {
  const std::size_t directory = zip.find(std::string("PK\x01\x02", 4));
  zip.replace(directory + 24, 4, testing::little_endian(size, 4));
  return zip;
}

// A few hundred bytes that declare a 4 GB array: refused before anything of that size is allocated.
TEST(NpzReader, RefusesAMemberWhoseDeclaredShapeIsNotWhatTheArchiveRecords) {
  TempDir dir;
  const std::string header_only = npy_bytes("<f8", "(500000000,)", "");
  const std::string zip = zip_bytes({{"X.npy", header_only}}, true);
  ASSERT_LT(zip.size(), 4096u);
  EXPECT_INVALID_ARGUMENT(read_npz(dir.write("a.npz", zip)), "'X.npy'",
                          "records " + std::to_string(header_only.size()) + " uncompressed bytes",
                          "array header declares " + std::to_string(header_only.size() + 4000000000ULL));
  const std::string recorded = with_recorded_size(zip, static_cast<std::uint32_t>(header_only.size() + 4000000000ULL));
  EXPECT_MEMORY_LIMIT(read_npz(dir.write("b.npz", recorded), ByteSize{std::uint64_t{1} << 30}),
                      "inflating member 'X.npy'", "500000000 values", "needs 7.5 GiB", "max_memory = 1G");
}

// 8 MB of zeros deflate to a few kilobytes: within a budget they load, beyond it they are refused
// before they are inflated.
TEST(NpzReader, RefusesAZipBombBeyondTheMemoryBudget) {
  TempDir dir;
  const std::string zeros = npy_f8(std::vector<double>(1 << 20, 0.0), 1 << 20);
  const std::string path = dir.write("bomb.npz", zip_bytes({{"X.npy", zeros}}, true));
  ASSERT_LT(testing::read_bytes(path).size(), 64u << 10);
  EXPECT_EQ(read_npz(path, ByteSize{64u << 20}).at("X").values.size(), 1u << 20);
  EXPECT_MEMORY_LIMIT(read_npz(path, ByteSize{4u << 20}), "inflating member 'X.npy'", "needs 16 MiB",
                      "max_memory = 4M");
}

}  // namespace
}  // namespace filkit
