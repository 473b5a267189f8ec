#include "data/npz_dataset.hpp"

#include "filkit/base/errors.hpp"
#include "base/parsing.hpp"
#include "data/npy_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace filkit::detail {

namespace {

// A shape as numpy writes it: "(3,)", "(10, 28, 28)".
std::string numpy_shape_text(const std::vector<Index>& shape) {
  std::string text;
  for (const Index dim : shape) text += (text.empty() ? "(" : ", ") + std::to_string(dim);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string array_name(const std::string& name, const std::string& path) {
  return "array '" + name + "' of '" + path + "'";
}

// Grey (1) and RGB (3): the channel counts that tell the layout of a 4-D array whose other axes
// (image sides) are not 1 or 3.
bool channel_like(Index size) { return size == 1 || size == 3; }

ImageLayout layout_of(const NpyArray& array, const std::string& name, const std::string& path,
                      std::optional<ImageLayout> stated) {
  if (stated) return *stated;
  const bool second = channel_like(array.shape[1]), last = channel_like(array.shape[3]);
  if (second != last) return second ? ImageLayout::kNchw : ImageLayout::kNhwc;
  throw DataError(array_name(name, path) + " has shape " + numpy_shape_text(array.shape) + ", whose layout " +
                  option_name("image_layout") + " = auto cannot tell: " +
                  (second ? "both its second and its last axis could be the channels (1 or 3)"
                          : "neither its second nor its last axis is 1 or 3 channels") +
                  "; set " + option_name("image_layout") + " to nchw for (n, C, H, W) or nhwc for (n, H, W, C)");
}

// (n, H, W, C) values in C order to rows of C x H x W, channel-major.
RowMatrix channel_major_rows(const std::vector<double>& values, Index n, const ImageShape& image) {
  const Index channels = image.channels, pixels = image.height * image.width;
  RowMatrix X(n, image.size());
  for (Index i = 0; i < n; ++i) {
    const double* source = values.data() + i * image.size();
    double* row = X.row(i).data();
    for (Index p = 0; p < pixels; ++p)
      for (Index c = 0; c < channels; ++c) row[c * pixels + p] = source[p * channels + c];
  }
  return X;
}

const NpyArray& npz_array(const std::map<std::string, NpyArray>& arrays, const std::string& name,
                          const std::string& path) {
  const auto found = arrays.find(name);
  if (found == arrays.end()) {
    std::vector<std::string> names;
    for (const auto& entry : arrays) names.push_back(entry.first);
    throw DataError("'" + path + "' has no array '" + name +
                    "'; it holds: " + (names.empty() ? "nothing" : detail::quoted_list(names)));
  }
  return found->second;
}

// The source text of a part: the archive, the arrays, and how images were read.
std::string part_source(const std::string& path, const std::string& x_name, const std::string& y_name,
                        const ArrayRows& rows) {
  std::string source = path + " (" + x_name + ", " + y_name;
  if (rows.image) {
    source += "; images " + to_string(*rows.image);
    if (rows.layout_used) source += " read as " + to_string(*rows.layout_used);
  }
  return source + ")";
}

struct NpzPart {
  Dataset data;
  std::optional<ImageLayout> layout_used;
};

NpzPart npz_part(const std::map<std::string, NpyArray>& arrays, const std::string& x_name, const std::string& y_name,
                 const std::string& path, std::optional<ImageLayout> layout) {
  const NpyArray& x = npz_array(arrays, x_name, path);
  const NpyArray& y = npz_array(arrays, y_name, path);
  if (y.shape.size() != 1) {
    throw DataError(array_name(y_name, path) + " must be 1-D (one label a row), found " +
                    std::to_string(y.shape.size()) + "-D");
  }
  ArrayRows rows = array_rows(x, x_name, path, layout);
  if (rows.X.rows() != y.shape[0]) {
    throw DataError("'" + path + "': " + x_name + " has " + std::to_string(rows.X.rows()) + " rows but " + y_name +
                    " has " + std::to_string(y.shape[0]));
  }
  NpzPart part;
  part.data.X = std::move(rows.X);
  part.data.image = rows.image;
  part.data.y = Eigen::Map<const VectorXd>(y.values.data(), y.shape[0]);
  part.data.source = part_source(path, x_name, y_name, rows);
  part.layout_used = rows.layout_used;
  return part;
}

// Replaces integer labels by indices into their sorted distinct training values; a test label
// absent from training is an error, since no model output could stand for it.
void index_npz_classes(DatasetSplit& split) {
  std::vector<double> classes(split.train.y.begin(), split.train.y.end());
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  for (Dataset* data : {&split.train, &split.test}) {
    for (double& label : data->y) {
      const auto found = std::lower_bound(classes.begin(), classes.end(), label);
      if (label != std::floor(label) || found == classes.end() || *found != label) {
        throw DataError(data->source + ": label " + detail::format_number(label) +
                        (label != std::floor(label) ? " is not an integer class (set regression for real targets)"
                                                    : " does not occur in the training labels"));
      }
      label = static_cast<double>(found - classes.begin());
    }
  }
  if (classes.size() < 2) {
    throw DataError(split.train.source + ": the training labels hold " + std::to_string(classes.size()) +
                    " class; classification needs at least two (or set regression)");
  }
  for (double value : classes) split.train.class_names.push_back(detail::format_number(value));
  split.test.class_names = split.train.class_names;
}

std::string columns_text(const Dataset& data) {
  return data.image ? "images " + to_string(*data.image) : std::to_string(data.d()) + " columns";
}

}  // namespace

ArrayRows array_rows(const NpyArray& array, const std::string& name, const std::string& path,
                     std::optional<ImageLayout> layout) {
  const std::vector<Index>& shape = array.shape;
  if (shape.size() < 2 || shape.size() > 4) {
    throw DataError(array_name(name, path) + " must be 2-D (a table, (n, d)), 3-D (grey images, " +
                    "(n, H, W)) or 4-D (colour images, (n, C, H, W) or (n, H, W, C)); found " +
                    std::to_string(shape.size()) + "-D");
  }
  ArrayRows rows;
  const Index n = shape[0];
  if (shape.size() == 2) {
    rows.X = Eigen::Map<const RowMatrix>(array.values.data(), n, shape[1]);
    return rows;
  }
  ImageShape image{1, shape[1], shape[2]};
  if (shape.size() == 4) {
    rows.layout_used = layout_of(array, name, path, layout);
    image = *rows.layout_used == ImageLayout::kNchw ? ImageShape{shape[1], shape[2], shape[3]}
                                                    : ImageShape{shape[3], shape[1], shape[2]};
  }
  // With no images (n = 0) the array holds no values, so its other dimensions are bounded by
  // nothing: their product must still fit an Index.
  const std::uint64_t size = saturating_product(
      saturating_product(static_cast<std::uint64_t>(image.channels), static_cast<std::uint64_t>(image.height)),
      static_cast<std::uint64_t>(image.width));
  if (size == 0 || size > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) {
    throw DataError(array_name(name, path) + " has shape " + numpy_shape_text(shape) + ": images of " +
                    to_string(image) + " (channels x height x width) " +
                    (size == 0 ? "have no pixel; each dimension must be >= 1" : "are too large"));
  }
  rows.X = !rows.layout_used || *rows.layout_used == ImageLayout::kNchw
               ? RowMatrix(Eigen::Map<const RowMatrix>(array.values.data(), n, image.size()))
               : channel_major_rows(array.values, n, image);
  rows.image = image;
  return rows;
}

namespace {
void check_test_pair(const std::string& path, bool has_x_test, bool has_y_test) {
  if (has_x_test != has_y_test) {
    throw DataError("'" + path + "' holds " + (has_x_test ? "X_test" : "y_test") + " without " +
                    (has_x_test ? "y_test" : "X_test"));
  }
}
}  // namespace

DatasetSplit load_npz_dataset(const std::string& path, const DataOptions& options) {
  const auto arrays = read_npz(path, options.max_memory);
  const bool has_x_test = arrays.count("X_test") > 0, has_y_test = arrays.count("y_test") > 0;
  check_test_pair(path, has_x_test, has_y_test);
  DatasetSplit split;
  NpzPart all = npz_part(arrays, "X", "y", path, options.image_layout);
  if (has_x_test) {
    // X_test is read in the layout X was read in (stated, or told by X's shape).
    NpzPart test = npz_part(arrays, "X_test", "y_test", path, all.layout_used ? all.layout_used : options.image_layout);
    if (test.data.image != all.data.image || test.data.d() != all.data.d()) {
      throw DataError("'" + path + "': X has " + columns_text(all.data) + " but X_test has " + columns_text(test.data));
    }
    split = {std::move(all.data), std::move(test.data)};
  } else {
    const TrainTestIndices parts = shuffle_split(all.data.n(), options.test_fraction, options.seed);
    split = {all.data.select_rows(parts.train), all.data.select_rows(parts.test)};
  }
  if (!options.regression) index_npz_classes(split);
  return split;
}

namespace {

// A part's labels, as a dataset whose one column is each row's index into the archive's arrays.
Dataset row_indices_and_labels(const std::string& path, const std::string& x_name, const std::string& y_name,
                               ByteSize max_memory) {
  const NpyArray y = read_npz_rows(path, y_name, nullptr, max_memory);
  if (y.shape.size() != 1) {
    throw DataError(array_name(y_name, path) + " must be 1-D (one label a row), found " +
                    std::to_string(y.shape.size()) + "-D");
  }
  Dataset ids;
  ids.y = Eigen::Map<const VectorXd>(y.values.data(), y.shape[0]);
  ids.X.resize(y.shape[0], 1);
  for (Index i = 0; i < ids.n(); ++i) ids.X(i, 0) = static_cast<double>(i);
  ids.source = path + " (" + x_name + ", " + y_name + ")";
  return ids;
}

// The rows of X that `ids` names, with its labels.
NpzPart read_rows_of(const std::string& path, const std::string& x_name, const std::string& y_name, const Dataset& ids,
                     Index labels, std::optional<ImageLayout> layout, ByteSize max_memory) {
  std::vector<Index> rows(static_cast<std::size_t>(ids.n()));
  for (Index i = 0; i < ids.n(); ++i) rows[static_cast<std::size_t>(i)] = static_cast<Index>(ids.X(i, 0));
  Index all = 0;
  const NpyArray x = read_npz_rows(path, x_name, &rows, max_memory, &all);
  if (all != labels) {
    throw DataError("'" + path + "': " + x_name + " has " + std::to_string(all) + " rows but " + y_name + " has " +
                    std::to_string(labels));
  }
  ArrayRows read = array_rows(x, x_name, path, layout);
  NpzPart part;
  part.data.X = std::move(read.X);
  part.data.image = read.image;
  part.data.y = ids.y;
  part.data.class_names = ids.class_names;
  part.data.source = part_source(path, x_name, y_name, read);
  part.layout_used = read.layout_used;
  return part;
}

}  // namespace

DatasetSplit load_npz_rows(const std::string& path, const DataOptions& options,
                           const std::function<void(DatasetSplit&)>& narrow) {
  const std::vector<std::string> names = npz_array_names(path);
  const auto has = [&](const char* name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  const bool has_x_test = has("X_test");
  check_test_pair(path, has_x_test, has("y_test"));
  DatasetSplit ids;
  Index labels = 0, test_labels = 0;
  if (has_x_test) {
    ids = {row_indices_and_labels(path, "X", "y", options.max_memory),
           row_indices_and_labels(path, "X_test", "y_test", options.max_memory)};
    labels = ids.train.n();
    test_labels = ids.test.n();
  } else {
    const Dataset all = row_indices_and_labels(path, "X", "y", options.max_memory);
    labels = test_labels = all.n();
    const TrainTestIndices parts = shuffle_split(all.n(), options.test_fraction, options.seed);
    ids = {all.select_rows(parts.train), all.select_rows(parts.test)};
  }
  if (!options.regression) index_npz_classes(ids);
  narrow(ids);
  NpzPart train = read_rows_of(path, "X", "y", ids.train, labels, options.image_layout, options.max_memory);
  NpzPart test = read_rows_of(path, has_x_test ? "X_test" : "X", has_x_test ? "y_test" : "y", ids.test, test_labels,
                              train.layout_used ? train.layout_used : options.image_layout, options.max_memory);
  if (has_x_test && (test.data.image != train.data.image || test.data.d() != train.data.d())) {
    throw DataError("'" + path + "': X has " + columns_text(train.data) + " but X_test has " + columns_text(test.data));
  }
  if (!has_x_test) test.data.source = train.data.source;  // rows of the same arrays
  return {std::move(train.data), std::move(test.data)};
}

}  // namespace filkit::detail
