// The report's image montages: each example drawn H x W, grey or red-green-blue, from its C x H x W
// shape. The pixels of display_image against known values; the run's images re-loaded with the
// run's recorded settings, and every reason they cannot be drawn; and end to end, the PNG that
// gnuplot draws, decoded here, against the colours each example's pixels were given (NCHW and NHWC
// .npz arrays, grey and colour, non-square; CIFAR-10 files with a class selection).
#include "filkit/jobs/measure.hpp"
#include "filkit/report/report.hpp"
#include "report/report_internal.hpp"

#include "report_notes.hpp"
#include "test_util.hpp"

#include <sys/stat.h>

#include <array>
#include <cmath>
#include <functional>
#include <numeric>

namespace filkit {
namespace {

using testing::notes_text;

using report::RgbImage;
using testing::TempDir;
using Rgb = std::array<std::uint8_t, 3>;

// ---------------------------------------------------------------------------------------------
// A PNG reader for what gnuplot writes: 8-bit greyscale, RGB, palette or RGBA, not interlaced.

struct Png {
  int width = 0, height = 0;
  std::vector<Rgb> pixels;  // row by row
  const Rgb& at(int x, int y) const {
    return pixels[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)];
  }
};

std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
}

Png read_png(const std::string& path) {
  const std::string bytes = testing::read_bytes(path);
  if (bytes.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0) throw std::runtime_error(path + ": not a PNG");
  Png png;
  int colour_type = -1;
  std::string compressed, palette;
  for (std::size_t at = 8; at + 8 <= bytes.size();) {
    const std::uint32_t length = big_endian(bytes, at);
    const std::string type = bytes.substr(at + 4, 4), data = bytes.substr(at + 8, length);
    if (type == "IHDR") {
      png.width = static_cast<int>(big_endian(data, 0));
      png.height = static_cast<int>(big_endian(data, 4));
      if (data[8] != 8 || data[12] != 0) throw std::runtime_error(path + ": not 8-bit or interlaced");
      colour_type = data[9];
    } else if (type == "PLTE") {
      palette = data;
    } else if (type == "IDAT") {
      compressed += data;
    }
    at += 12 + length;
  }
  const int channels = colour_type == 0 ? 1 : colour_type == 2 ? 3 : colour_type == 3 ? 1 : colour_type == 6 ? 4 : 0;
  if (channels == 0) throw std::runtime_error(path + ": colour type " + std::to_string(colour_type));
  const std::size_t stride = static_cast<std::size_t>(png.width) * static_cast<std::size_t>(channels);
  std::string raw((stride + 1) * static_cast<std::size_t>(png.height), '\0');
  uLongf size = static_cast<uLongf>(raw.size());
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(compressed.data()),
                 static_cast<uLong>(compressed.size())) != Z_OK ||
      size != raw.size())
    throw std::runtime_error(path + ": bad image data");
  // Undo each row's filter (PNG specification, section 9).
  std::vector<std::uint8_t> previous(stride, 0), row(stride);
  const auto paeth = [](int a, int b, int c) {
    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
  };
  for (int y = 0; y < png.height; ++y) {
    const std::size_t start = static_cast<std::size_t>(y) * (stride + 1);
    const int filter = static_cast<unsigned char>(raw[start]);
    for (std::size_t i = 0; i < stride; ++i) {
      const int x = static_cast<unsigned char>(raw[start + 1 + i]);
      const int a = i >= static_cast<std::size_t>(channels) ? row[i - static_cast<std::size_t>(channels)] : 0;
      const int b = previous[i];
      const int c = i >= static_cast<std::size_t>(channels) ? previous[i - static_cast<std::size_t>(channels)] : 0;
      const int predicted = filter == 0   ? 0
                            : filter == 1 ? a
                            : filter == 2 ? b
                            : filter == 3 ? (a + b) / 2
                                          : paeth(a, b, c);
      row[i] = static_cast<std::uint8_t>(x + predicted);
    }
    for (int x = 0; x < png.width; ++x) {
      const std::uint8_t* p = row.data() + static_cast<std::size_t>(x) * static_cast<std::size_t>(channels);
      if (colour_type == 3) {
        const std::size_t k = 3 * std::size_t{p[0]};
        png.pixels.push_back({static_cast<std::uint8_t>(palette[k]), static_cast<std::uint8_t>(palette[k + 1]),
                              static_cast<std::uint8_t>(palette[k + 2])});
      } else if (channels == 1) {
        png.pixels.push_back({p[0], p[0], p[0]});
      } else {
        png.pixels.push_back({p[0], p[1], p[2]});  // RGBA on the white background gnuplot fills
      }
    }
    previous = row;
  }
  return png;
}

