// The plugin's forward pass through a network plan (network_layers.hpp), shared by the networks'
// backend (network.cpp) and the released-gradient backend (released_gradient.cpp): the logits, and
// what per-example gradients need, every parametric layer's input (dense: its activations; conv:
// its unfolded patches, B x in kh kw x L) and pre-activation (dense: B x out; conv: B x out x L).
// Plain LibTorch operations: differentiable to any order about the parameters and the input.
#pragma once

#include "filkit/networks/network_layers.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace filkit {

struct ForwardPass {
  at::Tensor logits;
  std::vector<at::Tensor> inputs, preactivations;
};

/// The activation function of an activation layer.
at::Tensor activation(const LayerSpec& layer, const at::Tensor& a);

/// The pass of a batch x (B x d, rows channel-major for images) at parameters w (p), with a leading
/// constant 1 feature when `intercept` (the softmax plan's).
ForwardPass forward_pass(const NetworkPlan& plan, bool intercept, const at::Tensor& w, const at::Tensor& x);

}  // namespace filkit
