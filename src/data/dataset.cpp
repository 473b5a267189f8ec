#include "filkit/data/dataset.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/errors.hpp"
#include "base/parsing.hpp"
#include "base/seeding.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace filkit {

namespace {

std::string position(Index row, Index column) {
  return "(row " + std::to_string(row) + ", column " + std::to_string(column) + ")";
}

// NaN, Inf or values beyond kMaxInputMagnitude (a dataset built by hand; the loaders check theirs).
void check_values(const Dataset& data) {
  const auto usable = [](double value) { return std::abs(value) <= kMaxInputMagnitude; };  // false for NaN
  if ((data.X.array().abs() <= kMaxInputMagnitude).all() && (data.y.array().abs() <= kMaxInputMagnitude).all()) return;
  for (Index i = 0; i < data.n(); ++i) {
    for (Index j = 0; j < data.d(); ++j) {
      if (!usable(data.X(i, j)))
        throw DataError(data.source + ": X" + position(i, j) + " " + input_value_problem(data.X(i, j)));
    }
    if (!usable(data.y(i)))
      throw DataError(data.source + ": y(" + std::to_string(i) + ") " + input_value_problem(data.y(i)));
  }
}

void check_labels(const Dataset& data) {
  const auto classes = static_cast<double>(data.class_names.size());
  for (Index i = 0; i < data.n(); ++i) {
    const double label = data.y(i);
    if (label < 0 || label >= classes || label != std::floor(label)) {
      throw DataError(data.source + ": y(" + std::to_string(i) + ") = " + detail::format_number(label) +
                      " is not a class index 0.." + std::to_string(data.class_names.size() - 1));
    }
  }
}

void check_image_shape(const Dataset& data) {
  const ImageShape& image = *data.image;
  // Bounded step by step before multiplying: the product of absurd dimensions could overflow.
  const Index d = data.d();
  const bool fits = image.channels >= 1 && image.height >= 1 && image.width >= 1 && image.channels <= d &&
                    image.height <= d / image.channels && image.width <= d / (image.channels * image.height);
  if (!fits || image.size() != d) {
    throw DataError(data.source + ": the image shape " + to_string(image) + " (channels x height x width) " +
                    (fits ? "holds " + std::to_string(image.size()) + " values but X has " : "does not fit the ") +
                    std::to_string(d) + " columns" + (fits ? "" : " of X") +
                    "; each dimension must be >= 1 and C*H*W = d");
  }
}

void check_attributes(const Dataset& data) {
  for (const auto& attribute : data.attributes) {
    for (Index column : attribute.columns) {
      if (column < 0 || column >= data.d()) {
        throw DataError(data.source + ": attribute '" + attribute.name + "' refers to column " +
                        std::to_string(column) + " outside 0.." + std::to_string(data.d() - 1));
      }
    }
  }
}

// Uniform in [0, bound) without modulo bias or library-defined distributions: draw masked bits
// until they fall below the bound (fewer than two draws on average).
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  std::uint64_t mask = bound - 1;
  for (int shift = 1; shift < 64; shift *= 2) mask |= mask >> shift;
  for (;;) {
    const std::uint64_t draw = rng() & mask;
    if (draw < bound) return draw;
  }
}

}  // namespace

std::uint64_t row_hash(const Dataset& data, Index i) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](const double& value) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (std::size_t k = 0; k < sizeof(double); ++k) hash = (hash ^ bytes[k]) * 0x100000001b3ULL;
  };
  for (Index j = 0; j < data.d(); ++j) mix(data.X(i, j));
  mix(data.y(i));
  return hash;
}

std::uint64_t rows_hash(const Dataset& data, Index first_row) {
  std::uint64_t sum = 0;
  for (Index i = 0; i < data.n(); ++i)
    sum += splitmix64(row_hash(data, i) ^ splitmix64(static_cast<std::uint64_t>(first_row + i)));
  return sum;
}

std::string to_string(const ImageShape& shape) {
  return std::to_string(shape.channels) + " x " + std::to_string(shape.height) + " x " + std::to_string(shape.width);
}

std::string input_value_problem(double value) {
  if (!std::isfinite(value))
    return "is " +
           std::string(std::isnan(value) ? "nan"
                       : value > 0       ? "inf"
                                         : "-inf") +
           ": not finite (NaN, Inf, or a number beyond the range of a double)";
  if (std::abs(value) > kMaxInputMagnitude)
    return "is " + detail::format_number(value) +
           ": beyond +-1e150, the largest magnitude filkit accepts (sums of squares of larger values overflow); "
           "rescale the data";
  return "";
}