// The colours the k-th of `panels` side-by-side images in a montage shows at the centres of its
// height x width pixels. The image is found as the box of the panel's pixels that sit in a 5 x 5
// block of one colour other than white (the drawn pixels are blocks many screen pixels wide; the
// titles' strokes are thinner than 5), widened by the 2 pixels the block test trims at each edge.
std::vector<Rgb> panel_pixels(const Png& png, int k, int panels, Index height, Index width) {
  const int left = k * png.width / panels, right = (k + 1) * png.width / panels;
  const Rgb white = {255, 255, 255};
  int x0 = png.width, x1 = -1, y0 = png.height, y1 = -1;
  for (int y = 2; y + 2 < png.height; ++y)
    for (int x = std::max(left, 2); x < right && x + 2 < png.width; ++x) {
      const Rgb& centre = png.at(x, y);
      if (centre == white) continue;
      bool uniform = true;
      for (int dy = -2; dy <= 2 && uniform; ++dy)
        for (int dx = -2; dx <= 2 && uniform; ++dx) uniform = png.at(x + dx, y + dy) == centre;
      if (uniform) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x1 < 0) throw std::runtime_error("panel " + std::to_string(k) + ": no image found");
  x0 -= 2, x1 += 2, y0 -= 2, y1 += 2;
  std::vector<Rgb> centres;
  for (Index h = 0; h < height; ++h)
    for (Index w = 0; w < width; ++w) {
      const int x = x0 + static_cast<int>((static_cast<double>(w) + 0.5) * (x1 - x0 + 1) / static_cast<double>(width));
      const int y = y0 + static_cast<int>((static_cast<double>(h) + 0.5) * (y1 - y0 + 1) / static_cast<double>(height));
      centres.push_back(png.at(x, y));
    }
  return centres;
}

std::string colour_text(const Rgb& c) {
  return "(" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + ", " + std::to_string(c[2]) + ")";
}

// ---------------------------------------------------------------------------------------------
// Test images whose every pixel says which example and where: example s's pixel at cell j (a
// pixel, or a block of pixels, numbered row by row) is colour (digit_{j mod 3}(s) + j) mod base,
// digit_k(s) the k-th base-`base` digit of s. The first three cells spell s, so no two examples
// below base^3 look alike, and the + j changes the colour from cell to cell. The widths (in cells)
// are not multiples of 3 and of base: such a width would repeat rows and hide a flip upside down.

int pattern(int s, Index j, int base) {
  int digit = s;
  for (Index k = 0; k < j % 3; ++k) digit /= base;
  return static_cast<int>((digit % base + j) % base);
}

// Six colours of full saturation: red, green, blue, yellow, cyan, magenta.
constexpr std::array<Rgb, 6> kPalette = {Rgb{255, 0, 0},   Rgb{0, 255, 0},   Rgb{0, 0, 255},
                                         Rgb{255, 255, 0}, Rgb{0, 255, 255}, Rgb{255, 0, 255}};

// The colour (a 0/1 value a channel) of example s at pixel (h, w) of a height x width image.
Rgb colour_of(int s, Index h, Index w, Index width) {
  return kPalette[static_cast<std::size_t>(pattern(s, h * width + w, 6))];
}

// The example s whose image `row` is, in a dataset of `count` examples drawn by `pixel(s, c, h, w)`
// and stored channel-major (ImageShape); -1 if none.
int example_of(const RowMatrix& X, Index row, const ImageShape& shape, int count,
               const std::function<double(int, Index, Index, Index)>& pixel) {
  for (int s = 0; s < count; ++s) {
    bool same = true;
    for (Index c = 0; c < shape.channels && same; ++c)
      for (Index h = 0; h < shape.height && same; ++h)
        for (Index w = 0; w < shape.width && same; ++w)
          same = X(row, (c * shape.height + h) * shape.width + w) == pixel(s, c, h, w);
    if (same) return s;
  }
  return -1;
}

// The training rows in the montages' order: highest eta first, ties in training order.
std::vector<std::size_t> by_eta(const std::vector<double>& eta) {
  std::vector<std::size_t> order(eta.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return eta[a] > eta[b]; });
  return order;
}

