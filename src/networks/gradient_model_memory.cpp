// The memory estimate of fim's gradient models (gradient_model.hpp), checked before the model or
// the LibTorch plugin's conditional model is built.
#include "filkit/base/resources.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/networks/network_layers.hpp"

#include <algorithm>
#include <stdexcept>

namespace filkit {

namespace {

std::uint64_t u64(Index value) { return static_cast<std::uint64_t>(value); }
std::uint64_t sum(std::uint64_t a, std::uint64_t b) { return saturating_sum(a, b); }
std::uint64_t product(std::uint64_t a, std::uint64_t b) { return saturating_product(a, b); }
std::uint64_t doubles(std::uint64_t values, int copies) {
  return product(values, static_cast<std::uint64_t>(copies) * sizeof(double));
}

/// The conditional model's conv branch (released_gradient.cpp's conv_features: the cnn's two
/// convolutions and poolings): its parameters and its features an example, laid out by
/// plan_network like the cnn's first layers.
struct ConvBranch {
  Index parameters = 0, features = 0;
};
ConvBranch conv_branch(const ImageShape& image) {
  NetworkPlan plan;
  try {
    plan = plan_network(parse_network_layers("conv:16:8:2:2,tanh,avgpool:2:1,conv:32:4:2,tanh,"
                                             "avgpool:2:1,flatten,dense:2"),
                        {image.channels, image.height, image.width}, 2);
  } catch (const std::invalid_argument&) {
    return {};  // an image too small for the branch: the plugin says so when it builds the model
  }
  const PlannedLayer& flatten = plan.layers[plan.layers.size() - 2];
  return {plan.parameter_count - plan.layers.back().parameter_count(), flatten.output_shape.front()};
}

bool has_conv_branch(const GradientModelOptions& options, const std::optional<ImageShape>& image) {
  return options.kind == GradientModelKind::kConditional && options.conv && image.has_value();
}

}  // namespace

std::uint64_t GradientModelMemoryEstimate::total() const {
  return sum(sum(sum(parameters, activations), sum(probes, step_draws)), kept_records);
}

std::string GradientModelMemoryEstimate::describe() const {
  return "the gradient model of " + std::to_string(parameter_count) + " parameters (" + readable_bytes(parameters) +
         " with Adam's moments, " + readable_bytes(activations) + " of activations a public batch, " +
         readable_bytes(probes) + " of probes" +
         (step_draws > 0 ? ", " + readable_bytes(step_draws) + " of every public example's probes and terms" : "") +
         (kept_records > 0 ? ", " + readable_bytes(kept_records) + " of the public examples' passes kept for a step"
                           : "") +
         ")";
}

Index gradient_model_parameter_count(const GradientModelOptions& options, Index released,
                                     const std::optional<ImageShape>& image) {
  const std::vector<Index>& hidden = options.hidden;
  std::uint64_t count = 0;
  switch (options.kind) {
    case GradientModelKind::kVector: count = u64(released); break;
    case GradientModelKind::kConstant: {  // beta, W, b, W_o, b_o (constant_gradient_model.hpp)
      const std::uint64_t in = u64(hidden.size() >= 2 ? hidden[hidden.size() - 2] : 0);
      const std::uint64_t width = u64(hidden.empty() ? 0 : hidden.back());
      count = sum(sum(in, product(width, in)), sum(width, sum(product(u64(released), width), u64(released))));
      break;
    }
    case GradientModelKind::kConditional: {
      std::uint64_t features = 2 * u64(released);  // the released parameters and gradient
      if (has_conv_branch(options, image)) {
        const ConvBranch conv = conv_branch(*image);
        count = u64(conv.parameters);
        features = sum(features, u64(conv.features));
      }
      for (Index width : hidden) {  // normalisation scale and shift, weight, bias
        count = sum(count, sum(2 * features, product(u64(width), features + 1)));
        features = u64(width);
      }
      count = sum(count, product(u64(released), features + 1));
      break;
    }
  }
  constexpr std::uint64_t kMost = std::uint64_t{1} << 62;  // an Index, and far beyond any budget
  return static_cast<Index>(std::min(count, kMost));
}

GradientModelMemoryEstimate estimate_gradient_model_memory(const GradientModelOptions& options, Index released,
                                                           Index input_dim, const std::optional<ImageShape>& image,
                                                           Index public_rows, bool network,
                                                           const NetworkPlan* kept_records) {
  GradientModelMemoryEstimate estimate;
  estimate.parameter_count = gradient_model_parameter_count(options, released, image);
  const bool single = options.is_constant() && options.state_precision == Precision::kFloat32;
  estimate.parameters =
      product(u64(estimate.parameter_count),
              static_cast<std::uint64_t>(kGradientModelParameterCopies) * (single ? sizeof(float) : sizeof(double)));
  const std::uint64_t rows = u64(std::min(options.batch_size, public_rows));
  if (options.kind == GradientModelKind::kConditional) {
    std::uint64_t widths = sum(u64(input_dim), 3 * u64(released));  // x, the model's inputs, its output
    if (has_conv_branch(options, image)) widths = sum(widths, u64(conv_branch(*image).features));
    for (Index width : options.hidden) widths = sum(widths, u64(width));
    estimate.activations = doubles(product(rows, widths), kGradientModelActivationCopies);
  } else {  // each example's released gradient and its clipped release
    estimate.activations = doubles(product(rows, u64(released)), 2);
  }
  const bool probed = options.kind == GradientModelKind::kConditional || options.trace == GradientTrace::kProbes;
  if (probed)
    estimate.probes = doubles(product(product(rows, u64(options.probes)), sum(u64(input_dim), u64(released))), 1);
  // Per-batch probes over epochs on a network: an epoch's probes and terms at once, from records
  // kept for the step (PerturbationObjectiveTermCache).
  const bool epoch_terms = network && kept_records && probed && options.is_constant() &&
                           options.probe_draws == ProbeDraws::kBatch && options.unit == ScheduleUnit::kEpochs;
  if (probed && options.is_constant() && (options.probe_draws == ProbeDraws::kStep || epoch_terms)) {
    const std::uint64_t all = u64(public_rows), S = u64(options.probes);
    std::uint64_t values = product(product(all, S), u64(input_dim));
    if (network) values = sum(values, product(product(all, S + 1), u64(released)));
    estimate.step_draws = doubles(values, 1);
  }
  if (epoch_terms) {
    std::uint64_t values = 1;  // an example's
    for (Index size : kept_records->input_shape) values = product(values, u64(size));
    for (const PlannedLayer& layer : kept_records->layers) {
      std::uint64_t outputs = 1;
      for (Index size : layer.output_shape) outputs = product(outputs, u64(size));
      values = sum(values, outputs);
      if (!layer.spec.has_parameters()) continue;
      const bool conv = layer.spec.kind == LayerKind::kConv;
      const std::uint64_t positions = conv ? product(u64(layer.output_shape[1]), u64(layer.output_shape[2])) : 1;
      values = sum(values, product(positions, u64(layer.fan_in()) + u64(layer.spec.out)));
    }
    const std::uint64_t element = options.precision == Precision::kFloat32 ? sizeof(float) : sizeof(double);
    estimate.kept_records = product(product(product(u64(public_rows), values), element), kKeptRecordCopies);
  }
  return estimate;
}

}  // namespace filkit
