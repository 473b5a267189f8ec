// The LibTorch plugin (libfilkit_torch.so): the NetworkBackend of network_backend.hpp behind
// networks.hpp's Network, with batched per-example clipped gradients and their Jacobian-vector and
// vector-Jacobian products about the input, for any chain of layers that network_layers.hpp
// accepts. With torchscript_reader.cpp, the only code that includes LibTorch (slow to compile,
// slow to load); it links no filkit library code, only headers.
#include "dpsgd/network_backend.hpp"

#include "base/seeding.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

using at::Tensor;

const at::TensorOptions kDouble = at::TensorOptions().dtype(at::kDouble);

Tensor to_tensor(const RowMatrix& X) {
  return at::from_blob(const_cast<double*>(X.data()), {X.rows(), X.cols()}, kDouble).clone();
}

Tensor to_tensor(const VectorXd& v) { return at::from_blob(const_cast<double*>(v.data()), {v.size()}, kDouble).clone(); }

Tensor to_labels(const VectorXd& y) {
  Tensor labels = at::empty({y.size()}, at::TensorOptions().dtype(at::kLong));
  for (Index i = 0; i < y.size(); ++i) labels[i] = static_cast<std::int64_t>(y(i));
  return labels;
}

RowMatrix to_row_matrix(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  RowMatrix m(c.size(0), c.size(1));
  std::memcpy(m.data(), c.data_ptr<double>(), sizeof(double) * m.size());
  return m;
}

VectorXd to_vector(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  VectorXd v(c.numel());
  std::memcpy(v.data(), c.data_ptr<double>(), sizeof(double) * v.size());
  return v;
}

/// Gradients of `output` (a scalar) about `input`; zeros where `input` does not reach it.
Tensor gradient_of(const Tensor& output, const Tensor& input, bool create_graph = false) {
  const Tensor g = torch::autograd::grad({output}, {input}, {}, /*retain_graph=*/true, create_graph,
                                         /*allow_unused=*/true)[0];
  return g.defined() ? g : at::zeros_like(input);
}

/// Rows b of one weight's or bias's per-example gradients: stored (B x size), or, for a dense
/// layer's weight, as the outer products left_b right_b^T (B x out and B x in) that are never
/// formed. On a CPU the elementwise work on B x p tensors, not the network, dominates the cost, so
/// norms (||l||^2 ||r||^2), inner products (l^T U r) and batch sums (L^T R) use the factors.
struct GradientBlock {
  Tensor block, left, right;

  std::int64_t size() const { return block.defined() ? block.size(1) : left.size(1) * right.size(1); }
  Tensor materialize() const {
    return block.defined() ? block : at::bmm(left.unsqueeze(2), right.unsqueeze(1)).reshape({left.size(0), size()});
  }
  Tensor squared_norms() const {  // B
    return block.defined() ? block.pow(2).sum(1) : left.pow(2).sum(1) * right.pow(2).sum(1);
  }
  Tensor inner_products(const Tensor& U) const {  // B: <row b, U row b>, U B x size
    if (block.defined()) return (block * U).sum(1);
    const Tensor Ur = at::bmm(U.reshape({left.size(0), left.size(1), right.size(1)}), right.unsqueeze(2));
    return (left * Ur.squeeze(2)).sum(1);
  }
  Tensor weighted_sum(const Tensor& weights) const {  // size: sum_b weights_b row_b
    if (block.defined()) return at::mv(block.t(), weights);
    return at::mm((left * weights.unsqueeze(1)).t(), right).reshape({-1});
  }
};

/// Per-example gradients g_b (B x p as blocks in parameter order) and their clipped versions
/// g~_b = factor_b g_b.
struct ClippedGradients {
  std::vector<GradientBlock> blocks;
  Tensor factor;  // B

  /// sum_b <g~_b, U_b> for U (B x p).
  Tensor contract(const Tensor& U) const {
    Tensor inner = at::zeros({factor.size(0)}, kDouble);
    std::int64_t offset = 0;
    for (const GradientBlock& block : blocks) {
      inner = inner + block.inner_products(U.narrow(1, offset, block.size()));
      offset += block.size();
    }
    return (factor * inner).sum();
  }
  /// sum_b g~_b (p), detached.
  Tensor batch_sum() const {
    std::vector<Tensor> sums;
    const Tensor f = factor.detach();
    for (const GradientBlock& block : blocks) sums.push_back(block.weighted_sum(f).detach());
    return at::cat(sums);
  }
  /// g~ (B x p) or, unclipped, g.
  Tensor materialize(bool clipped = true) const {
    std::vector<Tensor> parts;
    for (const GradientBlock& block : blocks) parts.push_back(block.materialize());
    const Tensor g = at::cat(parts, 1);
    return clipped ? g * factor.unsqueeze(1) : g;
  }
};