// Checks both montages `<report_dir>/<section>-highest-<quantity>-images.png` and its lowest
// twin: panel k of the highest figure shows training row order[k], panel k of the lowest figure
// row order[n - 1 - k], and each of their pixels has the colour `expected(example of that row, h, w)`.
void expect_montages_in_order(const std::string& report_dir, const std::string& section, const std::string& quantity,
                              const std::vector<std::size_t>& order, const ImageShape& shape,
                              const std::function<int(std::size_t)>& example_of_row,
                              const std::function<Rgb(int, Index, Index)>& expected) {
  const int panels = static_cast<int>(std::min<std::size_t>(8, order.size()));
  for (const bool highest : {true, false}) {
    const std::string figure =
        report_dir + "/" + section + (highest ? "-highest-" : "-lowest-") + quantity + "-images.png";
    ASSERT_TRUE(std::filesystem::exists(figure)) << figure;
    const Png png = read_png(figure);
    for (int k = 0; k < panels; ++k) {
      const std::size_t row =
          highest ? order[static_cast<std::size_t>(k)] : order[order.size() - 1 - static_cast<std::size_t>(k)];
      const int s = example_of_row(row);
      ASSERT_GE(s, 0) << "training row " << row;
      const std::vector<Rgb> drawn = panel_pixels(png, k, panels, shape.height, shape.width);
      for (Index h = 0; h < shape.height; ++h)
        for (Index w = 0; w < shape.width; ++w) {
          const Rgb want = expected(s, h, w), got = drawn[static_cast<std::size_t>(h * shape.width + w)];
          for (std::size_t c = 0; c < 3; ++c)
            ASSERT_LE(std::abs(int{got[c]} - int{want[c]}), 1)
                << figure << " panel " << k << " (row " << row << ", example " << s << ") pixel (" << h << ", " << w
                << "): drawn " << colour_text(got) << ", expected " << colour_text(want);
        }
    }
  }
}

// Both montages of a measure report in `report_dir`, in the order of the table's eta.
void expect_montages_show(const std::string& report_dir, const ImageShape& shape,
                          const std::function<int(std::size_t)>& example_of_row,
                          const std::function<Rgb(int, Index, Index)>& expected) {
  const report::Columns table = report::read_columns(report_dir + "/per-example.csv");
  expect_montages_in_order(report_dir, "1-measure", "eta", by_eta(table.at("eta")), shape, example_of_row, expected);
}

// ---------------------------------------------------------------------------------------------
// display_image and rgbimage_data

TEST(DisplayImage, PutsEachChannelOfAChannelMajorRowAtItsPixel) {
  // Intensity I(c, h, w) chosen first; the stored value maps to it under the range [-2, 3].
  const ImageShape shape{3, 2, 5};
  const auto intensity = [](Index c, Index h, Index w) {
    return static_cast<int>((c * 97 + h * 31 + w * 7 + 3) % 256);
  };
  RowMatrix images = RowMatrix::Zero(2, shape.size());
  for (Index c = 0; c < 3; ++c)
    for (Index h = 0; h < 2; ++h)
      for (Index w = 0; w < 5; ++w) images(1, (c * 2 + h) * 5 + w) = -2.0 + 5.0 * intensity(c, h, w) / 255.0;
  const RgbImage image = report::display_image(images, 1, shape, {-2.0, 3.0});
  ASSERT_EQ(image.height, 2);
  ASSERT_EQ(image.width, 5);
  for (Index h = 0; h < 2; ++h)
    for (Index w = 0; w < 5; ++w)
      for (Index c = 0; c < 3; ++c)
        EXPECT_EQ(int{image.at(h, w)[static_cast<std::size_t>(c)]}, intensity(c, h, w)) << c << h << w;
  // A transposed reading (height and width swapped) would not give these colours.
  EXPECT_NE(image.at(1, 0), report::display_image(images, 1, ImageShape{3, 5, 2}, {-2.0, 3.0}).at(1, 0));
}

TEST(DisplayImage, DrawsGreyImagesWithEqualChannelsAndClampsOutsideTheRange) {
  RowMatrix images(1, 6);
  images << 0, 10, 5, 2.5, -4, 14;  // 1 x 2 x 3
  const RgbImage image = report::display_image(images, 0, ImageShape{1, 2, 3}, {0.0, 10.0});
  const std::array<int, 6> want = {0, 255, 128, 64, 0, 255};  // round(255 v / 10), clamped
  for (Index p = 0; p < 6; ++p) {
    const Rgb& pixel = image.at(p / 3, p % 3);
    EXPECT_EQ(int{pixel[0]}, want[static_cast<std::size_t>(p)]) << p;
    EXPECT_EQ(pixel[0], pixel[1]);
    EXPECT_EQ(pixel[0], pixel[2]);
  }
  // Images of one value everywhere: mid grey, not a division by zero.
  EXPECT_EQ(report::display_image(images, 0, ImageShape{1, 2, 3}, {7.0, 7.0}).at(1, 2), (Rgb{128, 128, 128}));
  const report::DisplayRange range = report::display_range(images);
  EXPECT_EQ(range.lo, -4);
  EXPECT_EQ(range.hi, 14);
}

