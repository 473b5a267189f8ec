// Checks that a computed quantity is finite: a NaN or Inf in a result is a numerical failure to
// report with its stage and likely cause, never a number to write out.
#pragma once

#include "filkit/base/types.hpp"

#include <stdexcept>
#include <string>

namespace filkit {

/// A quantity that must be finite is not: the message names the stage, the quantity, the first
/// offending entry and the likely cause.
class NonFiniteResult : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws NonFiniteResult "<stage>: <what> is nan at entry 17 (of 100); <cause>" unless every entry
/// of `values` is finite. Check only quantities that must be finite (not, e.g., an accuracy that is
/// NaN by design for a regression).
void require_finite(const Eigen::Ref<const MatrixXd>& values, const std::string& stage, const std::string& what,
                    const std::string& cause);
/// The same for one number.
void require_finite(double value, const std::string& stage, const std::string& what, const std::string& cause);

}  // namespace filkit
