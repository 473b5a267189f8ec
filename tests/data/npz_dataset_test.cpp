// Images in .npz archives (src/data/npz_dataset.cpp): grey (n, H, W), colour (n, C, H, W) and
// (n, H, W, C) arrays against hand-made pixels, the layout auto tells from the shape or asks for,
// X_test read like X, and the malformed shapes refused.
#include "filkit/data/load.hpp"

#include "data/npz_dataset.hpp"
#include "test_util.hpp"

#include <numeric>

namespace filkit {
namespace {

using testing::npy_bytes;
using testing::npy_f8;
using testing::raw_bytes;
using testing::TempDir;
using testing::zip_bytes;

// 0, 1, 2, ... count - 1: pixel values that say where they were in the file.
std::vector<double> counting(std::size_t count) {
  std::vector<double> values(count);
  std::iota(values.begin(), values.end(), 0.0);
  return values;
}

// A float64 array of the given Python shape, e.g. "(2, 3, 2, 2)", holding 0, 1, 2, ...
std::string counting_array(const std::string& shape, std::size_t count) {
  return npy_bytes("<f8", shape, raw_bytes(counting(count)));
}

DataOptions npz_options(const std::string& path) {
  DataOptions options;
  options.data = path;
  options.test_fraction = 0.0;
  return options;
}

TEST(NpzImages, KeepsNchwRowsAsTheyAreInChannelMajorOrder) {
  TempDir dir;
  const std::string path = dir.write(
      "nchw.npz", zip_bytes({{"X.npy", counting_array("(2, 3, 2, 2)", 24)}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  const DatasetSplit split = load_dataset(npz_options(path));
  EXPECT_EQ(split.train.image, (ImageShape{3, 2, 2}));
  // Row i holds pixel (c, h, w) at column (c * 2 + h) * 2 + w: the file's order.
  RowMatrix expected(2, 12);
  for (Index k = 0; k < 24; ++k) expected(k / 12, k % 12) = static_cast<double>(k);
  EXPECT_EQ(split.train.X, expected);
  EXPECT_NE(split.train.source.find("images 3 x 2 x 2 read as nchw"), std::string::npos) << split.train.source;
}

TEST(NpzImages, TransposesNhwcArraysToChannelMajorRows) {
  TempDir dir;
  // (n, H, W, C) = (2, 2, 2, 3): the file holds pixel (h, w)'s three channels together.
  const std::string path = dir.write(
      "nhwc.npz", zip_bytes({{"X.npy", counting_array("(2, 2, 2, 3)", 24)}, {"y.npy", npy_f8({0, 1}, 2)}}, true));
  const DatasetSplit split = load_dataset(npz_options(path));
  EXPECT_EQ(split.train.image, (ImageShape{3, 2, 2}));
  // Red plane of image 0: values 0, 3, 6, 9 (channel 0 of pixels (0,0), (0,1), (1,0), (1,1)).
  EXPECT_EQ(split.train.X.row(0), (Eigen::RowVectorXd(12) << 0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11).finished());
  EXPECT_EQ(split.train.X.row(1), (split.train.X.row(0).array() + 12).matrix());
  EXPECT_NE(split.train.source.find("read as nhwc"), std::string::npos) << split.train.source;
}

TEST(NpzImages, ReadsThreeDimensionalArraysAsGreyImages) {
  TempDir dir;
  const std::string path = dir.write(
      "grey.npz", zip_bytes({{"X.npy", counting_array("(2, 2, 3)", 12)}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  const DatasetSplit split = load_dataset(npz_options(path));
  EXPECT_EQ(split.train.image, (ImageShape{1, 2, 3}));
  EXPECT_EQ(split.train.X, (RowMatrix{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}));
}

TEST(NpzImages, LeavesTwoDimensionalArraysAsTablesWithoutAnImageShape) {
  TempDir dir;
  const std::string path =
      dir.write("table.npz", zip_bytes({{"X.npy", npy_f8({1, 2, 3, 4}, 2, 2)}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  EXPECT_FALSE(load_dataset(npz_options(path)).train.image.has_value());
}

TEST(NpzImages, AutoReadsTheLayoutOnlyWhenTheShapeAllowsOne) {
  const NpyArray ambiguous{{2, 3, 4, 3}, counting(72)};
  EXPECT_INVALID_ARGUMENT(detail::array_rows(ambiguous, "X", "a.npz", std::nullopt), "array 'X' of 'a.npz'",
                          "(2, 3, 4, 3)", "both its second and its last axis", "set image_layout to nchw",
                          "nhwc for (n, H, W, C)");
  const NpyArray neither{{2, 5, 4, 6}, counting(240)};
  EXPECT_INVALID_ARGUMENT(detail::array_rows(neither, "X", "a.npz", std::nullopt), "(2, 5, 4, 6)",
                          "neither its second nor its last axis", "image_layout");
  // A stated layout reads either shape.
  const auto nhwc = detail::array_rows(ambiguous, "X", "a.npz", ImageLayout::kNhwc);
  EXPECT_EQ(nhwc.image, (ImageShape{3, 3, 4}));
  EXPECT_EQ(nhwc.X(0, 1), 3.0);  // channel 0 of pixel (0, 1)
  const auto nchw = detail::array_rows(neither, "X", "a.npz", ImageLayout::kNchw);
  EXPECT_EQ(nchw.image, (ImageShape{5, 4, 6}));
  EXPECT_EQ(nchw.X.row(1)(0), 120.0);
  // Grey and RGB with a single channel axis: (n, 1, H, W) and (n, H, W, 3).
  EXPECT_EQ(detail::array_rows(NpyArray{{1, 1, 4, 5}, counting(20)}, "X", "a.npz", std::nullopt).layout_used,
            ImageLayout::kNchw);
  EXPECT_EQ(detail::array_rows(NpyArray{{1, 4, 5, 3}, counting(60)}, "X", "a.npz", std::nullopt).layout_used,
            ImageLayout::kNhwc);
}

TEST(NpzImages, TheImageLayoutOptionReachesTheLoader) {
  TempDir dir;
  const std::string path = dir.write(
      "both.npz", zip_bytes({{"X.npy", counting_array("(2, 3, 2, 3)", 36)}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  DataOptions options = npz_options(path);
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "(2, 3, 2, 3)", "image_layout");
  options.image_layout = ImageLayout::kNhwc;
  const DatasetSplit nhwc = load_dataset(options);
  EXPECT_EQ(nhwc.train.image, (ImageShape{3, 3, 2}));
  EXPECT_EQ(nhwc.train.X(0, 1), 3.0);
  options.image_layout = ImageLayout::kNchw;
  EXPECT_EQ(load_dataset(options).train.image, (ImageShape{3, 2, 3}));
  EXPECT_EQ(parse_enum<ImageLayout>("nhwc"), ImageLayout::kNhwc);
  EXPECT_INVALID_ARGUMENT(parse_enum<ImageLayout>("chw"), "nchw, nhwc");
}

TEST(NpzImages, ReadsXTestInTheLayoutOfXAndKeepsTheShapeThroughSplitsAndClasses) {
  TempDir dir;
  // X's (4, 2, 2, 3) is NHWC, and X_test is read in X's layout.
  const std::string path = dir.write("split.npz", zip_bytes({{"X.npy", counting_array("(4, 2, 2, 3)", 48)},
                                                             {"y.npy", npy_f8({0, 1, 2, 1}, 4)},
                                                             {"X_test.npy", counting_array("(1, 2, 2, 3)", 12)},
                                                             {"y_test.npy", npy_f8({2}, 1)}},
                                                            false));
  DataOptions options = npz_options(path);
  options.classes = {2, 1};
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 3);
  EXPECT_EQ(split.train.image, (ImageShape{3, 2, 2}));
  EXPECT_EQ(split.test.image, (ImageShape{3, 2, 2}));
  EXPECT_EQ(split.test.X.row(0), (Eigen::RowVectorXd(12) << 0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11).finished());
  // Without X_test, the seeded split keeps the shape in both parts.
  const std::string plain = dir.write("plain.npz", zip_bytes({{"X.npy", counting_array("(10, 1, 2, 2)", 40)},
                                                              {"y.npy", npy_f8({0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, 10)}},
                                                             false));
  DataOptions held_out = npz_options(plain);
  held_out.test_fraction = 0.3;
  const DatasetSplit parts = load_dataset(held_out);
  EXPECT_EQ(parts.test.n(), 3);
  EXPECT_EQ(parts.train.image, (ImageShape{1, 2, 2}));
  EXPECT_EQ(parts.test.image, (ImageShape{1, 2, 2}));
}

TEST(NpzImages, RefusesMismatchedAndMalformedImageArrays) {
  TempDir dir;
  DataOptions options;
  options.data = dir.write("test-shape.npz", zip_bytes({{"X.npy", counting_array("(2, 3, 2, 2)", 24)},
                                                        {"y.npy", npy_f8({0, 1}, 2)},
                                                        {"X_test.npy", counting_array("(1, 1, 2, 2)", 4)},
                                                        {"y_test.npy", npy_f8({0}, 1)}},
                                                       false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "X has images 3 x 2 x 2 but X_test has images 1 x 2 x 2");
  options.data = dir.write("test-table.npz", zip_bytes({{"X.npy", counting_array("(2, 1, 2, 2)", 8)},
                                                        {"y.npy", npy_f8({0, 1}, 2)},
                                                        {"X_test.npy", npy_f8({1, 2, 3, 4}, 1, 4)},
                                                        {"y_test.npy", npy_f8({0}, 1)}},
                                                       false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "X has images 1 x 2 x 2 but X_test has 4 columns");
  options.data = dir.write(
      "zero.npz", zip_bytes({{"X.npy", npy_bytes("<f8", "(2, 3, 0, 2)", "")}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  options.image_layout = ImageLayout::kNchw;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "'X'", "(2, 3, 0, 2)", "3 x 0 x 2", "no pixel");
  options.image_layout.reset();
  options.data = dir.write(
      "five.npz", zip_bytes({{"X.npy", npy_bytes("<f8", "(1, 1, 1, 2, 1)", raw_bytes(std::vector<double>{1, 2}))},
                             {"y.npy", npy_f8({0}, 1)}},
                            false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "5 dimensions", "1-D to 4-D");
  options.data = dir.write(
      "labels.npz", zip_bytes({{"X.npy", counting_array("(2, 1, 2, 2)", 8)}, {"y.npy", npy_f8({0, 1}, 2, 1)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "array 'y'", "must be 1-D", "found 2-D");
  options.data = dir.write(
      "rows.npz", zip_bytes({{"X.npy", counting_array("(2, 1, 2, 2)", 8)}, {"y.npy", npy_f8({0, 1, 0}, 3)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "X has 2 rows but y has 3");
  // Empty images with absurd sides: no values to bound them, so their product is checked.
  options.data = dir.write("huge.npz", zip_bytes({{"X.npy", npy_bytes("<f8", "(0, 3, 4294967296, 4294967296)", "")},
                                                  {"y.npy", npy_bytes("<f8", "(0,)", "")}},
                                                 false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "(0, 3, 4294967296, 4294967296)", "too large");
}

TEST(NpzImages, TheImageLayoutIsRefusedForDataWithoutImageArrays) {
  TempDir dir;
  DataOptions options;
  options.image_layout = ImageLayout::kNhwc;
  options.data = dir.write("t.csv", "x,y\n1,0\n2,1\n");
  options.target = "y";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "image_layout = nhwc", ".npz files only", "t.csv");
  options.target = "";
  options.data = "mnist";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "image_layout = nhwc", "'mnist'");
}

}  // namespace
}  // namespace filkit
