// DpSgdOptions: its rules, its automatic choices and its JSON record.
#include "filkit/dpsgd/training.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace filkit {

void DpSgdOptions::validate() const {
  if (!network && kind != ModelKind::kLogistic && kind != ModelKind::kSoftmax)
    option_error("model", to_string(kind), "must be logistic or softmax");
  if (network) network->validate();
  require_positive("batch_size", batch_size);
  require_positive("steps", steps);
  require_positive("step_size", step_size);
  require_positive("clip_norm", clip_norm);
  require_positive("noise_multiplier", noise_multiplier);
  require_in_interval("momentum", momentum, 0.0, End::kClosed, 1.0, End::kOpen);
  require_in_interval("adam_beta1", adam_beta1, 0.0, End::kClosed, 1.0, End::kOpen);
  require_in_interval("adam_beta2", adam_beta2, 0.0, End::kClosed, 1.0, End::kOpen);
  require_positive("adam_epsilon", adam_epsilon);
  // Added to the step count (itself below 2^63): beyond 10^15 the corrections 1 - beta^t are 1 to
  // double precision for any beta < 1 - 1e-13, and 2^63 - 1 overflowed the sum (issue 50).
  require_in_range("adam_bias_correction_offset", adam_bias_correction_offset, 0, 1000000000000000LL);
  require_non_negative("checkpoint_every", checkpoint_every);
  require_non_negative("stop_after", stop_after);
  if (checkpoint_path == kStandardOutput) option_error("checkpoint", "-", "must name a file: the state is read back");
  if (checkpoint_path.empty() && (checkpoint_every > 0 || stop_after > 0))
    option_error(checkpoint_every > 0 ? "checkpoint_every" : "stop_after",
                 std::to_string(checkpoint_every > 0 ? checkpoint_every : stop_after),
                 "needs " + option_name("checkpoint") + " (where to save the state)");
  require_non_negative("weight_decay", weight_decay);
  require_non_negative("init_scale", init_scale);
  if (kappa_delta) require_in_interval("kappa_delta", *kappa_delta, 0.0, End::kOpen, 1.0, End::kOpen);
  require_in_interval("rdp_delta", rdp_delta, 0.0, End::kOpen, 1.0, End::kOpen);
  PldSettings{.discretization = discretization}.validate();  // the PLD accountant's one rule
  // Each probe is a draw per example and step (and, with the samples kept for the standard error,
  // memory): beyond 10^6 the estimate's error, falling as 1/sqrt(probes), gains nothing.
  if (probes) require_in_range("probes", *probes, 1, 1000000);
  require_in_range("power_iterations", power_iterations, 1, 1000000);
  require_positive("runs", runs);
  // The progress and the resume state count steps over all runs.
  bounded_iterations({{"steps", steps}, {"runs", runs}}, "DP-SGD steps");
  for (double epoch : report_epochs) require_positive("report_epochs", epoch);
  // A percentile interval at 95% from fewer than tens of resamples rests on one or two of them;
  // beyond 10^6 its Monte-Carlo error is far below the runs' own.
  require_in_range("bootstrap_resamples", bootstrap_resamples, 10, 1000000);
  require_in_interval("confidence_level", confidence_level, 0.0, End::kOpen, 1.0, End::kOpen);
}

DpSgdOptions DpSgdOptions::resolved(std::optional<Index> n) const {
  DpSgdOptions options = *this;
  // The paper's rule (Guo et al. 2022, section 6.1): the T steps of a run fail with probability at
  // most T delta = 1/n, less than the chance of picking any one example at random.
  if (!options.kappa_delta && n && *n > 0)
    options.kappa_delta = 1.0 / (static_cast<double>(*n) * static_cast<double>(steps));
  // Networks: NetworkAccountingRequest's defaults; the closed-form GLMs: exact, and the paper's 50
  // probes where a trace is estimated.
  const bool autodiff = network.has_value();
  const NetworkAccountingRequest network_defaults;
  if (!options.trace) options.trace = autodiff ? network_defaults.trace : TraceMethod::kExact;
  if (!options.spectral) options.spectral = autodiff ? network_defaults.spectral : SpectralMethod::kExact;
  if (!options.probes) options.probes = autodiff ? network_defaults.probes : 50;
  return options;
}

nlohmann::json to_json(const DpSgdOptions& options) {
  // Every option as visit_fields declares it, and the model, which the caller chooses.
  nlohmann::json json = settings_json(options);
  json["kind"] = options.network ? "network" : to_string(options.kind);
  json["network"] = nullptr;
  if (options.network)
    json["network"] = {{"architecture", to_string(options.network->architecture)},
                       {"hidden", options.network->hidden},
                       {"layers", options.network->layers},
                       {"torchscript", options.network->torchscript},
                       {"initialisation", to_string(options.network->initialisation)},
                       {"chunk", options.network->chunk}};
  return json;
}

}  // namespace filkit