TEST(DisplayImage, RefusesShapesThatDoNotFitTheRowsOrCannotBeDrawn) {
  const RowMatrix images = RowMatrix::Zero(2, 12);
  EXPECT_INVALID_ARGUMENT(report::display_image(images, 0, ImageShape{1, 3, 3}, {0, 1}), "1 x 3 x 3", "9 values",
                          "rows hold 12");
  EXPECT_INVALID_ARGUMENT(report::display_image(images, 0, ImageShape{4, 1, 3}, {0, 1}), "4 channels", "grey",
                          "red, green, blue");
  EXPECT_INVALID_ARGUMENT(report::display_image(images, 0, ImageShape{2, 2, 3}, {0, 1}), "2 channels");
  EXPECT_INVALID_ARGUMENT(report::display_image(images, 0, ImageShape{3, 0, 4}, {0, 1}), "dimension below 1");
  EXPECT_INVALID_ARGUMENT(report::display_image(images, 2, ImageShape{3, 2, 2}, {0, 1}), "row 2", "0..1");
  EXPECT_EQ(report::montage_problem(ImageShape{3, 2, 2}, 12), "");
  EXPECT_EQ(report::montage_problem(ImageShape{1, 3, 4}, 12), "");
}

TEST(RgbimageData, WritesColumnRowAndColourOfEveryPixelRowByRow) {
  RgbImage image{2, 3, {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}, {13, 14, 15}, {16, 17, 255}}};
  EXPECT_EQ(report::rgbimage_data(image),
            "0 0 1 2 3\n1 0 4 5 6\n2 0 7 8 9\n0 1 10 11 12\n1 1 13 14 15\n2 1 16 17 255\n");
}

// ---------------------------------------------------------------------------------------------
// run_training_images: the run's images, or why not

// An .npz of `n` grey 4 x 4 images (values k + i) with labels i % 2, as X of shape `shape_text`.
std::string grey_npz(const TempDir& dir, int n, const std::string& shape_text, const std::string& name) {
  std::vector<double> x, y;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 16; ++k) x.push_back(k + i);
    y.push_back(i % 2);
  }
  return dir.write(name, testing::zip_bytes({{"X.npy", testing::npy_bytes("<f8", shape_text, testing::raw_bytes(x))},
                                             {"y.npy", testing::npy_f8(y, static_cast<std::size_t>(n))}},
                                            false));
}

std::string why_not_drawn(const nlohmann::json& summary, std::size_t rows) {
  std::string why_not;
  const auto images = report::run_training_images(summary, rows, why_not);
  EXPECT_FALSE(images.has_value());
  return why_not;
}

TEST(RunTrainingImages, ReloadsTheRowsWithTheRecordedSettingsAndShape) {
  const TempDir dir;
  const std::string npz = grey_npz(dir, 20, "(20, 4, 4)", "grey.npz");
  // test_fraction 0.25 of 20 rows with seed 3: 15 training rows, those shuffle_split keeps.
  const nlohmann::json summary = {{"command", "measure"},
                                  {"seed", 3},
                                  {"settings", {{"data", npz}, {"test_fraction", 0.25}, {"image_layout", "auto"}}},
                                  {"preprocessing", {{"input_image", {1, 4, 4}}, {"input_dimension", 16}}}};
  std::string why_not;
  const auto images = report::run_training_images(summary, 15, why_not);
  ASSERT_TRUE(images.has_value()) << why_not;
  EXPECT_EQ(images->shape, (ImageShape{1, 4, 4}));
  const std::vector<Index> train = shuffle_split(20, 0.25, 3).train;
  ASSERT_EQ(images->X.rows(), 15);
  for (Index r = 0; r < 15; ++r)
    EXPECT_EQ(images->X(r, 0), static_cast<double>(train[static_cast<std::size_t>(r)])) << r;
  // Another seed is another split: rows the table does not describe.
  nlohmann::json other = summary;
  other["seed"] = 4;
  ASSERT_TRUE(report::run_training_images(other, 15, why_not).has_value());
  EXPECT_NE(report::run_training_images(other, 15, why_not)->X.col(0), images->X.col(0));
}

