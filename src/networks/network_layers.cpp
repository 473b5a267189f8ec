// network_layers.hpp: the layer specification, its refusals, and shape inference.
#include "filkit/networks/network_layers.hpp"
#include "filkit/base/checks.hpp"

#include "base/parsing.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

constexpr Index kMaxParameters = Index{1} << 40;
constexpr Index kMaxSize = Index{1} << 31;  // any one size or count in a specification

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    const std::string::size_type end = text.find(separator, start);
    parts.emplace_back(detail::trim(std::string_view(text).substr(start, end - start)));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

struct LayerText {
  const std::string& what;
  Index position;  // 1-based
  const std::string& text;

  [[noreturn]] void fail(const std::string& message) const {
    throw OptionError::with_text(what, what + ": layer " + std::to_string(position) + " '" + text + "': " + message);
  }
  Index integer(const std::string& arg, const char* name, Index minimum) const {
    const std::optional<double> value = detail::parse_number(arg);
    if (!value || *value != std::floor(*value) || *value < static_cast<double>(minimum) ||
        *value > static_cast<double>(kMaxSize))
      fail(std::string(name) + " '" + arg + "' is not an integer in [" + std::to_string(minimum) + ", 2^31]");
    return static_cast<Index>(*value);
  }
  /// A layer's scale parameter in [1e-6, 1e6]; `why` says what goes wrong beyond it.
  double scale(const std::string& arg, const char* name, const char* why) const {
    const std::optional<double> value = detail::parse_number(arg);
    if (!value || !(*value >= 1e-6 && *value <= 1e6))
      fail(std::string(name) + " '" + arg + "' is not a number in [1e-6, 1e6]: " + why);
    return *value;
  }
  void arguments(const std::vector<std::string>& parts, std::size_t minimum, std::size_t maximum,
                 const char* usage) const {
    const std::size_t given = parts.size() - 1;
    if (given < minimum || given > maximum) fail(std::string("expected ") + usage);
  }
};

const char* const kSupported =
    "dense:OUT[:nobias], conv:OUT:K[:STRIDE[:PAD]], avgpool:K[:STRIDE[:PAD]], flatten, tanh, sigmoid, "
    "softplus[:BETA], gelu[:tanh], elu[:ALPHA], selu";

LayerSpec parse_layer(const LayerText& at) {
  const std::vector<std::string> parts = split(at.text, ':');
  const std::string name = detail::to_lower(parts[0]);
  if (const std::string reason = refused_layer_reason(name); !reason.empty()) at.fail(reason);
  LayerSpec layer;
  if (name == "dense" || name == "linear") {
    layer.kind = LayerKind::kDense;
    at.arguments(parts, 1, 2, "dense:OUT or dense:OUT:nobias");
    layer.out = at.integer(parts[1], "OUT", 1);
    if (parts.size() == 3) {
      if (detail::to_lower(parts[2]) != "nobias") at.fail("the third field may only be 'nobias'");
      layer.bias = false;
    }
  } else if (name == "conv") {
    layer.kind = LayerKind::kConv;
    at.arguments(parts, 2, 4, "conv:OUT:K[:STRIDE[:PAD]]");
    layer.out = at.integer(parts[1], "OUT", 1);
    layer.kernel_h = layer.kernel_w = at.integer(parts[2], "K", 1);
    if (parts.size() > 3) layer.stride_h = layer.stride_w = at.integer(parts[3], "STRIDE", 1);
    if (parts.size() > 4) layer.padding_h = layer.padding_w = at.integer(parts[4], "PAD", 0);
  } else if (name == "avgpool") {
    layer.kind = LayerKind::kAvgPool;
    at.arguments(parts, 1, 3, "avgpool:K[:STRIDE[:PAD]]");
    layer.kernel_h = layer.kernel_w = at.integer(parts[1], "K", 1);
    layer.stride_h = layer.stride_w = parts.size() > 2 ? at.integer(parts[2], "STRIDE", 1) : layer.kernel_h;
    if (parts.size() > 3) layer.padding_h = layer.padding_w = at.integer(parts[3], "PAD", 0);
    if (2 * layer.padding_h > layer.kernel_h) at.fail("PAD must be at most half of K (as in PyTorch)");
  } else if (name == "softplus") {
    layer.kind = LayerKind::kSoftplus;
    at.arguments(parts, 0, 1, "softplus or softplus:BETA");
    if (parts.size() == 2)
      layer.beta = at.scale(parts[1], "BETA",
                            "softplus is log(1 + exp(BETA x)) / BETA, log(2) / BETA at 0, so a tiny BETA makes "
                            "activations (and training) overflow and a huge one makes it a kink");
  } else if (name == "gelu") {
    layer.kind = LayerKind::kGelu;
    at.arguments(parts, 0, 1, "gelu or gelu:tanh");
    if (parts.size() == 2) {
      if (detail::to_lower(parts[1]) != "tanh") at.fail("the only variant of gelu is gelu:tanh");
      layer.gelu_tanh = true;
    }
  } else if (name == "elu") {
    layer.kind = LayerKind::kElu;
    at.arguments(parts, 0, 1, "elu or elu:ALPHA");
    if (parts.size() == 2)
      layer.alpha = at.scale(
          parts[1], "ALPHA",
          "elu's negative side tends to -ALPHA: a huge ALPHA makes activations overflow, a tiny one a kink at 0");
  } else if (name == "flatten" || name == "tanh" || name == "sigmoid" || name == "selu") {
    layer.kind = parse_enum<LayerKind>(name);
    at.arguments(parts, 0, 0, (name + " (no arguments)").c_str());
  } else {
    at.fail("unknown layer '" + parts[0] + "'; the layers are " + kSupported);
  }
  return layer;
}

