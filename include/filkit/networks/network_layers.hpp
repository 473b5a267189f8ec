// Network architectures as chains of smooth layers (docs/mathematics.md, section 7.9): the layer
// specification users write (`--arch conv:16:8:2:2,tanh,avgpool:2:1,...`), the built-in networks
// written the same way, and the shapes and parameter layout that follow from an input shape.
//
// Only layers whose per-example second derivative exists are accepted: FIL accounting needs
// G = d g~ / dx, the derivative of each example's gradient about its input, so a layer that is not
// smooth (ReLU, max pooling: G does not exist where they switch, and is 0 for ReLU's curvature
// everywhere else) or that couples the examples of a batch (batch normalisation: an example's
// gradient then depends on the others, and per-example FIL is not defined) is refused with the
// reason. The reconstruction paper uses tanh and average pooling for this reason.
//
// Parameters are one flat vector, layer by layer: each weight row-major (dense: out x in;
// convolution: out x (in_channels * kh * kw), PyTorch's (out, in, kh, kw) order) then its bias.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/types.hpp"

#include <string>
#include <vector>

namespace filkit {

enum class LayerKind { kDense, kConv, kAvgPool, kFlatten, kTanh, kSigmoid, kSoftplus, kGelu, kElu, kSelu };
template <>
struct EnumNames<LayerKind> {
  static constexpr const char* what = "layer";
  static constexpr std::pair<LayerKind, const char*> names[] = {
      {LayerKind::kDense, "dense"},       {LayerKind::kConv, "conv"}, {LayerKind::kAvgPool, "avgpool"},
      {LayerKind::kFlatten, "flatten"},   {LayerKind::kTanh, "tanh"}, {LayerKind::kSigmoid, "sigmoid"},
      {LayerKind::kSoftplus, "softplus"}, {LayerKind::kGelu, "gelu"}, {LayerKind::kElu, "elu"},
      {LayerKind::kSelu, "selu"}};
};

/// One layer. Sizes are those of the layer's own arguments; the input's size follows from the
/// layers before it (plan_network).
struct LayerSpec {
  LayerKind kind = LayerKind::kTanh;
  Index out = 0;                          ///< dense: output features; conv: output channels
  Index kernel_h = 0, kernel_w = 0;       ///< conv, avgpool
  Index stride_h = 1, stride_w = 1;       ///< conv, avgpool
  Index padding_h = 0, padding_w = 0;     ///< conv, avgpool (zeros; average pooling counts them)
  bool bias = true;                       ///< dense, conv
  double beta = 1.0, threshold = 20.0;    ///< softplus: log(1 + e^{beta x}) / beta, linear above threshold
  double alpha = 1.0;                     ///< elu: x > 0 ? x : alpha (e^x - 1)
  double scale = 1.0, input_scale = 1.0;  ///< elu as TorchScript's aten::elu: scale * elu(input_scale x)
  bool gelu_tanh = false;                 ///< gelu: the tanh approximation instead of the exact erf form

  bool has_parameters() const { return kind == LayerKind::kDense || kind == LayerKind::kConv; }
  // Written out: the LibTorch plugin, which includes this header, is compiled as C++17.
  friend bool operator==(const LayerSpec& a, const LayerSpec& b) {
    return a.kind == b.kind && a.out == b.out && a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w &&
           a.stride_h == b.stride_h && a.stride_w == b.stride_w && a.padding_h == b.padding_h &&
           a.padding_w == b.padding_w && a.bias == b.bias && a.beta == b.beta && a.threshold == b.threshold &&
           a.alpha == b.alpha && a.scale == b.scale && a.input_scale == b.input_scale && a.gelu_tanh == b.gelu_tanh;
  }
  friend bool operator!=(const LayerSpec& a, const LayerSpec& b) { return !(a == b); }
};

/// Parses a comma-separated specification; each layer is NAME[:ARG...]:
///   dense:OUT[:nobias]             conv:OUT:K[:STRIDE[:PAD]]   (K x K kernel; stride 1, pad 0)
///   avgpool:K[:STRIDE[:PAD]]       (stride defaults to K, as PyTorch's)
///   flatten   tanh   sigmoid   softplus[:BETA]   gelu[:tanh]   elu[:ALPHA]   selu
/// Throws std::invalid_argument naming `what` (the flag), the layer's position and text, and what
/// was expected; a refused layer (relu, maxpool, batchnorm, dropout, ...) says why.
std::vector<LayerSpec> parse_network_layers(const std::string& text, const std::string& what = "arch");

/// The specification text of `layers` (parse_network_layers(to_string(l)) == l for layers that
/// the syntax can express: square kernels, equal strides and paddings, elu without scales).
std::string to_string(const std::vector<LayerSpec>& layers);
std::string to_string(const LayerSpec& layer);

/// Why a layer of this name (a spec's name or a TorchScript operator's, e.g. "relu",
/// "max_pool2d", "batch_norm") cannot be accounted, or "" when the name is not one of the refused
/// kinds.
std::string refused_layer_reason(const std::string& name);

/// One layer with the shapes it maps and where its parameters sit in the flat vector.
struct PlannedLayer {
  LayerSpec spec;
  std::vector<Index> input_shape, output_shape;  ///< of one example: {features} or {C, H, W}
  Index offset = 0;                              ///< of its weight in the parameters
  Index in = 0;                                  ///< dense: input features; conv: input channels
  // Inline: the LibTorch plugin uses them and links no library code.
  Index fan_in() const {
    return spec.kind == LayerKind::kConv ? in * spec.kernel_h * spec.kernel_w : in;
  }  ///< dense: in; conv: in kh kw
  Index fan_out() const {
    return spec.kind == LayerKind::kConv ? spec.out * spec.kernel_h * spec.kernel_w : spec.out;
  }  ///< dense: out; conv: out kh kw (jax's Glorot initialisation)
  Index weight_size() const { return spec.has_parameters() ? spec.out * fan_in() : 0; }
  Index parameter_count() const { return spec.has_parameters() ? weight_size() + (spec.bias ? spec.out : 0) : 0; }
};

/// A network laid out for an input shape.
struct NetworkPlan {
  std::vector<Index> input_shape;  ///< {d} (a vector) or {C, H, W} (an image)
  std::vector<PlannedLayer> layers;
  Index parameter_count = 0;
  /// One line a layer with its output shape and parameter count, then the total.
  std::string describe() const;
};

/// Lays out `layers` for one example of `input_shape` whose output must be `num_classes` scores.
/// Throws std::invalid_argument naming the layer (position and spec) when a shape does not fit:
/// a convolution or pooling on a vector, a dense layer on an image (flatten first), a kernel
/// larger than its padded input, an output that is not num_classes scores, or more than 2^40
/// parameters.
NetworkPlan plan_network(const std::vector<LayerSpec>& layers, const std::vector<Index>& input_shape,
                         Index num_classes);

}  // namespace filkit