TEST(RunTrainingImages, SaysWhyWhenTheImagesCannotBeDrawn) {
  const TempDir dir;
  const std::string grey = grey_npz(dir, 20, "(20, 4, 4)", "grey.npz");
  const std::string table = grey_npz(dir, 20, "(20, 16)", "table.npz");
  const std::string four_channels = grey_npz(dir, 20, "(20, 4, 2, 2)", "rgba.npz");
  const auto summary = [](const std::string& data, const nlohmann::json& input_image, nlohmann::json settings = {}) {
    settings["data"] = data;
    settings["test_fraction"] = 0.0;
    nlohmann::json json = {{"command", "measure"}, {"settings", settings}};
    if (!input_image.is_string()) json["preprocessing"] = {{"input_image", input_image}, {"input_dimension", 16}};
    return json;
  };
  const auto expect_reason = [](const std::string& reason, std::initializer_list<const char*> fragments) {
    for (const char* fragment : fragments)
      EXPECT_NE(reason.find(fragment), std::string::npos) << fragment << " in: " << reason;
  };
  expect_reason(why_not_drawn({{"command", "measure"}}, 20), {"no settings.data"});
  expect_reason(why_not_drawn(summary(table, nullptr), 20), {"table.npz is a table", "records no image shape"});
  expect_reason(why_not_drawn(summary(table, "absent"), 20), {"re-loads a table of 16 columns"});
  expect_reason(why_not_drawn(summary(grey, {1, 4, 5}), 20),
                {"records images of 1 x 4 x 5 (20 values) but rows of 16 values", "input_dimension"});
  expect_reason(why_not_drawn(summary(grey, {1, 2, 8}), 20),
                {"records images of 1 x 2 x 8 but", "grey.npz re-loads images of 1 x 4 x 4", "changed"});
  expect_reason(why_not_drawn(summary(grey, {1, -4, 4}), 20),
                {"preprocessing.input_image is [1,-4,4]", "[channels, height, width]"});
  expect_reason(why_not_drawn(summary(grey, {1, 4, 4}), 19), {"re-loads 20 training rows but the table has 19"});
  expect_reason(why_not_drawn(summary(four_channels, {4, 2, 2}), 20),
                {"images of 4 channels", "grey", "red, green, blue"});
  expect_reason(why_not_drawn(summary(four_channels, "absent", {{"image_layout", "nchw"}}), 20),
                {"images of 4 channels"});
  expect_reason(why_not_drawn(summary(grey, {1, 4, 4}, {{"image_layout", "sideways"}}), 20),
                {"cannot re-load", "grey.npz", "settings.image_layout = 'sideways'", "nchw, nhwc"});
  expect_reason(why_not_drawn(summary(grey, {1, 4, 4}, {{"classes", "3,x"}}), 20),
                {"cannot re-load", "settings.classes"});
  expect_reason(why_not_drawn(summary(dir.file("gone.npz"), {1, 4, 4}), 20), {"cannot re-load", "gone.npz"});
  nlohmann::json negative_seed = summary(grey, {1, 4, 4});
  negative_seed["seed"] = -1;
  expect_reason(why_not_drawn(negative_seed, 20), {"cannot re-load", "seed = '-1'"});
}

// ---------------------------------------------------------------------------------------------
// End to end: `measure --report`, the PNG decoded

// Writes an .npz of `n` training and 4 test examples of shape C x H x W, example s's value at
// (c, h, w) being pixel(s, c, h, w), stored as X of layout nchw or nhwc (`nhwc`), labels s % 2.
std::string image_npz(const TempDir& dir, const std::string& name, int n, const ImageShape& shape, bool nhwc,
                      const std::function<double(int, Index, Index, Index)>& pixel) {
  const auto array = [&](int first, int count) {
    std::vector<double> x;
    for (int s = first; s < first + count; ++s)
      if (nhwc) {
        for (Index h = 0; h < shape.height; ++h)
          for (Index w = 0; w < shape.width; ++w)
            for (Index c = 0; c < shape.channels; ++c) x.push_back(pixel(s, c, h, w));
      } else {
        for (Index c = 0; c < shape.channels; ++c)
          for (Index h = 0; h < shape.height; ++h)
            for (Index w = 0; w < shape.width; ++w) x.push_back(pixel(s, c, h, w));
      }
    // Grey images as (n, H, W), the others with their channel axis where the layout puts it.
    std::vector<Index> dims = {shape.height, shape.width};
    if (shape.channels != 1) dims.insert(nhwc ? dims.end() : dims.begin(), shape.channels);
    std::string shape_text = "(" + std::to_string(count);
    for (Index dim : dims) shape_text += ", " + std::to_string(dim);
    return testing::npy_bytes("<f8", shape_text + ")", testing::raw_bytes(x));
  };
  const auto labels = [](int first, int count) {
    std::vector<double> y;
    for (int s = first; s < first + count; ++s) y.push_back(s % 2);
    return testing::npy_f8(y, static_cast<std::size_t>(count));
  };
  return dir.write(
      name,
      testing::zip_bytes(
          {{"X.npy", array(0, n)}, {"y.npy", labels(0, n)}, {"X_test.npy", array(n, 4)}, {"y_test.npy", labels(n, 4)}},
          false));
}

