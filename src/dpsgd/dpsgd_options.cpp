// DpSgdOptions: its rules, its automatic choices and its JSON record.
#include "filkit/dpsgd/training.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace filkit {

namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& value, const std::string& rule) {
  throw std::invalid_argument("DpSgdOptions." + field + " = " + value + ": " + rule);
}

void require_positive(const std::string& field, double value) {
  if (!(value > 0.0) || !std::isfinite(value)) invalid(field, format_double(value), "must be finite and > 0");
}

void require_probability(const std::string& field, double value) {
  if (!(value > 0.0 && value < 1.0)) invalid(field, format_double(value), "must be in (0, 1)");
}

}  // namespace

void DpSgdOptions::validate() const {
  if (!network && kind != ModelKind::kLogistic && kind != ModelKind::kSoftmax)
    invalid("kind", to_string(kind), "must be logistic or softmax");
  if (network) network->validate();
  if (batch_size < 1) invalid("batch_size", std::to_string(batch_size), "must be >= 1");
  if (steps < 1) invalid("steps", std::to_string(steps), "must be >= 1");
  require_positive("step_size", step_size);
  require_positive("clip_norm", clip_norm);
  require_positive("noise_multiplier", noise_multiplier);
  if (!(momentum >= 0.0 && momentum < 1.0)) invalid("momentum", format_double(momentum), "must be in [0, 1)");
  if (!(adam_beta1 >= 0.0 && adam_beta1 < 1.0)) invalid("adam_beta1", format_double(adam_beta1), "must be in [0, 1)");
  if (!(adam_beta2 >= 0.0 && adam_beta2 < 1.0)) invalid("adam_beta2", format_double(adam_beta2), "must be in [0, 1)");
  require_positive("adam_epsilon", adam_epsilon);
  if (checkpoint_every < 0) invalid("checkpoint_every", std::to_string(checkpoint_every), "must be >= 0");
  if (stop_after < 0) invalid("stop_after", std::to_string(stop_after), "must be >= 0");
  if (checkpoint_path == kStandardOutput) invalid("checkpoint_path", "-", "must name a file: the state is read back");
  if (checkpoint_path.empty() && (checkpoint_every > 0 || stop_after > 0))
    invalid(checkpoint_every > 0 ? "checkpoint_every" : "stop_after",
            std::to_string(checkpoint_every > 0 ? checkpoint_every : stop_after),
            "needs checkpoint_path (where to save the state)");
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    invalid("weight_decay", format_double(weight_decay), "must be finite and >= 0");
  if (!(init_scale >= 0.0) || !std::isfinite(init_scale))
    invalid("init_scale", format_double(init_scale), "must be finite and >= 0");
  if (kappa_delta) require_probability("kappa_delta", *kappa_delta);
  require_probability("rdp_delta", rdp_delta);
  require_positive("discretization", discretization);
  // Each probe is a draw per example and step (and, with the samples kept for the standard error,
  // memory): beyond 10^6 the estimate's error, falling as 1/sqrt(probes), gains nothing.
  if (probes && (*probes < 1 || *probes > 1000000))
    invalid("probes", std::to_string(*probes), "must be in 1..1000000");
  if (power_iterations < 1 || power_iterations > 1000000)
    invalid("power_iterations", std::to_string(power_iterations), "must be in 1..1000000");
  if (runs < 1) invalid("runs", std::to_string(runs), "must be >= 1");
  // The progress and the resume state count steps over all runs.
  bounded_iterations({{"steps", steps}, {"runs", runs}}, "DP-SGD steps");
  for (double epoch : report_epochs) require_positive("report_epochs", epoch);
  // A percentile interval at 95% from fewer than tens of resamples rests on one or two of them;
  // beyond 10^6 its Monte-Carlo error is far below the runs' own.
  if (bootstrap_resamples < 10 || bootstrap_resamples > 1000000)
    invalid("bootstrap_resamples", std::to_string(bootstrap_resamples), "must be in 10..1000000");
  if (!(confidence_level > 0.0 && confidence_level < 1.0))
    invalid("confidence_level", format_double(confidence_level), "must be in (0, 1)");
}

DpSgdOptions DpSgdOptions::resolved(std::optional<Index> n) const {
  DpSgdOptions options = *this;
  // The paper's rule (Guo et al. 2022, section 6.1): the T steps of a run fail with probability at
  // most T delta = 1/n, less than the chance of picking any one example at random.
  if (!options.kappa_delta && n && *n > 0) options.kappa_delta = 1.0 / (static_cast<double>(*n) * static_cast<double>(steps));
  const bool autodiff = network.has_value();
  if (!options.trace) options.trace = autodiff ? TraceMethod::kGaussian : TraceMethod::kExact;
  if (!options.spectral) options.spectral = autodiff ? SpectralMethod::kNone : SpectralMethod::kExact;
  if (!options.probes) options.probes = autodiff ? 1 : 50;
  return options;
}

nlohmann::json to_json(const DpSgdOptions& options) {
  nlohmann::json network = nullptr;
  if (options.network)
    network = {{"architecture", to_string(options.network->architecture)},
               {"hidden", options.network->hidden},
               {"layers", options.network->layers},
               {"torchscript", options.network->torchscript},
               {"chunk", options.network->chunk}};
  return {{"kind", options.network ? "network" : to_string(options.kind)},
          {"network", network},
          {"intercept", options.intercept},
          {"label", to_string(options.label)},
          {"batch_size", options.batch_size},
          {"sampling", to_string(options.sampling)},
          {"steps", options.steps},
          {"step_size", options.step_size},
          {"clip_norm", options.clip_norm},
          {"noise_multiplier", options.noise_multiplier},
          {"optimizer", to_string(options.optimizer)},
          {"momentum", options.momentum},
          {"adam_beta1", options.adam_beta1},
          {"adam_beta2", options.adam_beta2},
          {"adam_epsilon", options.adam_epsilon},
          {"weight_decay", options.weight_decay},
          {"init_scale", options.init_scale},
          {"subsampling", to_string(options.subsampling)},
          {"kappa_delta", option_to_json(options.kappa_delta)},
          {"trace", option_to_json(options.trace)},
          {"spectral", option_to_json(options.spectral)},
          {"probes", option_to_json(options.probes)},
          {"power_iterations", options.power_iterations},
          {"runs", options.runs},
          {"seed", options.seed},
          {"report_epochs", options.report_epochs},
          {"rdp_delta", options.rdp_delta},
          {"accountant", to_string(options.accountant)},
          {"discretization", options.discretization},
          {"bootstrap_resamples", options.bootstrap_resamples},
          {"confidence_level", options.confidence_level},
          {"checkpoint_path", options.checkpoint_path},
          {"checkpoint_every", options.checkpoint_every},
          {"stop_after", options.stop_after}};
}

}  // namespace filkit
