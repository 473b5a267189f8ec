// Per-example gradients of a network's cross-entropy and their clipped versions, with batched
// products with their Jacobian about the input (docs/mathematics.md, section 7.9): what the
// networks' accountant (network.cpp) and fim's constant perturbation on networks
// (released_gradient.cpp) both compute, from the records of one forward and backward pass.
#pragma once

#include "networks/torch/forward_pass.hpp"
#include "networks/torch/tensor_conversions.hpp"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace filkit {

using at::Tensor;

/// Gradients of sum_i <outputs_i, cotangents_i> about `input`; zeros where `input` does not reach them.
Tensor gradient_of(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents, const Tensor& input,
                   bool create_graph = false);

/// B x (everything else): LibTorch 1.13 broadcasts a B x 1 factor over B x n quickly, over
/// B x m x n ten times slower.
inline Tensor flat_rows(const Tensor& t) { return t.reshape({t.size(0), -1}); }

/// out_b = A_b B_b for every example b (A: B x m x k, B: B x k x n, any strides), the examples
/// split across LibTorch's threads, since at::bmm multiplies them one after another on one thread
/// (inside a piece, see pieces_of, everything runs on the piece's thread anyway). Values only: no
/// graph is recorded.
Tensor batched_matmul(const Tensor& A, const Tensor& B);

/// One parameter layer's per-example gradients, from the two factors that one backward pass of
/// the summed loss gives for the whole batch: delta = dL/dz (dense: B x out; conv: B x out x L),
/// whose row b is example b's own since its loss depends only on its own row, and the layer's input
/// (dense: B x in; conv: the unfolded patches, B x in k^2 x L). Example b's weight gradient is
/// delta_b input_b^T (for a convolution a sum over the L positions), its bias gradient delta_b
/// (summed over L). Dense weight gradients are never formed: their norms ||delta||^2 ||a||^2, inner
/// products delta^T U a and batch sum (f delta)^T A come from the factors; convolution weight
/// gradients are formed once, for their norms. Values only (the graph is ClippedGradients').
struct GradientBlock {
  bool conv = false, bias = false;
  std::int64_t out = 0, in = 0;  // in: in k^2 for a convolution
  Tensor delta, input;
  Tensor weight;         // conv: B x out x in
  Tensor bias_gradient;  // B x out

  std::int64_t weight_size() const { return out * in; }
  std::int64_t size() const { return weight_size() + (bias ? out : 0); }
  Tensor squared_norms() const {  // B
    if (!conv) return delta.pow(2).sum(1) * (input.pow(2).sum(1) + (bias ? 1.0 : 0.0));
    const Tensor weights = flat_rows(weight).pow(2).sum(1);
    return bias ? weights + bias_gradient.pow(2).sum(1) : weights;
  }
};

/// What a product G^T U needs of a probe U (B x p), block by block: a convolution's weight rows
/// (B x out x in), of a dense layer's only U a (B x out) and U^T delta (B x in), and the bias rows.
struct BlockProbe {
  Tensor weight;
  Tensor times_input, transposed_times_delta;
  Tensor bias;
};

/// Per-example gradients g_b (blocks in parameter order) and their clipped versions
/// g~_b = f_b g_b, f_b = f(||g_b||), with products with G_b = d g~_b / d x_b for every example at
/// once. g~ depends on x only through the records R = (delta, input) of every block, so
///   G^T U = J_R^T c(U): the cotangents c = dR of sum_b <g~_b, U_b> by hand (batched products, no
///          graph), then one reverse pass through the kept graph of R (forward and backward pass);
///   G V   = T(J_R V):   J_R V by the double-backward trick on R (dummy cotangents c, H = J_R^T c
///          kept with its graph, J_R V = d <H, V> / dc), then the tangent T of g~ by hand;
/// with dg~ = f dg + f'(||g||) <g, dg> / ||g|| g (clipped_gradient.hpp; docs/mathematics.md,
/// section 7.9).
struct ClippedGradients {
  std::vector<GradientBlock> blocks;
  Tensor factor;                // B: f_b
  Tensor slope;                 // B: f'(||g_b||) / ||g_b||, 0 when unclipped
  bool clipped = true;          // false: C <= 0, f = 1 and the products are those of g
  Tensor x;                     // the input (requires grad): B x d
  std::vector<Tensor> records;  // delta and input of every block as functions of x (with create_graph)

  std::int64_t rows() const { return factor.size(0); }
  std::int64_t size() const {
    std::int64_t p = 0;
    for (const GradientBlock& block : blocks) p += block.size();
    return p;
  }
  /// sum_b g~_b (p).
  Tensor batch_sum() const;
  /// g~ (B x p) or, unclipped, g, into g.
  void materialize(Tensor& g, bool apply_clip = true) const;
  Tensor materialize(bool apply_clip = true) const {
    Tensor g = at::empty({rows(), size()}, factor.options());
    materialize(g, apply_clip);
    return g;
  }
  /// What G^T U needs of U (B x p).
  std::vector<BlockProbe> probe_of(const Tensor& U) const;
  /// Row b: G_b^T U_b (B x d).
  Tensor vector_jacobian_products(const std::vector<BlockProbe>& probe) const;
  Tensor vector_jacobian_products(const Tensor& U) const { return vector_jacobian_products(probe_of(U)); }
  /// H = J_R^T c for the dummy cotangents c (B x d, with its graph), for jacobian_vector_products.
  Tensor prepare_jacobian_vector_products();
  /// Row b: G_b V_b (B x p) for the V of `directional` = <H, V> (any scalar linear in H).
  Tensor jacobian_vector_products(const Tensor& directional) const;
  /// g (B x p), the unclipped gradients, once prepare_jacobian_vector_products() has run.
  const Tensor& unclipped() const { return unclipped_; }

 private:
  std::vector<Tensor> dummy_cotangents_;
  Tensor unclipped_;  // g (B x p), for the JVPs' tangent map
};

/// Per-example gradients of the cross-entropy at x (requires grad) and their clip factors
/// f_b = 1 / (GELU(||g_b||/C - 1) + 1), GELU in JAX's tanh form (clipped_gradient.hpp); C <= 0
/// leaves them unclipped (f = 1, and the Jacobian products are those of g). With create_graph,
/// Jacobian products about x are available.
ClippedGradients clipped_gradients(const NetworkPlan& plan, bool intercept, const Tensor& w, const Tensor& x,
                                   const Tensor& labels, double C, bool create_graph);

}  // namespace filkit