/// The output side of a convolution or pooling window along one axis (PyTorch's floor rule).
Index window_output(Index input, Index kernel, Index stride, Index padding) {
  return (input + 2 * padding - kernel) / stride + 1;
}

}  // namespace

std::string refused_layer_reason(const std::string& raw) {
  const std::string name = detail::to_lower(raw);
  const std::string smooth = "; use tanh, sigmoid, softplus, gelu, elu or selu (the reconstruction paper uses tanh)";
  if (name == "relu" || name == "relu6" || name == "leaky_relu" || name == "leakyrelu" || name == "prelu" ||
      name == "rrelu" || name == "hardtanh" || name == "hardswish" || name == "hardsigmoid" || name == "threshold" ||
      name == "abs" || name == "celu" /* smooth only at alpha = 1: take elu */)
    return name +
           " is not smooth: its derivative jumps at a kink, so the Jacobian G = d g~/dx of an example's "
           "clipped gradient, which FIL accounting needs, does not exist there (and ReLU-like layers have "
           "zero curvature everywhere else)" +
           smooth;
  if (name == "maxpool" || name == "max_pool2d" || name == "max_pool1d" || name == "adaptive_max_pool2d" ||
      name == "maxpool2d")
    return name +
           " is not smooth: max pooling switches between its inputs, so the Jacobian G = d g~/dx that "
           "FIL accounting needs does not exist where it switches; use avgpool";
  if (name == "batchnorm" || name == "batch_norm" || name == "batchnorm2d" || name == "batchnorm1d" ||
      name == "instance_norm" || name == "group_norm")
    return name +
           " couples the examples of a batch (each output uses the batch's statistics, or running "
           "statistics trained from them), so an example's gradient depends on the others and its FIL "
           "is not defined; remove it (the paper's networks have no normalisation)";
  if (name == "dropout" || name == "feature_dropout" || name == "alpha_dropout")
    return name +
           " multiplies by a random mask, so the released gradient is not a function of the example "
           "alone; remove it (private SGD's noise already regularises)";
  return "";
}

std::vector<LayerSpec> parse_network_layers(const std::string& text, const std::string& what) {
  if (detail::trim(text).empty())
    throw OptionError::with_text(what, what + ": empty layer specification; expected e.g. " +
                                           std::string("conv:16:8:2:2,tanh,avgpool:2:1,flatten,dense:10"));
  std::vector<LayerSpec> layers;
  const std::vector<std::string> texts = split(text, ',');
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const LayerText at{what, static_cast<Index>(i + 1), texts[i]};
    if (texts[i].empty()) at.fail("empty layer (two commas, or a comma at an end)");
    layers.push_back(parse_layer(at));
  }
  return layers;
}

std::string to_string(const LayerSpec& layer) {
  std::ostringstream out;
  out << to_string(layer.kind);
  auto window = [&] {
    out << ":" << layer.kernel_h;
    if (layer.kernel_w != layer.kernel_h) out << "x" << layer.kernel_w;
    out << ":" << layer.stride_h;
    if (layer.stride_w != layer.stride_h) out << "x" << layer.stride_w;
    out << ":" << layer.padding_h;
    if (layer.padding_w != layer.padding_h) out << "x" << layer.padding_w;
  };
  switch (layer.kind) {
    case LayerKind::kDense: out << ":" << layer.out << (layer.bias ? "" : ":nobias"); break;
    case LayerKind::kConv:
      out << ":" << layer.out;
      window();
      if (!layer.bias) out << " (no bias)";
      break;
    case LayerKind::kAvgPool: window(); break;
    case LayerKind::kSoftplus:
      if (layer.beta != 1.0) out << ":" << detail::format_number(layer.beta);
      if (layer.threshold != 20.0) out << " (threshold " << detail::format_number(layer.threshold) << ")";
      break;
    case LayerKind::kGelu: out << (layer.gelu_tanh ? ":tanh" : ""); break;
    case LayerKind::kElu:
      if (layer.alpha != 1.0) out << ":" << detail::format_number(layer.alpha);
      if (layer.scale != 1.0 || layer.input_scale != 1.0)
        out << " (scale " << detail::format_number(layer.scale) << ", input scale "
            << detail::format_number(layer.input_scale) << ")";
      break;
    default: break;
  }
  return out.str();
}

