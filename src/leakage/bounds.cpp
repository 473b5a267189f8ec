#include "filkit/leakage/bounds.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

void require_diameters(const VectorXd& diameters, const std::string& name) {
  if (diameters.size() == 0) option_error(name, "no coordinates given");
  for (Index i = 0; i < diameters.size(); ++i) {
    const double diameter = diameters(i);
    if (!(diameter > 0.0 && std::isfinite(diameter)))
      option_error(name, format_double(diameter), "coordinate " + std::to_string(i) + " must be finite and > 0");
  }
}

}  // namespace

double output_perturbation_rdp_epsilon(Index n, double l2, double sigma, double norm_bound) {
  require_positive("n", n);
  require_positive("l2", l2);
  require_positive("sigma", sigma);
  require_positive("norm_bound", norm_bound);
  const double sensitivity_over_sigma = 2.0 * norm_bound / (static_cast<double>(n) * l2 * sigma);
  return sensitivity_over_sigma * sensitivity_over_sigma;
}

double rdp_mse_bound(double epsilon, const VectorXd& diameters) {
  if (!(epsilon >= 0.0) || std::isnan(epsilon)) option_error("epsilon", format_double(epsilon), "must be >= 0");
  require_diameters(diameters, "diameter");
  const double mean_square = diameters.squaredNorm() / static_cast<double>(diameters.size());
  return mean_square / (4.0 * std::expm1(epsilon));
}

double rdp_mse_bound(double epsilon, double diameter) {
  return rdp_mse_bound(epsilon, VectorXd::Constant(1, diameter));
}

double perfect_privacy_mse(const VectorXd& diameters) {
  require_diameters(diameters, "diameter");
  return diameters.squaredNorm() / static_cast<double>(diameters.size());
}

double share_at_or_above(const VectorXd& bounds, double line) {
  if (bounds.size() == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>((bounds.array() >= line).count()) / static_cast<double>(bounds.size());
}

std::string NormCheck::message() const {
  if (satisfied()) return "";
  std::ostringstream out;
  out << violations << " design row(s) have norm > " << bound << " (largest " << max_norm << ", row " << worst_row
      << "): the RDP guarantee eps = 4 R^2/(n lambda sigma)^2 is stated for R = " << bound
      << " and does not hold for these data; at their norm it is the larger eps_at_data_norm";
  return out.str();
}

NormCheck check_norm_assumption(const RowMatrix& X, bool intercept, double bound) {
  require_positive("norm_bound", bound);
  NormCheck check;
  check.bound = bound;
  const double constant = intercept ? 1.0 : 0.0;
  const double threshold = bound * (1.0 + 1e-12);
  for (Index i = 0; i < X.rows(); ++i) {
    const double norm = std::sqrt(constant + X.row(i).squaredNorm());
    if (norm > check.max_norm || check.worst_row < 0) {
      check.max_norm = norm;
      check.worst_row = i;
    }
    if (norm > threshold) ++check.violations;
  }
  return check;
}

void ReconstructionBoundOptions::validate() const {
  require_positive("sigma", sigma);
  require_positive("norm_bound", norm_bound);
  require_positive("diameter", diameter);
  if (diameters.size() > 0) require_diameters(diameters, "diameter");
}

ReconstructionBounds reconstruction_bounds(const Model& model, const Dataset& train,
                                           const ReconstructionBoundOptions& options, const Communicator& comm) {
  options.validate();
  if (model.kind != ModelKind::kLogistic)
    throw OptionError::with_text("model",
                                 "reconstruction bounds: the RDP guarantee of output perturbation needs a "
                                 "1-Lipschitz loss, i.e. binary logistic regression; the model is " +
                                     to_string(model.kind));
  const VectorXd diameters =
      options.diameters.size() ? options.diameters : VectorXd::Constant(train.d(), options.diameter);
  if (diameters.size() != train.d())
    option_error("diameter", "has " + std::to_string(diameters.size()) + " entries; the data have " +
                                 std::to_string(train.d()) + " features");

  ReconstructionBounds bounds;
  bounds.norm_check = check_norm_assumption(train.X, model.intercept, options.norm_bound);
  const Index n = comm.sum(train.n());
  if (comm.distributed()) {  // the largest norm of every rank's rows, and the first row attaining it
    NormCheck& check = bounds.norm_check;
    const double largest = comm.max(check.max_norm);
    const Index offset = comm.exclusive_prefix_sum(train.n());
    const Index mine = check.worst_row >= 0 && check.max_norm == largest ? offset + check.worst_row : n;
    check.worst_row = -comm.max(-mine);
    check.max_norm = largest;
    check.violations = comm.sum(check.violations);
  }
  bounds.rdp_epsilon = output_perturbation_rdp_epsilon(n, model.l2, options.sigma, options.norm_bound);
  bounds.rdp_mse_bound = rdp_mse_bound(bounds.rdp_epsilon, diameters);
  // The guarantee that actually holds for these data uses their largest row norm (never less
  // than the stated R, so it is only ever weaker).
  const double data_norm = std::max(options.norm_bound, bounds.norm_check.max_norm);
  bounds.rdp_epsilon_at_data_norm = output_perturbation_rdp_epsilon(n, model.l2, options.sigma, data_norm);
  bounds.rdp_mse_bound_at_data_norm = rdp_mse_bound(bounds.rdp_epsilon_at_data_norm, diameters);
  bounds.perfect_privacy_mse = perfect_privacy_mse(diameters);

  const FisherInformationLoss fil(model, train, VectorXd(), FilOptions{options.sigma, LabelPrivacy::kPublic, true},
                                  comm);
  bounds.fil = fil.per_example();
  bounds.fil.eta = comm.gather(bounds.fil.eta);
  bounds.fil.dfil = comm.gather(bounds.fil.dfil);
  if (!comm.is_root()) return bounds;
  bounds.dfil_bound = bounds.fil.example_mse_bound();
  bounds.fil_bound = bounds.fil.attribute_mse_bound();
  bounds.share_dfil_bound_above_line = share_at_or_above(bounds.dfil_bound, bounds.perfect_privacy_mse);
  bounds.share_fil_bound_above_line = share_at_or_above(bounds.fil_bound, bounds.perfect_privacy_mse);
  return bounds;
}

}  // namespace filkit