void Dataset::validate() const {
  if (y.size() != n()) {
    throw DataError(source + ": X has " + std::to_string(n()) + " rows but y has " + std::to_string(y.size()) +
                    " entries");
  }
  if (!feature_names.empty() && static_cast<Index>(feature_names.size()) != d()) {
    throw DataError(source + ": " + std::to_string(feature_names.size()) + " feature names for " + std::to_string(d()) +
                    " columns");
  }
  if (image) check_image_shape(*this);
  check_values(*this);
  check_attributes(*this);
  if (!class_names.empty()) check_labels(*this);
}

const AttributeColumns& Dataset::attribute(const std::string& name) const {
  for (const auto& candidate : attributes) {
    if (candidate.name == name) return candidate;
  }
  std::vector<std::string> known;
  for (const auto& candidate : attributes) known.push_back(candidate.name);
  throw OptionError::with_text("attribute", "unknown attribute '" + name + "' in " + source +
                                                "; known: " + (known.empty() ? "none" : detail::quoted_list(known)));
}

Dataset Dataset::select_rows(const std::vector<Index>& rows) const {
  Dataset selected;
  selected.feature_names = feature_names;
  selected.attributes = attributes;
  selected.class_names = class_names;
  selected.source = source;
  selected.dropped_rows = dropped_rows;
  selected.unseen_level_rows = unseen_level_rows;
  selected.image = image;
  selected.X.resize(static_cast<Index>(rows.size()), d());
  selected.y.resize(static_cast<Index>(rows.size()));
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= n()) {
      throw OptionError::with_text("rows", "select_rows: row " + std::to_string(rows[k]) + " outside 0.." +
                                               std::to_string(n() - 1) + " of " + source);
    }
    selected.X.row(static_cast<Index>(k)) = X.row(rows[k]);
    selected.y(static_cast<Index>(k)) = y(rows[k]);
  }
  return selected;
}

Index held_out_count(Index n, double test_fraction) {
  // A negative count is a caller's bug (counts are Dataset::n()): a logic_error, not user input.
  if (n < 0) throw std::logic_error("shuffle_split: n = " + std::to_string(n) + " must be >= 0");
  if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
    throw OptionError::with_text("test_fraction",
                                 "test_fraction = " + detail::format_number(test_fraction) + " must be in [0, 1)");
  }
  return std::min<Index>(std::llround(test_fraction * static_cast<double>(n)), std::max<Index>(n - 1, 0));
}

TrainTestIndices shuffle_split(Index n, double test_fraction, std::uint64_t seed) {
  const Index n_test = held_out_count(n, test_fraction);
  std::vector<Index> order(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  for (Index i = n - 1; i > 0; --i) {
    const auto j = static_cast<Index>(uniform_below(rng, static_cast<std::uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  TrainTestIndices split;
  split.test.assign(order.begin(), order.begin() + n_test);
  split.train.assign(order.begin() + n_test, order.end());
  std::sort(split.test.begin(), split.test.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

Dataset select_classes(const Dataset& data, const std::vector<int>& classes) {
  if (classes.empty()) return data;
  const auto known = static_cast<int>(data.class_names.size());
  for (std::size_t k = 0; k < classes.size(); ++k) {
    if (classes[k] < 0 || (known > 0 && classes[k] >= known)) {
      throw OptionError::with_text("classes", "classes contains " + std::to_string(classes[k]) +
                                                  ", which is not a label of " + data.source + " (labels 0.." +
                                                  std::to_string(known - 1) + ")");
    }
    if (std::find(classes.begin(), classes.begin() + static_cast<long>(k), classes[k]) !=
        classes.begin() + static_cast<long>(k)) {
      throw OptionError::with_text("classes", "class " + std::to_string(classes[k]) + " is listed twice");
    }
  }
  std::vector<Index> rows;
  std::vector<double> labels;
  for (Index i = 0; i < data.n(); ++i) {
    const auto position = std::find(classes.begin(), classes.end(), data.y(i));
    if (position == classes.end()) continue;
    rows.push_back(i);
    labels.push_back(static_cast<double>(position - classes.begin()));
  }
  Dataset selected = data.select_rows(rows);
  selected.y = Eigen::Map<const VectorXd>(labels.data(), static_cast<Index>(labels.size()));
  if (known > 0) {
    selected.class_names.clear();
    for (int label : classes) selected.class_names.push_back(data.class_names[label]);
  }
  return selected;
}

Index class_count(std::initializer_list<NamedRows> parts, Index minimum) {
  Index count = minimum;
  for (const NamedRows& part : parts)
    for (Index i = 0; i < part.data.n(); ++i) {
      const double label = part.data.y(i);
      if (!(label >= 0 && label == std::floor(label) && label < 1e6))
        throw DataError(part.name + " row " + std::to_string(part.first_row + i) + " has label " + shown_value(label) +
                        ", not a class index 0, 1, ...");
      count = std::max(count, static_cast<Index>(label) + 1);
    }
  return count;
}

}  // namespace filkit
