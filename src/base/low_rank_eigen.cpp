// The largest eigenvalue of a diagonal plus low-rank symmetric matrix by bisection on Sylvester's
// inertia count (docs/mathematics.md, "Per-example FIL in the eigenbasis").
#include "filkit/base/low_rank_eigen.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace filkit {

namespace {

// GCC 12 warns about Eigen's fixed-capacity eigensolver internals (a false positive).
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no such warning (and warns about the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// A k x k matrix (k <= 3) without heap allocation: the inertia count runs in the inner loop.
using SmallMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, 3, 3>;

// The secular matrix M(mu) = diag(sign) + W^T (D - mu)^-1 W, its derivative in mu, and the
// number of eigenvalues of A = D + W diag(sign) W^T above mu (Sylvester's law of inertia).
struct SecularEvaluation {
  Index above = 0;
  double determinant = 0.0;
  double determinant_slope = 0.0;  // d det M / d mu
};

class SecularFunction {
 public:
  SecularFunction(const VectorXd& D, const MatrixXd& W, const VectorXd& sign)
      : D_(D),
        W_(W),
        sign_(sign),
        weight_(D.size()),
        weight_squared_(D.size()),
        negative_sign_((sign.array() < 0.0).count()) {}

  SecularEvaluation operator()(double mu) {
    const Index k = W_.cols();
    weight_ = (D_.array() - mu).inverse();
    // mu equal to some D_j (measure zero): nudge that weight to a huge finite value.
    for (Index j = 0; j < D_.size(); ++j)
      if (!std::isfinite(weight_(j))) weight_(j) = -1.0 / std::numeric_limits<double>::min();
    weight_squared_ = weight_.cwiseAbs2();
    SmallMatrix M(k, k), slope(k, k);
    for (Index a = 0; a < k; ++a) {
      for (Index b = 0; b <= a; ++b) {
        const auto product = W_.col(a).array() * W_.col(b).array();
        M(a, b) = M(b, a) = (product * weight_.array()).sum() + (a == b ? sign_(a) : 0.0);
        slope(a, b) = slope(b, a) = (product * weight_squared_.array()).sum();
      }
    }
    SecularEvaluation result;
    const Eigen::SelfAdjointEigenSolver<SmallMatrix> eigen(M);
    const auto& values = eigen.eigenvalues();
    result.above = (D_.array() > mu).count() + (values.array() < 0.0).count() - negative_sign_;
    result.determinant = values.prod();
    // d det / d mu = det * tr(M^-1 dM/dmu), written with the eigendecomposition of M.
    const SmallMatrix rotated = eigen.eigenvectors().transpose() * slope * eigen.eigenvectors();
    double slope_sum = 0.0;
    for (Index a = 0; a < k; ++a) {
      double others = 1.0;
      for (Index b = 0; b < k; ++b)
        if (b != a) others *= values(b);
      slope_sum += rotated(a, a) * others;
    }
    result.determinant_slope = slope_sum;
    return result;
  }

 private:
  const VectorXd& D_;
  const MatrixXd& W_;
  const VectorXd& sign_;
  VectorXd weight_, weight_squared_;
  Index negative_sign_;
};

#pragma GCC diagnostic pop

}  // namespace

double largest_eigenvalue_diagonal_plus_low_rank(const VectorXd& D, const MatrixXd& U, const MatrixXd& S) {
  // Callers pass rank <= 3 by construction: a bug otherwise.
  if (S.rows() > 3) throw std::logic_error("largest_eigenvalue_diagonal_plus_low_rank: rank > 3");
  // Write U S U^T = sum_k sign_k W_k W_k^T with W = U V |s|^(1/2) (S = V diag(s) V^T), so that
  // the k x k secular matrix stays well scaled however small or large the eigenvalues of S are.
  const Eigen::SelfAdjointEigenSolver<MatrixXd> s_solver(S);
  const VectorXd& s = s_solver.eigenvalues();
  const MatrixXd W = U * s_solver.eigenvectors() * s.cwiseAbs().cwiseSqrt().asDiagonal();  // p x k
  const VectorXd sign = s.unaryExpr([](double v) { return v < 0.0 ? -1.0 : 1.0; });
  const double d_max = D.size() ? D.maxCoeff() : 0.0;

  // Bracket: the largest diagonal entry of A is a lower bound, Weyl's inequality an upper one.
  const VectorXd diagonal = D + W.cwiseAbs2() * sign;
  double lo = diagonal.size() ? diagonal.maxCoeff() : 0.0;
  double hi = d_max + (W.colwise().squaredNorm().transpose().array() * (sign.array() > 0).cast<double>()).sum();
  if (!(hi > lo)) return lo;
  // Newton on det M(mu) from the top of the bracket, safeguarded: every evaluation also counts
  // the eigenvalues above its point, which shrinks the bracket; a Newton step that leaves the
  // bracket or does not halve it is replaced by bisection. Converges in ~6 steps, not ~47.
  SecularFunction secular(D, W, sign);
  double mu = hi, previous_width = hi - lo;
  for (int iteration = 0; iteration < 200 && hi - lo > 1e-15 * std::abs(hi); ++iteration) {
    const SecularEvaluation at = secular(mu);
    if (at.above >= 1) lo = std::max(lo, mu);
    else hi = std::min(hi, mu);
    double next = at.determinant_slope != 0.0 ? mu - at.determinant / at.determinant_slope : lo - 1.0;
    if (std::abs(next - mu) <= 1e-15 * std::abs(mu) && next >= lo && next <= hi) {
      // A tiny Newton step also happens next to a pole of det M (mu near some D_j): accept the
      // point only if the inertia count confirms the top eigenvalue lies within a few ulps.
      const double margin = 4e-15 * std::abs(next) + std::numeric_limits<double>::min();
      const bool below_is_inside = secular(next - margin).above >= 1;
      const bool above_is_clear = secular(next + margin).above == 0;
      if (below_is_inside && above_is_clear) return next;
      if (below_is_inside) lo = std::max(lo, next - margin);
      if (above_is_clear) hi = std::min(hi, next + margin);
      next = 0.5 * (lo + hi);
    }
    if (!(next > lo && next < hi) || hi - lo > 0.5 * previous_width) next = 0.5 * (lo + hi);
    previous_width = hi - lo;
    mu = next;
  }
  return 0.5 * (lo + hi);
}

}  // namespace filkit
