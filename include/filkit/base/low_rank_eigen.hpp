// The largest eigenvalue of a diagonal plus low-rank symmetric matrix, the inner step of the
// structured per-example FIL (docs/mathematics.md, "Per-example FIL in the eigenbasis").
#pragma once

#include "filkit/base/types.hpp"

namespace filkit {

/// The largest eigenvalue of diag(D) + U S U^T (D sorted descending, U p x k, S k x k symmetric,
/// k small), found by bisection on the inertia count (Sylvester):
/// #eig > mu = #{D_j > mu} + #neg(S^-1 + U^T (D - mu)^-1 U) - #neg(S). O(p k^2) per step.
/// Relative accuracy ~1e-14. Exposed for tests and for the reconstruction bounds.
double largest_eigenvalue_diagonal_plus_low_rank(const VectorXd& D, const MatrixXd& U, const MatrixXd& S);

}  // namespace filkit
