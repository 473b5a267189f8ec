#include "filkit/base/jacobian_estimators.hpp"

#include "filkit/base/errors.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {

namespace {

void check_probes(int probes, const char* function) {
  if (probes < 1)
    throw OptionError::with_text("probes",
                                 std::string(function) + ": probes = " + std::to_string(probes) + ": must be >= 1");
}

TraceEstimate mean_and_standard_error(const std::vector<double>& samples) {
  TraceEstimate estimate;
  estimate.probes = static_cast<int>(samples.size());
  double sum = 0.0;
  for (double s : samples) sum += s;
  estimate.value = sum / samples.size();
  if (samples.size() > 1) {
    double squares = 0.0;
    for (double s : samples) squares += (s - estimate.value) * (s - estimate.value);
    estimate.standard_error = std::sqrt(squares / (samples.size() - 1) / samples.size());
  }
  return estimate;
}

}  // namespace

TraceEstimate estimate_trace_by_coordinates(const JacobianOperator& G, int probes, std::mt19937_64& rng) {
  check_probes(probes, "estimate_trace_by_coordinates");
  const Index d = G.cols();
  std::uniform_int_distribution<Index> coordinate(0, d - 1);
  std::vector<double> samples(probes);
  VectorXd e = VectorXd::Zero(d);
  for (int j = 0; j < probes; ++j) {
    const Index k = coordinate(rng);
    e(k) = 1.0;
    samples[j] = static_cast<double>(d) * G.apply(e).squaredNorm();
    e(k) = 0.0;
  }
  return mean_and_standard_error(samples);
}

TraceEstimate estimate_trace_by_gaussian_probes(const JacobianOperator& G, int probes, std::mt19937_64& rng) {
  check_probes(probes, "estimate_trace_by_gaussian_probes");
  std::normal_distribution<double> normal;
  std::vector<double> samples(probes);
  VectorXd v(G.cols());
  for (int j = 0; j < probes; ++j) {
    for (Index k = 0; k < v.size(); ++k) v(k) = normal(rng);
    samples[j] = G.apply(v).squaredNorm();
  }
  return mean_and_standard_error(samples);
}

SpectralNormEstimate estimate_spectral_norm(const JacobianOperator& G, int max_iterations, double tolerance,
                                            std::mt19937_64& rng) {
  if (max_iterations < 1)
    throw OptionError::with_text("max_iterations", "estimate_spectral_norm: max_iterations = " +
                                                       std::to_string(max_iterations) + ": must be >= 1");
  if (!(tolerance >= 0.0)) throw OptionError::with_text("tolerance", "estimate_spectral_norm: tolerance must be >= 0");
  std::normal_distribution<double> normal;
  VectorXd v(G.cols());
  for (Index k = 0; k < v.size(); ++k) v(k) = normal(rng);
  v.normalize();
  SpectralNormEstimate estimate;
  for (int it = 1; it <= max_iterations; ++it) {
    const VectorXd Gv = G.apply(v);
    const double value = Gv.norm();
    estimate.iterations = it;
    if (value == 0.0) {  // v in the null space; for a random start that means G = 0
      estimate.value = 0.0;
      estimate.converged = true;
      return estimate;
    }
    const double previous = estimate.value;
    estimate.value = value;
    if (it > 1 && std::abs(value - previous) <= tolerance * value) {
      estimate.converged = true;
      return estimate;
    }
    v = G.apply_transpose(Gv);
    v.normalize();
  }
  return estimate;
}

}  // namespace filkit
