#include "filkit/base/summary.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace filkit {

nlohmann::json Summary::to_json() const {
  return {{"count", count}, {"mean", mean}, {"std", std}, {"min", min}, {"median", median}, {"max", max}};
}

double quantile(const VectorXd& values, double q) {
  if (values.size() == 0) throw std::invalid_argument("quantile of an empty set");
  if (!(q >= 0.0 && q <= 1.0)) throw std::invalid_argument("quantile q = " + std::to_string(q) + ": must lie in [0, 1]");
  std::vector<double> sorted(values.data(), values.data() + values.size());
  std::sort(sorted.begin(), sorted.end());
  const double position = q * static_cast<double>(sorted.size() - 1);
  const std::size_t below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

Summary summarize(const VectorXd& values) {
  if (values.size() == 0) throw std::invalid_argument("summary of an empty set");
  Summary summary;
  summary.count = values.size();
  summary.mean = values.mean();
  summary.std = values.size() > 1
                    ? std::sqrt((values.array() - summary.mean).square().sum() / static_cast<double>(values.size() - 1))
                    : 0.0;
  summary.min = values.minCoeff();
  summary.max = values.maxCoeff();
  summary.median = quantile(values, 0.5);
  return summary;
}

}  // namespace filkit
