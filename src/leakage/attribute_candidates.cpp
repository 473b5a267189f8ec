#include "filkit/leakage/attribute_candidates.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/index_list.hpp"

#include <cmath>
#include <stdexcept>

namespace filkit {

AttributeColumns find_attribute(const Dataset& data, const std::string& spec) {
  const bool indices = !spec.empty() && spec.find_first_not_of("0123456789, ") == std::string::npos;
  if (!indices) return data.attribute(spec);
  AttributeColumns attribute;
  attribute.name = "columns " + spec;
  attribute.categorical = true;
  attribute.columns = parse_index_list(spec, "attribute");
  for (Index j : attribute.columns) {
    if (j >= data.d())
      throw OptionError::with_text(
          "attribute", "attribute: column " + std::to_string(j) + " is outside 0.." + std::to_string(data.d() - 1));
    attribute.levels.push_back("column " + std::to_string(j));
  }
  attribute.dropped_level = "none";
  return attribute;
}

namespace {

// The block's common nonzero value on this process's rows (0 when none has one), checking one-hot
// structure; rows are named by their global index (offset + i).
double one_hot_value(const Dataset& train, const AttributeColumns& attribute, Index offset) {
  double value = 0.0;
  for (Index i = 0; i < train.n(); ++i) {
    Index nonzero = 0;
    for (Index j : attribute.columns) {
      const double x = train.X(i, j);
      if (x == 0.0) continue;
      ++nonzero;
      if (value == 0.0) value = x;
      if (nonzero > 1 || std::abs(x - value) > 1e-12 * std::abs(value))
        throw DataError(
            "attribute '" + attribute.name + "' is not one-hot in training row " + std::to_string(offset + i) +
            ": attribute inference needs a categorical attribute whose columns preprocessing left as 0 or one "
            "common value (scale none or global-max, no PCA)");
    }
  }
  return value;
}

// The common value over every rank's rows (1 when no row has one): each rank's, which must agree.
double common_one_hot_value(const Dataset& train, const AttributeColumns& attribute, const Communicator& comm) {
  const double value = one_hot_value(train, attribute, comm.exclusive_prefix_sum(train.n()));
  const double largest = comm.max(value), most_negative = -comm.max(-value);
  const double common = largest != 0.0 ? largest : most_negative;
  if (value != 0.0 && std::abs(value - common) > 1e-12 * std::abs(common))
    throw DataError("attribute '" + attribute.name + "' is not one-hot: its columns take the value " +
                    std::to_string(value) + " in this rank's rows and " + std::to_string(common) +
                    " in others' (preprocessing must leave them 0 or one common value)");
  return common == 0.0 ? 1.0 : common;
}

}  // namespace

AttributeCandidates attribute_candidates(const Dataset& train, const AttributeColumns& attribute,
                                         const Communicator& comm) {
  if (attribute.columns.empty()) throw DataError("attribute '" + attribute.name + "' has no columns");
  if (!attribute.categorical)
    throw OptionError::with_text(
        "attribute",
        "attribute '" + attribute.name + "' is numeric; attribute inference needs a categorical (one-hot) attribute");
  const Index n = comm.sum(train.n());
  if (n == 0) throw DataError("attribute_candidates: no training examples");
  for (Index j : attribute.columns)
    if (j < 0 || j >= train.d())
      throw OptionError::with_text("attribute", "attribute '" + attribute.name + "': column " + std::to_string(j) +
                                                    " is outside 0.." + std::to_string(train.d() - 1));
  const double value = common_one_hot_value(train, attribute, comm);
  const auto c = static_cast<Index>(attribute.columns.size());
  AttributeCandidates candidates;
  candidates.name = attribute.name;
  candidates.columns = attribute.columns;
  candidates.patterns = MatrixXd::Zero(c + 1, c);
  candidates.patterns.topRows(c).diagonal().setConstant(value);
  for (Index k = 0; k < c; ++k)
    candidates.levels.push_back(static_cast<Index>(attribute.levels.size()) == c
                                    ? attribute.levels[k]
                                    : "column " + std::to_string(attribute.columns[k]));
  candidates.levels.push_back(attribute.dropped_level.empty() ? "none" : attribute.dropped_level);
  candidates.truth.assign(static_cast<std::size_t>(train.n()), c);
  candidates.prior = VectorXd::Zero(c + 1);
  for (Index i = 0; i < train.n(); ++i) {
    for (Index k = 0; k < c; ++k)
      if (train.X(i, attribute.columns[k]) != 0.0) candidates.truth[static_cast<std::size_t>(i)] = k;
    candidates.prior(candidates.truth[static_cast<std::size_t>(i)]) += 1.0;
  }
  comm.sum(candidates.prior);  // counts: exact
  candidates.prior /= static_cast<double>(n);
  candidates.prior.maxCoeff(&candidates.mode);
  return candidates;
}

}  // namespace filkit