std::string to_string(const std::vector<LayerSpec>& layers) {
  std::string text;
  for (std::size_t i = 0; i < layers.size(); ++i) text += (i ? "," : "") + to_string(layers[i]);
  return text;
}

NetworkPlan plan_network(const std::vector<LayerSpec>& layers, const std::vector<Index>& input_shape,
                         Index num_classes) {
  if (layers.empty()) throw OptionError::with_text("arch", "network: no layers");
  // The input shape comes from the data's layout, {d} or {C, H, W}: a bug otherwise.
  if (input_shape.size() != 1 && input_shape.size() != 3)
    throw std::logic_error("network: the input shape must be {d} or {C, H, W}");
  NetworkPlan plan;
  plan.input_shape = input_shape;
  std::vector<Index> shape = input_shape;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    PlannedLayer planned;
    planned.spec = layers[i];
    planned.input_shape = shape;
    const LayerSpec& s = planned.spec;
    auto fail = [&](const std::string& message) {
      throw OptionError::with_text("arch",
                                   "network: layer " + std::to_string(i + 1) + " (" + to_string(s) + ") " + message);
    };
    const bool image = shape.size() == 3;
    switch (s.kind) {
      case LayerKind::kDense:
        if (image)
          fail("takes a vector, but its input is an image of " + shape_text(shape) + "; put flatten before it");
        planned.in = shape[0];
        shape = {s.out};
        break;
      case LayerKind::kConv:
      case LayerKind::kAvgPool: {
        if (!image)
          fail("takes an image, but its input is a vector of " + std::to_string(shape[0]) +
               (i == 0 ? " features (the data has no image shape: load images, e.g. IDX, cifar10 or an NPZ of (n, "
                         "C, H, W))"
                       : " features"));
        if (shape[1] + 2 * s.padding_h < s.kernel_h || shape[2] + 2 * s.padding_w < s.kernel_w)
          fail("has a " + std::to_string(s.kernel_h) + " x " + std::to_string(s.kernel_w) +
               " window larger than its padded input of " + shape_text(shape));
        planned.in = shape[0];
        shape = {s.kind == LayerKind::kConv ? s.out : shape[0],
                 window_output(shape[1], s.kernel_h, s.stride_h, s.padding_h),
                 window_output(shape[2], s.kernel_w, s.stride_w, s.padding_w)};
        break;
      }
      case LayerKind::kFlatten: shape = {shape[0] * (image ? shape[1] * shape[2] : 1)}; break;
      default: break;  // activations keep the shape
    }
    planned.output_shape = shape;
    planned.offset = plan.parameter_count;
    // In doubles first: each size is below 2^31, but their product need not fit in 64 bits.
    const double weights = s.kind == LayerKind::kDense ? static_cast<double>(s.out) * planned.in
                           : s.kind == LayerKind::kConv
                               ? static_cast<double>(s.out) * planned.in * s.kernel_h * s.kernel_w
                               : 0.0;
    double elements = 1.0;
    for (Index size : shape) elements *= static_cast<double>(size);
    if (weights + static_cast<double>(plan.parameter_count) > static_cast<double>(kMaxParameters))
      fail("takes the network beyond 2^40 parameters");
    if (elements > static_cast<double>(kMaxParameters)) fail("outputs more than 2^40 values an example");
    plan.parameter_count += planned.parameter_count();
    plan.layers.push_back(planned);
  }
  if (shape.size() != 1 || shape[0] != num_classes)
    throw OptionError::with_text("arch", "network: the last layer's output is " + shape_text(shape) +
                                             ", but the data has " + std::to_string(num_classes) +
                                             " classes: end with dense:" + std::to_string(num_classes));
  return plan;
}

std::string NetworkPlan::describe() const {
  std::ostringstream out;
  out << "input [" << shape_text(input_shape) << "]\n";
  for (const PlannedLayer& layer : layers) {
    out << to_string(layer.spec) << " -> [" << shape_text(layer.output_shape) << "]";
    if (layer.spec.has_parameters()) out << ", " << layer.parameter_count() << " parameters";
    out << "\n";
  }
  out << "total " << parameter_count << " parameters\n";
  return out.str();
}

}  // namespace filkit