MeasureResult measure_with_report(const std::string& data, const std::string& report_dir,
                                  const std::function<void(MeasureOptions&)>& configure = {}) {
  MeasureOptions options;
  options.task.data.data = data;
  options.task.data.row_scaling = RowScaling::kNone;
  options.task.fit.l2 = 1e-2;
  if (configure) configure(options);
  JobOutputs outputs;
  outputs.report = report_dir;
  return run_job<MeasureJob>(options, outputs);
}

void expect_colour_npz_montages(bool nhwc) {
  const TempDir dir;
  // 3 x 4 x 5 (NCHW, found automatically) or 3 x 3 x 4 stored (n, 3, 4, 3), which only the
  // recorded --image-layout nhwc reads: the second and last axes could both be channels.
  const ImageShape shape = nhwc ? ImageShape{3, 3, 4} : ImageShape{3, 4, 5};
  const auto pixel = [&](int s, Index c, Index h, Index w) {
    return colour_of(s, h, w, shape.width)[static_cast<std::size_t>(c)] / 255.0;
  };
  const int n = 40;
  const std::string npz = image_npz(dir, "colour.npz", n, shape, nhwc, pixel);
  const MeasureResult result = measure_with_report(npz, dir.file("report"), [&](MeasureOptions& options) {
    options.task.data.train_size = 30;  // a seeded subset: the report must re-load the same 30
    if (nhwc) options.task.data.image_layout = ImageLayout::kNhwc;
  });
  ASSERT_EQ(result.data.train.n(), 30);
  ASSERT_EQ(result.data.train.image, shape);
  // The job's own training rows (no preprocessing changed them) say which example each row is.
  const auto example_of_row = [&](std::size_t row) {
    return example_of(result.data.train.X, static_cast<Index>(row), shape, n, pixel);
  };
  expect_montages_show(dir.file("report"), shape, example_of_row,
                       [&](int s, Index h, Index w) { return colour_of(s, h, w, shape.width); });

  if (nhwc) {
    // Without the recorded layout the images cannot be re-loaded, and the report says so.
    nlohmann::json summary = nlohmann::json::parse(testing::read_bytes(dir.file("report/summary.json")));
    ASSERT_EQ(summary["settings"]["image_layout"], "nhwc");
    summary["settings"].erase("image_layout");
    ReportOptions again;
    again.inputs = {dir.write("no-layout.json", summary.dump())};
    again.tables = {dir.file("report/per-example.csv")};
    again.out_dir = dir.file("again");
    const ReportResult report = write_report(again);
    const std::string notes = notes_text(report);
    EXPECT_NE(notes.find("highest/lowest-eta images: skipped, cannot re-load"), std::string::npos) << notes;
    EXPECT_NE(notes.find("image_layout"), std::string::npos) << notes;
  }
}

TEST(Montage, DrawsColourNchwImagesOfTheRunPixelForPixel) { expect_colour_npz_montages(false); }

TEST(Montage, DrawsColourNhwcImagesWithTheRecordedLayoutPixelForPixel) { expect_colour_npz_montages(true); }

TEST(Montage, DrawsNonSquareGreyImagesPixelForPixel) {
  const TempDir dir;
  // 1 x 3 x 5 grey images, (n, 3, 5), values 0..3 by the pattern; example 0 has a 4 inside, so the
  // display range is 0..4 and value v is drawn as round(255 v / 4).
  const ImageShape shape{1, 3, 5};
  const auto value = [](int s, Index, Index h, Index w) {
    return s == 0 && h == 1 && w == 2 ? 4.0 : static_cast<double>(pattern(s, h * 5 + w, 4));
  };
  const int n = 40;
  const std::string npz = image_npz(dir, "grey.npz", n, shape, false, value);
  const MeasureResult result = measure_with_report(npz, dir.file("report"));
  ASSERT_EQ(result.data.train.image, shape);
  expect_montages_show(
      dir.file("report"), shape,
      [&](std::size_t row) { return example_of(result.data.train.X, static_cast<Index>(row), shape, n, value); },
      [&](int s, Index h, Index w) {
        const auto grey = static_cast<std::uint8_t>(std::lround(255 * value(s, 0, h, w) / 4));
        return Rgb{grey, grey, grey};
      });
}

// CIFAR-10 records whose pixels come in 8 x 8 blocks of one colour (blocks wide enough to find in
// the drawn figure): record s's block j (4 x 4 blocks, row by row) has the colour pattern(s, j, 6).
Rgb cifar_colour(int s, Index h, Index w) {
  return kPalette[static_cast<std::size_t>(pattern(s, (h / 8) * 4 + w / 8, 6))];
}

