// clipped_gradients.hpp's per-example gradients and their Jacobian products.
#include "networks/torch/clipped_gradients.hpp"

#include "networks/torch/tensor_conversions.hpp"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

namespace filkit {

Tensor gradient_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents, const Tensor& input,
                   bool create_graph) {
  const Tensor g = torch::autograd::grad(outputs, {input}, cotangents, /*retain_graph=*/true, create_graph,
                                         /*allow_unused=*/true)[0];
  return g.defined() ? g : at::zeros_like(input);
}

Tensor batched_matmul(const Tensor& A, const Tensor& B) {
  const Tensor a = A.detach(), b = B.detach();
  Tensor product = at::empty({a.size(0), a.size(1), b.size(2)}, a.options());
  at::parallel_for(0, a.size(0), 1, [&](std::int64_t begin, std::int64_t end) {
    Tensor slice = product.slice(0, begin, end);
    at::bmm_out(slice, a.slice(0, begin, end), b.slice(0, begin, end));
  });
  return product;
}

Tensor ClippedGradients::batch_sum() const {
  std::vector<Tensor> sums;
  for (const GradientBlock& block : blocks) {
    if (block.conv) sums.push_back(at::mv(block.weight.reshape({rows(), block.weight_size()}).t(), factor));
    else sums.push_back(at::mm((block.delta * factor.unsqueeze(1)).t(), block.input).reshape({-1}));
    if (block.bias) sums.push_back(at::mv(block.bias_gradient.t(), factor));
  }
  return at::cat(sums);
}

void ClippedGradients::materialize(Tensor& g, bool apply_clip) const {
  const std::int64_t B = rows();
  const Tensor f = apply_clip ? factor : at::ones({B}, factor.options());
  std::int64_t offset = 0;
  for (const GradientBlock& block : blocks) {
    Tensor weight = g.narrow(1, offset, block.weight_size());
    if (block.conv) {
      at::mul_out(weight, flat_rows(block.weight), f.unsqueeze(1));
    } else {
      Tensor outer_products = weight.view({B, block.out, block.in});
      at::mul_out(outer_products, (block.delta * f.unsqueeze(1)).unsqueeze(2), block.input.unsqueeze(1));
    }
    if (block.bias) {
      Tensor bias = g.narrow(1, offset + block.weight_size(), block.out);
      at::mul_out(bias, block.bias_gradient, f.unsqueeze(1));
    }
    offset += block.size();
  }
}

std::vector<BlockProbe> ClippedGradients::probe_of(const Tensor& U) const {
  const std::int64_t B = rows();
  std::vector<BlockProbe> probe;
  std::int64_t offset = 0;
  for (const GradientBlock& block : blocks) {
    BlockProbe part;
    const Tensor weight = U.narrow(1, offset, block.weight_size()).view({B, block.out, block.in});
    if (block.conv) {
      part.weight = weight;
    } else {
      part.times_input = batched_matmul(weight, block.input.unsqueeze(2)).squeeze(2);
      part.transposed_times_delta = batched_matmul(weight.transpose(1, 2), block.delta.unsqueeze(2)).squeeze(2);
    }
    if (block.bias) part.bias = U.narrow(1, offset + block.weight_size(), block.out);
    probe.push_back(part);
    offset += block.size();
  }
  return probe;
}

/// Of every record, the derivative of the probe sum_b <g~_b, U_b>: with c_b = <g_b, U_b> the
/// cotangent of g_b is U~_b = f_b U_b + beta_b g_b, beta_b = c_b f'(||g_b||) / ||g_b||, and of a
/// block's weight gradient delta input^T: d delta = U~ input, d input = U~^T delta (dense: U~ never
/// formed, U~ a = f U a + beta ||a||^2 delta, U~^T delta = f U^T delta + beta ||delta||^2 a).
Tensor ClippedGradients::vector_jacobian_products(const std::vector<BlockProbe>& probe) const {
  const std::int64_t B = rows();
  auto per_row = [B](const Tensor& t) { return t.view({B, 1}); };
  Tensor inner = at::zeros({B}, factor.options());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const GradientBlock& block = blocks[i];
    if (block.conv) inner += (flat_rows(block.weight) * flat_rows(probe[i].weight)).sum(1);
    else inner += (block.delta * probe[i].times_input).sum(1);
    if (block.bias) inner += (block.bias_gradient * probe[i].bias).sum(1);
  }
  const Tensor beta = inner * slope;
  std::vector<Tensor> cotangents;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const GradientBlock& block = blocks[i];
    const BlockProbe& u = probe[i];
    Tensor d_delta, d_input;
    if (block.conv) {
      const Tensor cotangent = (flat_rows(u.weight) * per_row(factor) + flat_rows(block.weight) * per_row(beta))
                                   .view({B, block.out, block.in});
      d_delta = batched_matmul(cotangent, block.input);
      if (block.bias) d_delta += (u.bias * per_row(factor) + block.bias_gradient * per_row(beta)).unsqueeze(2);
      d_input = batched_matmul(cotangent.transpose(1, 2), block.delta);
    } else {
      const Tensor input_norms = block.input.pow(2).sum(1) + (block.bias ? 1.0 : 0.0);
      d_delta = (block.bias ? u.times_input + u.bias : u.times_input) * per_row(factor) +
                block.delta * per_row(beta * input_norms);
      d_input = u.transposed_times_delta * per_row(factor) + block.input * per_row(beta * block.delta.pow(2).sum(1));
    }
    cotangents.push_back(d_delta);
    cotangents.push_back(d_input);
  }
  return gradient_of(records, cotangents, x);
}

