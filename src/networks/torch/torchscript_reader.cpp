// Reads a TorchScript module (torch.jit.save of a scripted or traced PyTorch model) as a chain of
// network_layers.hpp's layers, part of the LibTorch plugin (network_backend.hpp's
// filkit_read_torchscript).
//
// The module is frozen (its weights become constants), inlined and constant-folded, which leaves
// the forward method as one operator per layer whatever the module's nesting (Sequential or
// custom modules, scripted or traced); each operator must take the previous one's output. The
// library then checks the rebuilt network against the module's own outputs, which catches any
// computation this walk does not see.
#include "networks/network_backend.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {

namespace {

using torch::jit::Node;
using torch::jit::Value;

/// The first line of a LibTorch error (the rest is a C++ stack trace).
std::string first_line(const char* what) {
  const std::string text(what);
  return text.substr(0, text.find('\n'));
}

/// What a constant input of an operator holds (null when it is not a constant).
std::optional<c10::IValue> constant(const Node* node, std::size_t i) {
  if (i >= node->inputs().size()) return std::nullopt;
  const auto value = torch::jit::toIValue(node->input(i));
  if (!value) return std::nullopt;
  return *value;
}

/// A pair of sizes (kernel, stride, padding): [a, b], [a] or a.
std::optional<std::pair<Index, Index>> pair_of(const std::optional<c10::IValue>& value) {
  if (!value) return std::nullopt;
  if (value->isInt()) return std::pair<Index, Index>{value->toInt(), value->toInt()};
  if (!value->isIntList()) return std::nullopt;
  const std::vector<std::int64_t> list = value->toIntVector();
  if (list.size() == 1) return std::pair<Index, Index>{list[0], list[0]};
  if (list.size() == 2) return std::pair<Index, Index>{list[0], list[1]};
  return std::nullopt;
}

bool all_ones(const std::optional<c10::IValue>& value) {
  const auto pair = pair_of(value);
  return pair && pair->first == 1 && pair->second == 1;
}

double number(const std::optional<c10::IValue>& value, double fallback) {
  if (!value || value->isNone()) return fallback;
  return value->isDouble() ? value->toDouble() : value->isInt() ? static_cast<double>(value->toInt()) : fallback;
}

struct ChainReader {
  TorchScriptNetwork& result;
  std::vector<at::Tensor> weights;

  /// Appends a layer's weight (reshaped row-major) and bias; false when they are not constants.
  bool take_parameters(const Node* node, LayerSpec& layer) {
    const auto weight = constant(node, 1), bias = constant(node, 2);
    if (!weight || !weight->isTensor() || !bias) return false;
    const at::Tensor W = weight->toTensor().to(at::kDouble).contiguous();
    layer.out = W.size(0);
    weights.push_back(W.reshape({-1}));
    layer.bias = !bias->isNone();
    if (layer.bias) weights.push_back(bias->toTensor().to(at::kDouble).contiguous().reshape({-1}));
    return true;
  }

  /// The layer an operator stands for, or nothing when it is not one (or has unsupported options).
  std::optional<LayerSpec> layer_of(const Node* node) {
    const std::string op = node->kind().toUnqualString();
    LayerSpec layer;
    if (op == "linear") {
      layer.kind = LayerKind::kDense;
      if (!take_parameters(node, layer)) return std::nullopt;
      return layer;
    }
    if (op == "conv2d" || op == "_convolution") {
      layer.kind = LayerKind::kConv;
      const bool traced =
          op == "_convolution";  // (x, W, b, stride, padding, dilation, transposed, out_pad, groups, ...)
      const auto stride = pair_of(constant(node, 3));
      std::optional<std::pair<Index, Index>> padding = pair_of(constant(node, 4));
      const auto groups = constant(node, traced ? 8 : 6);
      if (!stride || !all_ones(constant(node, 5)) || !groups || !groups->isInt() || groups->toInt() != 1)
        return std::nullopt;
      if (traced) {
        const auto transposed = constant(node, 6);
        if (!transposed || !transposed->isBool() || transposed->toBool()) return std::nullopt;
      }
      if (!take_parameters(node, layer)) return std::nullopt;
      // The weight (out, in, kh, kw), held here: sizes() is a view into the tensor it came from.
      const at::Tensor weight = constant(node, 1)->toTensor();
      if (weight.dim() != 4) return std::nullopt;
      layer.kernel_h = weight.size(2);
      layer.kernel_w = weight.size(3);
      if (!padding) {  // padding="valid" or "same" (stride 1, odd kernels: symmetric)
        const auto text = constant(node, 4);
        if (!text || !text->isString()) return std::nullopt;
        const std::string mode = text->toStringRef();
        if (mode == "valid") padding = {{0, 0}};
        else if (mode == "same" && stride->first == 1 && stride->second == 1 && layer.kernel_h % 2 == 1 &&
                 layer.kernel_w % 2 == 1)
          padding = {{layer.kernel_h / 2, layer.kernel_w / 2}};
        else return std::nullopt;
      }
      std::tie(layer.stride_h, layer.stride_w) = *stride;
      std::tie(layer.padding_h, layer.padding_w) = *padding;
      return layer;
    }
    if (op == "avg_pool2d") {  // (x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
      layer.kind = LayerKind::kAvgPool;
      const auto kernel = pair_of(constant(node, 1));
      auto stride = pair_of(constant(node, 2));
      const auto padding = pair_of(constant(node, 3));
      const auto ceil = constant(node, 4), count_pad = constant(node, 5), divisor = constant(node, 6);
      if (!kernel || !padding || !ceil || ceil->toBool() || !count_pad || !count_pad->toBool() ||
          (divisor && !divisor->isNone()))
        return std::nullopt;
      if (!stride) {
        const auto empty = constant(node, 2);
        if (!empty || !empty->isIntList() || !empty->toIntVector().empty()) return std::nullopt;
        stride = kernel;  // stride=None is stored as []
      }
      std::tie(layer.kernel_h, layer.kernel_w) = *kernel;
      std::tie(layer.stride_h, layer.stride_w) = *stride;
      std::tie(layer.padding_h, layer.padding_w) = *padding;
      return layer;
    }
    if (op == "flatten") {
      const auto start = constant(node, 1), end = constant(node, 2);
      if (!start || !end || start->toInt() != 1 || end->toInt() != -1) return std::nullopt;
      layer.kind = LayerKind::kFlatten;
      return layer;
    }
    if (op == "tanh") return LayerSpec{LayerKind::kTanh};
    if (op == "sigmoid") return LayerSpec{LayerKind::kSigmoid};
    if (op == "selu") return LayerSpec{LayerKind::kSelu};
    if (op == "softplus") {
      layer.kind = LayerKind::kSoftplus;
      layer.beta = number(constant(node, 1), 1.0);
      layer.threshold = number(constant(node, 2), 20.0);
      return layer;
    }
    if (op == "gelu") {
      layer.kind = LayerKind::kGelu;
      const auto mode = constant(node, 1);
      layer.gelu_tanh = mode && mode->isString() && mode->toStringRef() == "tanh";
      return layer;
    }
    if (op == "elu") {
      layer.kind = LayerKind::kElu;
      layer.alpha = number(constant(node, 1), 1.0);
      layer.scale = number(constant(node, 2), 1.0);
      layer.input_scale = number(constant(node, 3), 1.0);
      return layer;
    }
    return std::nullopt;
  }

