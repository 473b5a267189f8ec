// A supervised dataset (X, y and its column map), train/test splits, and row selections.
//
// Loaders (data/idx.hpp, data/text_table.hpp, data/npy.hpp, data/load.hpp) produce Datasets; every
// one throws std::invalid_argument naming the file (and line, for text formats) when the input is
// malformed.
#pragma once

#include "filkit/base/types.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// The largest magnitude of a value filkit loads. Squares of such values, and sums of many of them
/// (row norms, PCA's covariance, a GLM's Hessian), stay far below a double's 1.8e308, so no
/// statistic of the data overflows to Inf and turns the data into zeros or NaN. Loaders refuse a
/// larger value (and NaN or Inf) naming the file and where in it the value is.
inline constexpr double kMaxInputMagnitude = 1e150;

/// Why `value` cannot be loaded ("is nan: not finite ...", "is 1e+200: beyond +-1e150, ..."), to
/// follow where it is; empty if it can.
std::string input_value_problem(double value);

/// column, or a one-hot block of a categorical attribute (last level dropped, so the dropped
/// level is the all-zero pattern).
struct AttributeColumns {
  std::string name;                 ///< source column name, e.g. "SEX"
  std::vector<Index> columns;       ///< indices into X's columns
  std::vector<std::string> levels;  ///< for one-hot blocks: the level of each column, in order
  std::string dropped_level;        ///< for one-hot blocks: the level encoded as all zeros
  bool categorical = false;
};

/// The shape of the image a row of X holds: `channels` planes of height x width pixels, stored
/// channel-major as PyTorch's NCHW (one row is one C x H x W tensor): pixel (c, h, w) is column
/// (c * height + h) * width + w. MNIST's rows are 1 x 28 x 28, CIFAR-10's 3 x 32 x 32 (all red
/// pixels, then green, then blue, each plane row by row).
struct ImageShape {
  Index channels = 1;
  Index height = 0;
  Index width = 0;
  /// channels * height * width, the number of columns a row of this shape fills.
  Index size() const { return channels * height * width; }
  // Written out: the LibTorch plugin, which includes this header, is compiled as C++17.
  friend bool operator==(const ImageShape& a, const ImageShape& b) {
    return a.channels == b.channels && a.height == b.height && a.width == b.width;
  }
  friend bool operator!=(const ImageShape& a, const ImageShape& b) { return !(a == b); }
};

/// "3 x 32 x 32" (channels x height x width).
std::string to_string(const ImageShape& shape);

/// A supervised dataset: X (n x d, one example a row) and targets y (n).
/// For classification y holds class indices 0..K-1 as doubles; for regression real values.
struct Dataset {
  RowMatrix X;
  VectorXd y;
  std::vector<std::string> feature_names;    ///< d names (may be empty for images)
  std::vector<AttributeColumns> attributes;  ///< column map (may be empty for images)
  std::vector<std::string> class_names;      ///< K names for classification (may be empty)
  std::string source;                        ///< where it came from, recorded in outputs
  /// The image shape of every row, when the rows are images (C*H*W == d); empty for tables and
  /// after preprocessing that changes the columns (PCA). Row selections and splits keep it.
  std::optional<ImageShape> image;
  Index dropped_rows = 0;  ///< source rows left out for missing values or unseen levels (tabular data only)
  /// Rows with a categorical level or class unseen in the training rows (tabular test splits):
  /// left out (and counted in dropped_rows) or encoded with zeros, by UnseenLevelPolicy.
  Index unseen_level_rows = 0;

  Index n() const { return X.rows(); }
  Index d() const { return X.cols(); }
  /// Throws std::invalid_argument if shapes disagree (y and X; an image shape with a dimension
  /// below 1 or whose C*H*W is not d), any value is NaN/Inf or beyond kMaxInputMagnitude, a
  /// column index of `attributes` is out of range, or (with class_names) a label is not an index
  /// 0..K-1.
  void validate() const;
  /// The attribute with this name, or throws std::invalid_argument listing the known names.
  const AttributeColumns& attribute(const std::string& name) const;
  /// Rows `rows` of this dataset, in that order (same columns, column map and image shape). Throws
  /// std::invalid_argument if an index is outside 0..n-1.
  Dataset select_rows(const std::vector<Index>& rows) const;
};

/// A hash of the rows of `data` that starts at row `first_row` of the whole data set: the sum mod
/// 2^64 of each row's hash (FNV-1a over its features and label) keyed by its index in the whole,
/// so that the shards of any number of processes add up to the hash of the whole. The resume file
/// records it, and processes compare it before they work together.
std::uint64_t rows_hash(const Dataset& data, Index first_row = 0);
/// The hash of one row that rows_hash sums: FNV-1a over the bytes of its features, then its label.
std::uint64_t row_hash(const Dataset& data, Index row);

/// A dataset named in messages, whose rows are numbered from `first_row` (its offset in the whole
/// data set when it is one process' shard).
struct NamedRows {
  const Dataset& data;
  std::string name;  ///< e.g. "train", "candidate"
  Index first_row = 0;
};

/// The classes the labels of `parts` name: the largest label + 1, and at least `minimum`. Throws
/// DataError "<name> row <i> has label <y>, not a class index 0, 1, ..." for a label that is
/// negative, fractional or 10^6 or more.
Index class_count(std::initializer_list<NamedRows> parts, Index minimum = 2);

/// A train/test pair; `test` may be empty (0 rows).
struct DatasetSplit {
  Dataset train;
  Dataset test;
};

/// Row indices of a seeded random train/test split of n rows, each part in increasing order.
struct TrainTestIndices {
  std::vector<Index> train;
  std::vector<Index> test;
};
/// How many of n rows shuffle_split holds out: round(test_fraction * n), at most n - 1.
/// Throws std::invalid_argument unless n >= 0 and test_fraction is in [0, 1).
Index held_out_count(Index n, double test_fraction);

/// Holds out held_out_count(n, test_fraction) rows chosen by a Fisher-Yates shuffle driven by
/// std::mt19937_64(seed) with bitmask rejection sampling, so the split is the same on every
/// platform and standard library. test_fraction in [0, 1); at least one row stays in train.
TrainTestIndices shuffle_split(Index n, double test_fraction, std::uint64_t seed);

/// Keeps the rows labelled with one of `classes` and relabels them 0..K-1 in the order given;
/// class_names (if any) are reordered to match. Throws std::invalid_argument for negative or
/// repeated classes and labels beyond class_names. Empty `classes` returns the data unchanged.
Dataset select_classes(const Dataset& data, const std::vector<int>& classes);

/// A uniformly random subset of `size` rows (all rows if size <= 0 or size >= n), in their
/// original order, drawn with `seed`.
Dataset random_subset(const Dataset& data, Index size, unsigned long long seed);

}  // namespace filkit
