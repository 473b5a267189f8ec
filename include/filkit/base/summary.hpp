// Summary statistics of per-example quantities (eta, dFIL, losses), as reported in every output.
#pragma once

#include "filkit/base/types.hpp"

#include <nlohmann/json_fwd.hpp>

#include <vector>

namespace filkit {

struct Summary {
  Index count = 0;
  double mean = 0.0;
  double std = 0.0;  ///< sample standard deviation (n - 1 denominator); 0 for one value
  double min = 0.0;
  double median = 0.0;
  double max = 0.0;
  nlohmann::json to_json() const;
};

/// The mean of `values`, without overflow: when their sum is beyond a double's range, the mean is
/// summed as x / n instead.
double mean_without_overflow(const Eigen::Ref<const VectorXd>& values);

/// sqrt(sum_i (x_i - center)^2 / divisor), without overflow: when the squares overflow (values
/// near 1e300), the deviations are first divided by the largest of them, as hypot does.
double root_mean_square_deviation(const Eigen::Ref<const VectorXd>& values, double center, double divisor);

/// Mean, sample std, min, median (mean of the two middle values for even counts) and max.
/// Throws std::invalid_argument for an empty vector.
Summary summarize(const VectorXd& values);

/// The q-quantile (0 <= q <= 1) by linear interpolation between order statistics (numpy's default).
double quantile(const VectorXd& values, double q);

/// The mean of per-run values, in order; NaN for none.
double mean_of(const std::vector<double>& values);

/// A number of a JSON summary: null where it is not finite (JSON has no NaN or infinity).
nlohmann::json number_or_null(double value);

}  // namespace filkit