/// The records of one forward pass needed for per-example gradients: for every layer with
/// parameters, its input (dense: B x in; conv: the unfolded patches, B x in k^2 x L) and its
/// pre-activation (dense: B x out; conv: B x out x L).
struct ForwardPass {
  Tensor logits;
  std::vector<Tensor> inputs, preactivations;
};

Tensor activation(const LayerSpec& layer, const Tensor& a) {
  switch (layer.kind) {
    case LayerKind::kTanh: return at::tanh(a);
    case LayerKind::kSigmoid: return at::sigmoid(a);
    case LayerKind::kSoftplus: return at::softplus(a, layer.beta, layer.threshold);
    case LayerKind::kGelu: return at::gelu(a, layer.gelu_tanh ? "tanh" : "none");
    case LayerKind::kElu: return at::elu(a, layer.alpha, layer.scale, layer.input_scale);
    case LayerKind::kSelu: return at::selu(a);
    default: throw std::logic_error("activation: not an activation");
  }
}

struct TorchNetwork final : NetworkBackend {
  NetworkOptions options;
  NetworkPlan plan;
  Index p = 0;

  /// The logits of a batch x (B x d), recording what per-example gradients need.
  ForwardPass forward(const Tensor& w, const Tensor& x) const {
    const std::int64_t B = x.size(0);
    ForwardPass pass;
    Tensor a = options.intercept ? at::cat({at::ones({B, 1}, kDouble), x}, 1) : x;
    if (plan.input_shape.size() == 3) a = a.reshape({B, plan.input_shape[0], plan.input_shape[1], plan.input_shape[2]});
    for (const PlannedLayer& layer : plan.layers) {
      const LayerSpec& s = layer.spec;
      switch (s.kind) {
        case LayerKind::kDense: {
          const Tensor W = w.narrow(0, layer.offset, layer.weight_size()).view({s.out, layer.in});
          Tensor z = at::matmul(a, W.t());
          if (s.bias) z = z + w.narrow(0, layer.offset + layer.weight_size(), s.out);
          pass.inputs.push_back(a);
          pass.preactivations.push_back(z);
          a = z;
          break;
        }
        case LayerKind::kConv: {
          const Tensor patches = at::im2col(a, {s.kernel_h, s.kernel_w}, {1, 1}, {s.padding_h, s.padding_w},
                                            {s.stride_h, s.stride_w});  // B x in kh kw x L
          const Tensor W = w.narrow(0, layer.offset, layer.weight_size()).view({s.out, layer.fan_in()});
          // (B L x in k^2) times (in k^2 x out) as one GEMM, rather than B small ones.
          Tensor z = at::matmul(patches.transpose(1, 2), W.t()).transpose(1, 2);  // B x out x L
          if (s.bias) z = z + w.narrow(0, layer.offset + layer.weight_size(), s.out).view({1, s.out, 1});
          pass.inputs.push_back(patches);
          pass.preactivations.push_back(z);
          a = z.view({B, s.out, layer.output_shape[1], layer.output_shape[2]});
          break;
        }
        case LayerKind::kAvgPool:
          a = at::avg_pool2d(a, {s.kernel_h, s.kernel_w}, {s.stride_h, s.stride_w}, {s.padding_h, s.padding_w},
                             /*ceil_mode=*/false, /*count_include_pad=*/true);
          break;
        case LayerKind::kFlatten: a = a.reshape({B, -1}); break;
        default: a = activation(s, a); break;
      }
    }
    pass.logits = a;
    return pass;
  }