  void unsupported(const Node* node, Index position) {
    result.layers.clear();
    result.unsupported_operator = node->kind().toUnqualString();
    result.unsupported_position = position;
  }

  /// Walks the forward graph's operators; stops at the first that is not a supported layer.
  void read(const std::shared_ptr<torch::jit::Graph>& graph) {
    const Value* current = graph->inputs().at(1);  // inputs()[0] is the module itself
    Index position = 0;
    for (const Node* node : graph->nodes()) {
      if (node->kind() == c10::prim::Constant) continue;
      ++position;
      const std::optional<LayerSpec> layer = node->kind().is_aten() ? layer_of(node) : std::nullopt;
      if (!layer || node->inputs().empty() || node->input(0) != current || node->outputs().size() != 1) {
        unsupported(node, position);
        return;
      }
      result.layers.push_back(*layer);
      current = node->output();
    }
    if (graph->outputs().size() != 1 || graph->outputs()[0] != current) {
      result.layers.clear();
      result.unsupported_operator = "the forward's return value (not the last layer's output)";
      result.unsupported_position = position + 1;
    }
  }
};

}  // namespace
}  // namespace filkit

extern "C" __attribute__((visibility("default"))) filkit::TorchScriptNetwork filkit_read_torchscript(
    const std::string& path, const std::vector<filkit::Index>& input_shape, std::uint64_t seed) {
  using namespace filkit;
  const std::string where = "torchscript '" + path + "'";
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& error) {
    throw std::invalid_argument(where + ": not a TorchScript module saved by torch.jit.save (" +
                                first_line(error.what()) + ")");
  }
  TorchScriptNetwork result;
  try {
    module.eval();
    module.to(at::kDouble);
    torch::jit::Module frozen = torch::jit::freeze_module(module);
    std::shared_ptr<torch::jit::Graph> graph = frozen.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    torch::jit::ConstantPropagation(graph);
    ChainReader reader{result, {}};
    reader.read(graph);
    if (result.unsupported_operator.empty())
      result.parameters = [&] {
        const at::Tensor all = reader.weights.empty() ? at::zeros({0}, at::kDouble) : at::cat(reader.weights);
        VectorXd w(all.numel());
        std::memcpy(w.data(), all.data_ptr<double>(), sizeof(double) * w.size());
        return w;
      }();
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& error) {
    throw std::invalid_argument(where + ": cannot read the module's forward (" + first_line(error.what()) + ")");
  }
  // The module's own outputs on two seeded inputs, for the library's check.
  std::int64_t d = 1;
  std::vector<std::int64_t> batch_shape = {2};
  for (Index size : input_shape) {
    d *= size;
    batch_shape.push_back(size);
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor inputs = at::randn({2, d}, generator, at::TensorOptions().dtype(at::kDouble));
  at::Tensor outputs;
  try {
    at::NoGradGuard no_grad;
    const c10::IValue output = module.forward({inputs.reshape(batch_shape)});
    if (!output.isTensor()) throw std::invalid_argument("it returns a " + output.tagKind() + ", not a tensor");
    outputs = output.toTensor().to(at::kDouble).contiguous();
    if (outputs.dim() != 2 || outputs.size(0) != 2)
      throw std::invalid_argument("it returns a tensor of " + std::to_string(outputs.dim()) +
                                  " dimensions, not (batch, classes) scores");
  } catch (const std::exception& error) {
    std::string shape;
    for (std::int64_t size : batch_shape) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
    throw std::invalid_argument(where + ": the module's forward does not run on a batch of shape (" + shape +
                                "), the data's: " + first_line(error.what()));
  }
  result.sample_inputs = RowMatrix(2, d);
  std::memcpy(result.sample_inputs.data(), inputs.data_ptr<double>(), sizeof(double) * 2 * d);
  result.sample_outputs = MatrixXd(2, outputs.size(1));
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t k = 0; k < outputs.size(1); ++k) result.sample_outputs(b, k) = outputs[b][k].item<double>();
  return result;
}