std::string cifar_records(int first, const std::vector<int>& labels) {
  std::string bytes;
  for (std::size_t k = 0; k < labels.size(); ++k) {
    bytes += static_cast<char>(labels[k]);
    for (std::size_t c = 0; c < 3; ++c)
      for (Index h = 0; h < 32; ++h)
        for (Index w = 0; w < 32; ++w) bytes += static_cast<char>(cifar_colour(first + static_cast<int>(k), h, w)[c]);
  }
  return bytes;
}

TEST(Montage, DrawsCifar10ImagesOfTheSelectedClassesPixelForPixel) {
  const TempDir dir;
  // 5 training batches of 5 records (s = 0..24): class 0 for s % 5 == 4, else 3 or 5 by parity.
  const std::string cifar = dir.file("cifar-10-batches-bin");
  std::filesystem::create_directories(cifar);
  std::vector<int> train_records;  // the records of classes 3 and 5, in file order: the training rows
  for (int b = 0; b < 5; ++b) {
    std::vector<int> labels;
    for (int s = 5 * b; s < 5 * b + 5; ++s) {
      labels.push_back(s % 5 == 4 ? 0 : s % 2 ? 5 : 3);
      if (labels.back() != 0) train_records.push_back(s);
    }
    std::ofstream(cifar + "/data_batch_" + std::to_string(b + 1) + ".bin", std::ios::binary)
        << cifar_records(5 * b, labels);
  }
  std::ofstream(cifar + "/test_batch.bin", std::ios::binary) << cifar_records(25, {3, 5, 3, 5});
  const MeasureResult result = measure_with_report("cifar10:" + cifar, dir.file("report"), [](MeasureOptions& options) {
    options.task.data.classes = std::vector<int>{3, 5};
    options.task.data.pca = 5;
  });
  ASSERT_EQ(result.data.train.n(), 20);
  expect_montages_show(
      dir.file("report"), ImageShape{3, 4, 4},  // the panels checked block by block
      [&](std::size_t row) { return train_records[row]; },
      [&](int s, Index h, Index w) { return cifar_colour(s, 8 * h, 8 * w); });
}

// ---------------------------------------------------------------------------------------------
// Images stored beside the summary (filkit.torch's write_summary with images)

// A dpsgd summary naming `images` ({"file", "shape"}), and its per-example table of n examples at
// two snapshots: at the last, example s has dFIL dfil_of(s), and those with s % 7 == 3 were never
// sampled (times_sampled 0, dFIL 0).
constexpr int kStoredExamples = 30;
double stored_dfil(int s) { return s % 7 == 3 ? 0.0 : 0.01 * (1 + (s * 11) % kStoredExamples); }

std::string stored_images_summary(const TempDir& dir, const nlohmann::json& images) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (int step : {5, 10})
    snapshots.push_back(
        {{"step", step},
         {"epoch", step / 5},
         {"test_accuracy", 0.5},
         {"dfil", {{"max", 0.3}, {"median", 0.1}, {"mse_bound_at_max", 11.1}, {"mse_bound_at_median", 100}}}});
  return dir.write("run.json", nlohmann::json{{"command", "dpsgd"},
                                              {"n", kStoredExamples},
                                              {"images", images},
                                              {"class_names", {"even", "odd"}},
                                              {"snapshots", snapshots}}
                                   .dump());
}

std::string stored_images_table(const TempDir& dir) {
  std::string table = "step,epoch,index,label,times_sampled,dfil\n";
  for (int step : {5, 10})
    for (int s = 0; s < kStoredExamples; ++s) {
      const bool never = s % 7 == 3;
      table += std::to_string(step) + "," + std::to_string(step / 5) + "," + std::to_string(s) + "," +
               std::to_string(s % 2) + "," + (never ? "0" : "2") + "," + std::to_string(stored_dfil(s) * step / 10) +
               "\n";
    }
  return dir.write("run.csv", table);
}

