#include "filkit/base/finite.hpp"

#include "filkit/base/io.hpp"

#include <cmath>

namespace filkit {

namespace {
[[noreturn]] void fail(const std::string& stage, const std::string& what, double value, const std::string& where,
                       const Message& cause) {
  throw NonFiniteResult(stage + ": " + what + " is " + format_double(value) + where + "; " + cause);
}
}  // namespace

void require_finite(const Eigen::Ref<const MatrixXd>& values, const std::string& stage, const std::string& what,
                    const Message& cause) {
  if (values.allFinite()) return;
  for (Index j = 0; j < values.cols(); ++j)
    for (Index i = 0; i < values.rows(); ++i) {
      if (std::isfinite(values(i, j))) continue;
      const std::string entry =
          values.cols() == 1 ? std::to_string(i) : "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
      fail(stage, what, values(i, j), " at entry " + entry + " (of " + std::to_string(values.size()) + ")", cause);
    }
}

void require_finite(double value, const std::string& stage, const std::string& what, const Message& cause) {
  if (!std::isfinite(value)) fail(stage, what, value, "", cause);
}

}  // namespace filkit