  /// Per-example gradients of the cross-entropy as a differentiable function of x, and their
  /// clip factors f_b = 1 / (GELU(||g_b||/C - 1) + 1), GELU in JAX's tanh form
  /// (clipped_gradient.hpp); C <= 0 leaves them unclipped (f = 1).
  ClippedGradients per_example_gradients(const Tensor& w, const Tensor& x, const Tensor& labels, double C,
                                         bool create_graph) const {
    const ForwardPass pass = forward(w, x);
    const Tensor loss = -at::log_softmax(pass.logits, 1).gather(1, labels.view({-1, 1})).sum();
    const std::vector<Tensor> dz = torch::autograd::grad({loss}, pass.preactivations, {}, true, create_graph);
    ClippedGradients g;
    std::size_t l = 0;
    for (const PlannedLayer& layer : plan.layers) {
      if (!layer.spec.has_parameters()) continue;
      const Tensor& input = pass.inputs[l];
      const Tensor& grad = dz[l];
      ++l;
      if (layer.spec.kind == LayerKind::kDense) {
        g.blocks.push_back({Tensor(), grad, input});
        if (layer.spec.bias) g.blocks.push_back({grad});
      } else {
        g.blocks.push_back({at::bmm(grad, input.transpose(1, 2)).reshape({x.size(0), layer.weight_size()})});
        if (layer.spec.bias) g.blocks.push_back({grad.sum(2)});
      }
    }
    if (C <= 0.0) {
      g.factor = at::ones({x.size(0)}, kDouble);
      return g;
    }
    Tensor squared_norm = at::zeros({x.size(0)}, kDouble);
    for (const GradientBlock& block : g.blocks) squared_norm = squared_norm + block.squared_norms();
    const Tensor t = at::sqrt(squared_norm) / C - 1.0;
    const Tensor gelu = 0.5 * t * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * t * t * t)));
    g.factor = 1.0 / (gelu + 1.0);
    return g;
  }

  void account_chunk(const Tensor& w, const Tensor& x, const Tensor& labels, double C,
                     const NetworkAccountingRequest& request, std::uint64_t seed, Index first,
                     NetworkBatchAccounting& result) const;

  MatrixXd logits(const VectorXd& w, const RowMatrix& X) const override;
  MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const override;
  MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm) const override;
  MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& V) const override;
  MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& U) const override;
  NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                       const NetworkAccountingRequest& request, std::uint64_t seed) const override;
};

/// One generator per example (seeded by its position in the batch), so that estimates do not
/// depend on how the batch is cut into chunks.
std::vector<at::Generator> example_generators(std::uint64_t seed, Index first, Index count) {
  std::vector<at::Generator> generators;
  for (Index b = 0; b < count; ++b)
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(
        splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(first + b)))));
  return generators;
}

Tensor gaussian_rows(std::vector<at::Generator>& generators, std::int64_t size) {
  const Tensor rows = at::empty({static_cast<std::int64_t>(generators.size()), size}, kDouble);
  at::parallel_for(0, rows.size(0), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) rows[b].normal_(0.0, 1.0, generators[b]);
  });
  return rows;
}

Tensor coordinate_rows(std::vector<at::Generator>& generators, std::int64_t size) {
  std::vector<Tensor> rows;
  for (at::Generator& g : generators) rows.push_back(at::randint(size, {1}, g, at::TensorOptions().dtype(at::kLong)));
  return at::stack(rows);  // B x 1
}

Tensor squared_row_norms(const Tensor& t) { return t.pow(2).sum(1); }

void TorchNetwork::account_chunk(const Tensor& w, const Tensor& x_data, const Tensor& labels, double C,
                                 const NetworkAccountingRequest& request, std::uint64_t seed, Index first,
                                 NetworkBatchAccounting& result) const {
  const std::int64_t B = x_data.size(0), d = x_data.size(1);
  const Tensor x = x_data.detach().requires_grad_(true);
  const ClippedGradients clipped = per_example_gradients(w, x, labels, C, /*create_graph=*/true);
  result.clipped_sum += to_vector(clipped.batch_sum());

  // H(U) = G^T U with its graph (U a dummy of zeros): G v = dH/dU contracted with v.
  const bool needs_jvp = request.trace != TraceMethod::kGaussian || request.spectral != SpectralMethod::kNone;
  Tensor U, H;
  if (needs_jvp) {
    U = at::zeros({B, p}, kDouble).requires_grad_(true);
    H = gradient_of(clipped.contract(U), x, /*create_graph=*/true);
  }
  auto jvp = [&](const Tensor& V) { return gradient_of((H * V).sum(), U); };
  auto vjp = [&](const Tensor& W) { return gradient_of(clipped.contract(W), x); };

  std::vector<at::Generator> generators = example_generators(seed, first, B);
  Tensor trace = at::zeros({B}, kDouble), spectral = at::full({B}, std::nan(""), kDouble);
  const bool exact_spectral = request.spectral == SpectralMethod::kExact;
  std::vector<Tensor> columns;  // G e_k, kept only for the exact spectral norm
  if (request.trace == TraceMethod::kExact || exact_spectral) {
    Tensor exact_trace = at::zeros({B}, kDouble);
    for (Index k = 0; k < d; ++k) {
      const Tensor column = gradient_of(H.select(1, k).sum(), U);
      exact_trace += squared_row_norms(column);
      if (exact_spectral) columns.push_back(column);
    }
    if (request.trace == TraceMethod::kExact) trace = exact_trace;
  }
  if (request.trace == TraceMethod::kCoordinates) {
    for (int j = 0; j < request.probes; ++j) {
      const Tensor k = coordinate_rows(generators, d);
      trace += static_cast<double>(d) * squared_row_norms(gradient_of(H.gather(1, k).sum(), U));
    }
    trace /= request.probes;
  } else if (request.trace == TraceMethod::kGaussian) {
    for (int j = 0; j < request.probes; ++j) trace += squared_row_norms(vjp(gaussian_rows(generators, p)));
    trace /= request.probes;
  }
  if (exact_spectral) {
    const Tensor G = at::stack(columns, 2);  // B x p x d
    spectral = at::linalg_eigvalsh(at::bmm(G.transpose(1, 2), G)).select(1, d - 1).clamp_min(0.0);
  } else if (request.spectral == SpectralMethod::kPowerIteration) {
    Tensor v = gaussian_rows(generators, d);
    v = v / at::norm(v, 2, {1}, true);
    for (int it = 0; it < request.power_iterations; ++it) {
      const Tensor Gv = jvp(v);
      spectral = squared_row_norms(Gv);
      if (it + 1 == request.power_iterations) break;
      const Tensor next = vjp(Gv);
      const Tensor norms = at::norm(next, 2, {1}, true);
      v = at::where(norms > 0, next / norms.clamp_min(std::numeric_limits<double>::min()), v);
    }
  }
  result.trace.segment(first, B) = to_vector(trace);
  result.spectral.segment(first, B) = to_vector(spectral);
}