Tensor ClippedGradients::prepare_jacobian_vector_products() {
  dummy_cotangents_.clear();
  for (const Tensor& record : records) dummy_cotangents_.push_back(at::zeros_like(record).requires_grad_(true));
  unclipped_ = materialize(false);
  return gradient_of(records, dummy_cotangents_, x, /*create_graph=*/true);
}

Tensor ClippedGradients::jacobian_vector_products(const Tensor& directional) const {
  const std::vector<Tensor> tangents =
      torch::autograd::grad({directional}, dummy_cotangents_, {}, /*retain_graph=*/true,
                            /*create_graph=*/false, /*allow_unused=*/true);
  auto tangent = [&](std::size_t i) { return tangents[i].defined() ? tangents[i] : at::zeros_like(records[i]); };
  const std::int64_t B = rows();
  Tensor dg = at::empty({B, size()}, factor.options());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const GradientBlock& block = blocks[i];
    const Tensor d_delta = tangent(2 * i), d_input = tangent(2 * i + 1);
    Tensor weight = dg.narrow(1, offset, block.weight_size()).view({B, block.out, block.in});
    if (block.conv)
      weight.copy_(batched_matmul(d_delta, block.input.transpose(1, 2)) +
                   batched_matmul(block.delta, d_input.transpose(1, 2)));
    else
      weight.copy_(d_delta.unsqueeze(2) * block.input.unsqueeze(1) + block.delta.unsqueeze(2) * d_input.unsqueeze(1));
    if (block.bias) dg.narrow(1, offset + block.weight_size(), block.out).copy_(block.conv ? d_delta.sum(2) : d_delta);
    offset += block.size();
  }
  if (!clipped) return dg;
  const Tensor inner = (unclipped_ * dg).sum(1);
  return dg * factor.unsqueeze(1) + unclipped_ * (slope * inner).unsqueeze(1);
}

ClippedGradients clipped_gradients(const NetworkPlan& plan, bool intercept, const Tensor& w, const Tensor& x,
                                   const Tensor& labels, double C, bool create_graph) {
  const ForwardPass pass = forward_pass(plan, intercept, w, x);
  const Tensor loss = -at::log_softmax(pass.logits, 1).gather(1, labels.view({-1, 1})).sum();
  const std::vector<Tensor> dz = torch::autograd::grad({loss}, pass.preactivations, {}, create_graph, create_graph);
  ClippedGradients g;
  g.x = x;
  std::size_t l = 0;
  for (const PlannedLayer& layer : plan.layers) {
    if (!layer.spec.has_parameters()) continue;
    GradientBlock block;
    block.conv = layer.spec.kind == LayerKind::kConv;
    block.bias = layer.spec.bias;
    block.out = layer.spec.out;
    block.in = layer.fan_in();
    block.delta = dz[l].detach();
    block.input = pass.inputs[l].detach();
    if (block.conv) block.weight = batched_matmul(block.delta, block.input.transpose(1, 2));
    if (block.bias) block.bias_gradient = block.conv ? block.delta.sum(2) : block.delta;
    if (create_graph) {
      g.records.push_back(dz[l]);
      g.records.push_back(pass.inputs[l]);
    }
    g.blocks.push_back(std::move(block));
    ++l;
  }
  const std::int64_t B = x.size(0);
  const at::TensorOptions real = x.options();  // float64, or float32 (fim's objective)
  if (C <= 0.0) {
    g.clipped = false;
    g.factor = at::ones({B}, real);
    g.slope = at::zeros({B}, real);
    return g;
  }
  Tensor squared_norm = at::zeros({B}, real);
  for (const GradientBlock& block : g.blocks) squared_norm += block.squared_norms();
  const Tensor norm = at::sqrt(squared_norm);
  const Tensor t = norm / C - 1.0;
  const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
  const Tensor th = at::tanh(k * (t + a * t * t * t));
  const Tensor gelu = 0.5 * t * (1.0 + th);
  const Tensor gelu_derivative = 0.5 * (1.0 + th) + 0.5 * t * (1.0 - th * th) * k * (1.0 + 3.0 * a * t * t);
  g.factor = 1.0 / (gelu + 1.0);
  // f'(u) = -GELU'(u/C - 1) f(u)^2 / C; at g = 0 the slope multiplies g = 0.
  g.slope = at::where(norm > 0.0, -gelu_derivative * g.factor * g.factor / (C * norm.clamp_min(1e-300)),
                      at::zeros_like(norm));
  return g;
}

}  // namespace filkit
