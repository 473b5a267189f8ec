// Checks that a computed quantity is finite: a NaN or Inf in a result is a numerical failure to
// report with its stage and likely cause, never a number to write out.
#pragma once

#include "filkit/base/errors.hpp"
#include "filkit/base/types.hpp"

#include <string>

namespace filkit {

/// A quantity that must be finite is not: the message names the stage, the quantity, the first
/// offending entry and the likely cause.
class NonFiniteResult : public NumericalError {
 public:
  using NumericalError::NumericalError;
};

/// Throws NonFiniteResult "<stage>: <what> is nan at entry 17 (of 100); <cause>" unless every entry
/// of `values` is finite. Check only quantities that must be finite (not, e.g., an accuracy that is
/// NaN by design for a regression).
/// `cause` may name options (option_name: "step_size is likely too large").
void require_finite(const Eigen::Ref<const MatrixXd>& values, const std::string& stage, const std::string& what,
                    const Message& cause);
/// The same for one number.
void require_finite(double value, const std::string& stage, const std::string& what, const Message& cause);

}  // namespace filkit
