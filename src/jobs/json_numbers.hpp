// Numbers in the job summaries: quantiles of the finite entries (non-finite values as null:
// number_or_null, base/summary.hpp).
#pragma once

#include "filkit/base/summary.hpp"
#include "filkit/base/types.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace filkit::detail {

inline VectorXd finite_values(const VectorXd& values) {
  VectorXd kept(values.size());
  Index count = 0;
  for (Index i = 0; i < values.size(); ++i)
    if (std::isfinite(values(i))) kept(count++) = values(i);
  return kept.head(count);
}

// Quantiles of the finite entries (non-finite ones are counted, not ranked).
inline nlohmann::json quantiles_json(const VectorXd& values) {
  const VectorXd finite = finite_values(values);
  nlohmann::json json = {{"count", finite.size()}, {"non_finite", values.size() - finite.size()}};
  if (finite.size() == 0) return json;
  const std::vector<std::pair<std::string, double>> levels = {
      {"min", 0.0}, {"q05", 0.05}, {"q25", 0.25}, {"median", 0.5}, {"q75", 0.75}, {"q95", 0.95}, {"max", 1.0}};
  for (const auto& [name, level] : levels) json[name] = quantile(finite, level);
  json["mean"] = finite.mean();
  return json;
}

}  // namespace filkit::detail
