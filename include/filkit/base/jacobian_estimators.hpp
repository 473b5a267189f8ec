// Matrix-free estimates of the trace and spectral norm of G^T G for a Jacobian G (p x d_z) that is
// only available through products G v and G^T u (Jacobian-vector and vector-Jacobian products).
//
// These are the estimators of the reconstruction paper for networks (Guo, Karrer, Chaudhuri,
// van der Maaten, ICML 2022, Section 6.2, Equation 5), written against an abstract operator so
// that the same code serves GLMs (where G has a closed form to check them against) and networks:
//
//   random coordinates: Tr(G^T G) = sum_k ||G e_k||^2 ~ (d_z / m) sum_{j=1..m} ||G e_{k_j}||^2,
//                       k_j uniform on {1..d_z} with replacement (the paper samples 50 a step);
//   Gaussian probes:    Tr(G^T G) = E ||G v||^2, v ~ N(0, I)  (Hutchinson);
//   spectral norm:      power iteration v <- G^T G v / ||G^T G v||, ||G||_2 ~ ||G v||.
//
// Both trace estimators are unbiased; their variance falls as 1/m. Random coordinates have zero
// variance when every column of G has the same norm, Gaussian probes when G^T G is a multiple of
// the identity.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/types.hpp"

#include <random>
#include <string>

namespace filkit {

/// How Tr(G^T G) of each sampled example is obtained at each step.
enum class TraceMethod {
  kExact,        ///< the closed form for GLMs; every coordinate's Jacobian-vector product for networks
  kCoordinates,  ///< `probes` random coordinates (the paper's estimator for networks)
  kGaussian,     ///< `probes` Gaussian (Hutchinson) probes
};
template <>
struct EnumNames<TraceMethod> {
  static constexpr const char* what = "trace method";
  static constexpr std::pair<TraceMethod, const char*> names[] = {
      {TraceMethod::kExact, "exact"}, {TraceMethod::kCoordinates, "coordinates"}, {TraceMethod::kGaussian, "gaussian"}};
};

/// How ||G||_2 of each sampled example is obtained at each step.
enum class SpectralMethod {
  kExact,           ///< GLMs: a (1 + 2K)-dimensional eigenproblem; networks: the dense G^T G
  kPowerIteration,  ///< `power_iterations` products with G and G^T (the paper's estimator)
  kNone,            ///< not computed: eta is reported as NaN
};
template <>
struct EnumNames<SpectralMethod> {
  static constexpr const char* what = "spectral method";
  static constexpr std::pair<SpectralMethod, const char*> names[] = {
      {SpectralMethod::kExact, "exact"},
      {SpectralMethod::kPowerIteration, "power-iteration"},
      {SpectralMethod::kNone, "none"}};
};

/// A linear map G: R^cols -> R^rows given by its products.
class JacobianOperator {
 public:
  virtual ~JacobianOperator() = default;
  virtual Index rows() const = 0;  ///< p: output (parameter) dimension
  virtual Index cols() const = 0;  ///< d_z: input (private coordinate) dimension
  /// G v for v of size cols().
  virtual VectorXd apply(const VectorXd& v) const = 0;
  /// G^T u for u of size rows().
  virtual VectorXd apply_transpose(const VectorXd& u) const = 0;
};

/// A dense matrix seen as an operator (the reference in tests). Stores the matrix by value.
class DenseJacobianOperator : public JacobianOperator {
 public:
  explicit DenseJacobianOperator(MatrixXd G) : G_(std::move(G)) {}
  Index rows() const override { return G_.rows(); }
  Index cols() const override { return G_.cols(); }
  VectorXd apply(const VectorXd& v) const override { return G_ * v; }
  VectorXd apply_transpose(const VectorXd& u) const override { return G_.transpose() * u; }

 private:
  MatrixXd G_;
};

/// An unbiased estimate of Tr(G^T G) from `probes` products.
struct TraceEstimate {
  double value = 0.0;           ///< the mean of the per-probe estimates
  double standard_error = 0.0;  ///< sample std of the per-probe estimates / sqrt(probes); 0 for 1 probe
  int probes = 0;
};

/// Random coordinates: the mean of d_z ||G e_k||^2 over `probes` (>= 1) uniform draws of k.
TraceEstimate estimate_trace_by_coordinates(const JacobianOperator& G, int probes, std::mt19937_64& rng);

/// Hutchinson: the mean of ||G v||^2 over `probes` (>= 1) standard Gaussian vectors v.
TraceEstimate estimate_trace_by_gaussian_probes(const JacobianOperator& G, int probes, std::mt19937_64& rng);

/// The largest singular value of G by power iteration on G^T G from a Gaussian start.
struct SpectralNormEstimate {
  double value = 0.0;  ///< ||G v|| at the last iterate (a lower bound on ||G||_2 that converges to it)
  int iterations = 0;
  bool converged = false;  ///< relative change of the estimate fell below the tolerance
};

/// Power iteration: at most `max_iterations` (>= 1) products with G and G^T each, stopping when
/// the estimate changes by less than `tolerance` (>= 0) relative. A zero G gives 0 (converged).
SpectralNormEstimate estimate_spectral_norm(const JacobianOperator& G, int max_iterations, double tolerance,
                                            std::mt19937_64& rng);

}  // namespace filkit
