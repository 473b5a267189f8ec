// The rules of private training with public data's options (public_data_options.hpp), the private
// phase as run, and the options as the summary records them.
#include "filkit/public_data/public_data_options.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/options.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace filkit {

void PlainTrainingOptions::validate(const std::string& name) const {
  require_non_negative(name + "_steps", steps);
  require_positive(name + "_batch_size", batch_size);
  require_positive(name + "_step_size", step_size);
  require_non_negative(name + "_weight_decay", weight_decay);
  if (sampling == BatchSampling::kPoisson)
    option_error(name + "_sampling", "poisson", "is not offered for training without privacy: use uniform or shuffle");
}

void PublicDataTrainingOptions::validate() const {
  require_in_interval("public_fraction", public_fraction, 0.0, End::kOpen, 1.0, End::kOpen);
  require_in_interval("freeze_fraction", freeze_fraction, 0.0, End::kClosed, 1.0, End::kOpen);
  if (methods.empty()) option_error("methods", "name at least one of sgd, dpsgd, prune, fim");
  pretrain.validate("pretrain");
  gradient_model.validate();
  private_phase.validate();
  if (!private_phase.network && private_phase.kind != ModelKind::kSoftmax)
    option_error("model", to_string(private_phase.kind),
                 "private training with public data trains softmax regression (any K >= 2) or a network");
  if (reference_logit && private_phase.network)
    option_error("reference_logit",
                 "holds softmax regression's last logit at 0; a network's last layer has no such "
                 "option (use " +
                     option_name("model") + " = softmax)");
  if (gradient_model.precision == Precision::kFloat32 &&
      (!private_phase.network || gradient_model.kind == GradientModelKind::kConditional))
    option_error("gradient_precision", "float32",
                 private_phase.network ? "applies to the constant gradient models (" + option_name("gradient_model") +
                                             " = constant or vector); the conditional model trains in float64"
                                       : "applies to networks; softmax regression's objective is a closed form "
                                         "computed in float64 (use " +
                                             option_name("model") + " = a network, or float64)");
  if (private_phase.precision == Precision::kFloat32 && gradient_model.kind == GradientModelKind::kConditional &&
      std::find(methods.begin(), methods.end(), PrivateTrainingMethod::kFim) != methods.end())
    option_error("precision", "float32",
                 "is not offered with the conditional gradient model, which trains in float64 (use " +
                     option_name("gradient_model") + " = constant or vector, or float64)");
  if (private_phase.label != LabelPrivacy::kPublic)
    option_error("label", "private",
                 "the released gradient's Jacobian is taken about the pixels only (labels "
                 "public, as in the thesis)");
  if (private_phase.trace && *private_phase.trace == TraceMethod::kCoordinates)
    option_error("trace", "coordinates", "use gaussian or exact for private training with public data");
  if (private_phase.spectral && *private_phase.spectral != SpectralMethod::kNone)
    option_error("spectral", to_string(*private_phase.spectral),
                 "not available for private training with public data (eta is not reported); use none");
  if (!private_phase.checkpoint_path.empty()) {  // DpSgdOptions::validate: stop_after needs it
    if (methods.size() != 1 || methods.front() == PrivateTrainingMethod::kSgd)
      option_error("checkpoint", private_phase.checkpoint_path,
                   "resumes one method at a time, one of dpsgd, prune or fim in " + option_name("methods") +
                       " (experiments/fim_tables.py runs each method as its own job)");
    if (methods.front() == PrivateTrainingMethod::kFim && gradient_model.kind == GradientModelKind::kConditional)
      option_error("checkpoint", private_phase.checkpoint_path,
                   "the conditional gradient model's state lives in LibTorch and is not in the resume file; use " +
                       option_name("gradient_model") + " = constant or vector, or no checkpoint");
  }
}

DpSgdOptions resolved_private_phase(const PublicDataTrainingOptions& options, Index n_private) {
  DpSgdOptions o = options.private_phase;
  o.kind = ModelKind::kSoftmax;
  if (!o.trace) o.trace = TraceMethod::kGaussian;
  if (!o.probes) o.probes = kFisherTermProbes;
  o.spectral = SpectralMethod::kNone;
  return o.resolved(n_private);
}

nlohmann::json to_json(const PublicDataTrainingOptions& options) {
  nlohmann::json json;
  json["public_fraction"] = options.public_fraction;
  json["public_split"] = to_string(options.public_split);
  json["freeze_fraction"] = options.freeze_fraction;
  json["reference_logit"] = options.reference_logit;
  json["sgd_clip"] = options.sgd_clip;
  std::vector<std::string> methods;
  for (PrivateTrainingMethod m : options.methods) methods.push_back(to_string(m));
  json["methods"] = methods;
  json["pretrain"] = {{"steps", options.pretrain.steps},
                      {"batch_size", options.pretrain.batch_size},
                      {"step_size", options.pretrain.step_size},
                      {"weight_decay", options.pretrain.weight_decay},
                      {"sampling", to_string(options.pretrain.sampling)}};
  json["gradient_model"] = settings_json(options.gradient_model);
  json["gradient_model"]["normalisation"] =
      options.gradient_model.is_constant()
          ? "batch normalisation over a batch of one example (the thesis' code): the model is the constant c"
          : "layer (per example)";
  json["private_phase"] = to_json(options.private_phase);
  return json;
}

}  // namespace filkit
