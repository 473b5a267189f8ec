#include "filkit/base/summary.hpp"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace filkit {

nlohmann::json Summary::to_json() const {
  return {{"count", count}, {"mean", mean}, {"std", std}, {"min", min}, {"median", median}, {"max", max}};
}

double quantile(const VectorXd& values, double q) {
  // The jobs summarise non-empty sets at q in [0, 1]: a bug otherwise.
  if (values.size() == 0) throw std::logic_error("quantile of an empty set");
  if (!(q >= 0.0 && q <= 1.0)) throw std::logic_error("quantile q = " + std::to_string(q) + ": must lie in [0, 1]");
  std::vector<double> sorted(values.data(), values.data() + values.size());
  std::sort(sorted.begin(), sorted.end());
  const double position = q * static_cast<double>(sorted.size() - 1);
  const std::size_t below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

double mean_without_overflow(const Eigen::Ref<const VectorXd>& values) {
  const double mean = values.mean();
  if (std::isfinite(mean) || !values.allFinite()) return mean;
  return (values / static_cast<double>(values.size())).sum();
}

double root_mean_square_deviation(const Eigen::Ref<const VectorXd>& values, double center, double divisor) {
  const double squares = (values.array() - center).square().sum();
  if (std::isfinite(squares) || !values.allFinite() || !std::isfinite(center)) return std::sqrt(squares / divisor);
  // Halved first: x - center itself overflows for x and center of opposite signs near 1e308.
  const Eigen::ArrayXd halves = values.array() / 2 - center / 2;
  const double largest = halves.abs().maxCoeff();
  return 2 * largest * std::sqrt((halves / largest).square().sum() / divisor);
}

Summary summarize(const VectorXd& values) {
  // The jobs summarise non-empty sets at q in [0, 1]: a bug otherwise.
  if (values.size() == 0) throw std::logic_error("summary of an empty set");
  Summary summary;
  summary.count = values.size();
  summary.mean = mean_without_overflow(values);
  summary.std = values.size() > 1
                    ? root_mean_square_deviation(values, summary.mean, static_cast<double>(values.size() - 1))
                    : 0.0;
  summary.min = values.minCoeff();
  summary.max = values.maxCoeff();
  summary.median = quantile(values, 0.5);
  return summary;
}

double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? kNaN : sum / static_cast<double>(values.size());
}

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace filkit