TEST(StoredImages, DrawTheMostAndLeastExposedSampledExamplesPixelForPixel) {
  const TempDir dir;
  const ImageShape shape{3, 4, 5};
  std::vector<double> x;
  for (int s = 0; s < kStoredExamples; ++s)
    for (Index c = 0; c < shape.channels; ++c)
      for (Index h = 0; h < shape.height; ++h)
        for (Index w = 0; w < shape.width; ++w)
          x.push_back(colour_of(s, h, w, shape.width)[static_cast<std::size_t>(c)] / 255.0);
  dir.write("run.images.npy", testing::npy_bytes("<f8", "(30, 3, 4, 5)", testing::raw_bytes(x)));
  ReportOptions options;
  options.inputs = {stored_images_summary(dir, {{"file", "run.images.npy"}, {"shape", {3, 4, 5}}})};
  options.tables = {stored_images_table(dir)};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  EXPECT_EQ(notes_text(result).find("images"), std::string::npos) << notes_text(result);
  // The order the montages show: the sampled examples by dFIL, never-sampled ones left out.
  std::vector<std::size_t> order;
  for (int s = 0; s < kStoredExamples; ++s)
    if (s % 7 != 3) order.push_back(static_cast<std::size_t>(s));
  std::stable_sort(order.begin(), order.end(), [](std::size_t a, std::size_t b) {
    return stored_dfil(static_cast<int>(a)) > stored_dfil(static_cast<int>(b));
  });
  ASSERT_EQ(order.size(), 26u);
  expect_montages_in_order(
      options.out_dir, "1-dpsgd", "dfil", order, shape, [](std::size_t row) { return static_cast<int>(row); },
      [&](int s, Index h, Index w) { return colour_of(s, h, w, shape.width); });
  // The captions count the examples left out.
  const std::string html = testing::read_bytes(result.html);
  EXPECT_NE(html.find("4 training example(s) never sampled (times_sampled 0, dFIL 0) left out"), std::string::npos);
}

TEST(StoredImages, AreReadFromARegularFileInTheSummarysFolderOnlyAndSayWhyNot) {
  const TempDir dir;
  const std::string npy = dir.write("run.images.npy", testing::npy_f8(std::vector<double>(30 * 16, 0.5), 30, 16));
  std::filesystem::create_directories(dir.file("sub"));
  dir.write("sub/inner.npy", testing::read_bytes(npy));
  std::filesystem::create_symlink(npy, dir.file("link.npy"));
  ASSERT_EQ(::mkfifo(dir.file("fifo.npy").c_str(), 0600), 0);
  const auto why_not = [&](const nlohmann::json& images, std::size_t rows = 30) {
    const nlohmann::json summary = {{"command", "dpsgd"}, {"images", images}};
    std::string why;
    const auto read = report::stored_training_images(summary, dir.file("run.json"), rows, why);
    EXPECT_FALSE(read.has_value()) << images.dump();
    return why;
  };
  const auto expect_reason = [](const std::string& why, const std::vector<std::string>& parts) {
    for (const std::string& part : parts) EXPECT_NE(why.find(part), std::string::npos) << why << " lacks " << part;
  };
  const auto images = [](const std::string& file, nlohmann::json shape = {1, 4, 4}) {
    return nlohmann::json{{"file", file}, {"shape", shape}};
  };
  // Read back when all is well: 30 rows of 16 values.
  std::string why;
  const auto good =
      report::stored_training_images({{"images", images("run.images.npy")}}, dir.file("run.json"), 30, why);
  ASSERT_TRUE(good.has_value()) << why;
  EXPECT_EQ(good->X.rows(), 30);
  EXPECT_EQ(good->shape, (ImageShape{1, 4, 4}));
  // Names that lead out of the folder, and files that are not regular, are never read.
  for (const std::string& file : std::vector<std::string>{"../run.images.npy", npy, "sub/inner.npy", "", "..", "."})
    expect_reason(why_not(images(file)), {"not a file name in the summary's folder"});
  expect_reason(why_not(images("link.npy")), {"link.npy", "a symbolic link", "not read"});
  expect_reason(why_not(images("fifo.npy")), {"fifo.npy", "FIFO", "not read"});
  expect_reason(why_not(images("gone.npy")), {"gone.npy", "does not exist"});
  // The file against the table and the recorded shape, and what can be drawn.
  expect_reason(why_not(images("run.images.npy"), 29), {"shape (30, 16)", "not 29 images of 1 x 4 x 4"});
  expect_reason(why_not(images("run.images.npy", {1, 2, 4})), {"shape (30, 16)", "not 30 images of 1 x 2 x 4"});
  expect_reason(why_not(images("run.images.npy", {4, 2, 2})), {"images of 4 channels"});
  expect_reason(why_not(images("run.images.npy", {1, 0, 4})), {"images.shape is [1,0,4]", "[channels, height, width]"});
  expect_reason(why_not(nlohmann::json{{"file", 3}}), {"not {\"file\": NAME, \"shape\": [C, H, W]}"});
  dir.write("bad.npy", "not an npy file");
  expect_reason(why_not(images("bad.npy")), {"cannot read the images", "bad.npy"});
}

}  // namespace
}  // namespace filkit