MatrixXd TorchNetwork::logits(const VectorXd& w, const RowMatrix& X) const {
  at::NoGradGuard no_grad;
  const Tensor weights = to_tensor(w);
  MatrixXd scores(X.rows(), plan.layers.back().output_shape[0]);
  constexpr Index kRows = 2000;
  for (Index start = 0; start < X.rows(); start += kRows) {
    const Index rows = std::min(kRows, X.rows() - start);
    scores.middleRows(start, rows) = to_row_matrix(forward(weights, to_tensor(RowMatrix(X.middleRows(start, rows)))).logits);
  }
  return scores;
}

MatrixXd TorchNetwork::gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  const Tensor x = to_tensor(X).requires_grad_(true);
  return to_row_matrix(per_example_gradients(to_tensor(w), x, to_labels(y), 0.0, /*create_graph=*/false).materialize(false));
}

MatrixXd TorchNetwork::clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                         double clip_norm) const {
  const Tensor x = to_tensor(X).requires_grad_(true);
  return to_row_matrix(per_example_gradients(to_tensor(w), x, to_labels(y), clip_norm, /*create_graph=*/false).materialize());
}

MatrixXd TorchNetwork::jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                double clip_norm, const RowMatrix& V) const {
  const Tensor x = to_tensor(X).requires_grad_(true);
  const ClippedGradients clipped = per_example_gradients(to_tensor(w), x, to_labels(y), clip_norm, true);
  const Tensor U = at::zeros({X.rows(), p}, kDouble).requires_grad_(true);
  const Tensor H = gradient_of(clipped.contract(U), x, /*create_graph=*/true);
  return to_row_matrix(gradient_of((H * to_tensor(V)).sum(), U));
}

MatrixXd TorchNetwork::vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                double clip_norm, const RowMatrix& U) const {
  const Tensor x = to_tensor(X).requires_grad_(true);
  const ClippedGradients clipped = per_example_gradients(to_tensor(w), x, to_labels(y), clip_norm, true);
  return to_row_matrix(gradient_of(clipped.contract(to_tensor(U)), x));
}

NetworkBatchAccounting TorchNetwork::account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                   double clip_norm, const NetworkAccountingRequest& request,
                                                   std::uint64_t seed) const {
  NetworkBatchAccounting result;
  result.clipped_sum = VectorXd::Zero(p);
  result.trace = VectorXd::Zero(X.rows());
  result.spectral = VectorXd::Constant(X.rows(), std::numeric_limits<double>::quiet_NaN());
  const Tensor weights = to_tensor(w);
  const Index chunk = options.chunk;
  for (Index start = 0; start < X.rows(); start += chunk) {
    const Index rows = std::min(chunk, X.rows() - start);
    account_chunk(weights, to_tensor(RowMatrix(X.middleRows(start, rows))), to_labels(y.segment(start, rows)),
                  clip_norm, request, seed, start, result);
  }
  return result;
}

}  // namespace
}  // namespace filkit

// The plugin's only exported symbols (it is built with hidden visibility).

extern "C" __attribute__((visibility("default"))) int filkit_network_backend_abi_version() {
  return filkit::kNetworkBackendAbiVersion;
}

extern "C" __attribute__((visibility("default"))) filkit::NetworkBackend* filkit_create_network_backend(
    const filkit::NetworkPlan& plan, const filkit::NetworkOptions& options) {
  auto network = std::make_unique<filkit::TorchNetwork>();
  network->options = options;
  network->plan = plan;
  network->p = plan.parameter_count;
  // LibTorch's own thread pool follows OpenMP's setting (--threads).
  at::set_num_threads(omp_get_max_threads());
  return network.release();
}
