// The LibTorch plugin (libfilkit_torch.so): the NetworkBackend of network_backend.hpp behind
// networks.hpp's Network, with batched per-example clipped gradients and their Jacobian-vector and
// vector-Jacobian products about the input, for any chain of layers that network_layers.hpp
// accepts. With torchscript_reader.cpp, the only code that includes LibTorch (slow to compile,
// slow to load); it links no filkit library code, only headers.
#include "networks/network_backend.hpp"

#include "base/seeding.hpp"
#include "base/splitmix_stream.hpp"
#include "networks/torch/clipped_gradients.hpp"
#include "networks/torch/forward_pass.hpp"
#include "networks/torch/pieces.hpp"
#include "networks/torch/tensor_conversions.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

using at::Tensor;

/// glibc hands every freed block above 128 kB back to the system (raising that bound adaptively
/// only up to the block sizes it has seen freed), so a step's temporaries of a few MB, allocated
/// and freed dozens of times, are faulted in and zeroed anew each time: a fifth of a step. Keeping
/// blocks below 32 MB, and up to 128 MB of free memory, in the heap avoids that. Process-wide, set
/// once when the plugin loads (what a well-tuned PyTorch in the same process then enjoys too).
const bool kMallocTuned = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 128 << 20) == 1;

/// The records of one forward pass needed for per-example gradients: for every layer with
/// parameters, its input (dense: B x in; conv: the unfolded patches, B x in k^2 x L) and its
/// pre-activation (dense: B x out; conv: B x out x L).
struct TorchNetwork final : NetworkBackend {
  NetworkOptions options;
  NetworkPlan plan;
  Index p = 0;
  at::ScalarType real = at::kDouble;  ///< options.precision's: every computation's tensor type

  ForwardPass forward(const Tensor& w, const Tensor& x) const { return forward_pass(plan, options.intercept, w, x); }

  ClippedGradients per_example_gradients(const Tensor& w, const Tensor& x, const Tensor& labels, double C,
                                         bool create_graph) const {
    return filkit::clipped_gradients(plan, options.intercept, w, x, labels, C, create_graph);
  }

  /// Row b: the clipped (C > 0) or plain (C = 0) gradient of example b (B x p).
  MatrixXd per_example_rows(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double C) const;
  /// Accounts the examples first, first + 1, ... of X in `result` (trace, spectral) and returns
  /// their clipped sum; their probe streams are those of positions first_position + first, ...
  VectorXd account_piece(const Tensor& w, const Tensor& x, const Tensor& labels, double C,
                         const NetworkAccountingRequest& request, std::uint64_t seed, Index first_position, Index first,
                         NetworkBatchAccounting& result) const;

  MatrixXd logits(const VectorXd& w, const RowMatrix& X) const override;
  MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const override;
  VectorXd gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const override;
  MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm) const override;
  MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& V) const override;
  MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& U) const override;
  NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                       const NetworkAccountingRequest& request, std::uint64_t seed,
                                       Index first_position) const override;
};

/// A network's chunk cut into pieces of at most kPieceRows examples (pieces.hpp).
std::vector<Rows> pieces_of_chunk(Rows chunk) { return pieces_of(chunk, kPieceRows); }

/// One stream per example, keyed by the seed and the example's position in the batch, so that
/// estimates do not depend on how the batch is cut into chunks.
std::vector<SplitMixStream> example_streams(std::uint64_t seed, Index first, Index count) {
  std::vector<SplitMixStream> streams;
  for (Index b = 0; b < count; ++b)
    streams.emplace_back(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(first + b))));
  return streams;
}

/// Row b: `size` standard normals from stream b.
Tensor gaussian_rows(std::vector<SplitMixStream>& streams, std::int64_t size) {
  const Tensor rows = at::empty({static_cast<std::int64_t>(streams.size()), size}, kDouble);
  double* data = rows.data_ptr<double>();
  at::parallel_for(0, rows.size(0), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) streams[b].normals(data + b * size, size);
  });
  return rows;
}

/// Row b: one index uniform on {0, ..., size - 1} from stream b (B x 1).
Tensor coordinate_rows(std::vector<SplitMixStream>& streams, std::int64_t size) {
  Tensor rows = at::empty({static_cast<std::int64_t>(streams.size()), 1}, at::TensorOptions().dtype(at::kLong));
  std::int64_t* data = rows.data_ptr<std::int64_t>();
  for (std::size_t b = 0; b < streams.size(); ++b)
    data[b] = static_cast<std::int64_t>(streams[b].below(static_cast<std::uint64_t>(size)));
  return rows;
}

/// A probe U with rows u_b ~ N(0, I_p) from the examples' streams, as much of it as G^T U needs.
/// A dense layer's U a and U^T delta are drawn from their joint law, given a and delta, from out +
/// in normals instead of out x in: with a^ = a / ||a||, z ~ N(0, I_out), z' ~ N(0, I_in),
///   U a = ||a|| z,   U^T delta = a^ (delta . z) + ||delta|| (I - a^ a^T) z'
/// (U a^ and U (I - a^ a^T) are independent), so G^T U, and the trace estimate ||G^T U||^2, have
/// the same distribution as with the whole U, at a third of the normals for the ConvNet.
std::vector<BlockProbe> gaussian_probe(const ClippedGradients& clipped, std::vector<SplitMixStream>& streams) {
  std::int64_t count = 0;
  for (const GradientBlock& block : clipped.blocks)
    count += (block.conv ? block.weight_size() : block.out + block.in) + (block.bias ? block.out : 0);
  const Tensor normals = gaussian_rows(streams, count).to(clipped.factor.scalar_type());
  const std::int64_t B = normals.size(0);
  auto next = [&, offset = std::int64_t{0}](std::int64_t size) mutable {
    const Tensor part = normals.narrow(1, offset, size);
    offset += size;
    return part;
  };
  std::vector<BlockProbe> probe;
  for (const GradientBlock& block : clipped.blocks) {
    BlockProbe part;
    if (block.conv) {
      part.weight = next(block.weight_size()).view({B, block.out, block.in});
    } else {
      const Tensor z = next(block.out), z_prime = next(block.in);
      const Tensor input_norm = block.input.norm(2, {1}, /*keepdim=*/true);
      const Tensor direction = block.input / input_norm.clamp_min(1e-300);  // 0 where a = 0
      part.times_input = input_norm * z;
      part.transposed_times_delta =
          direction * (block.delta * z).sum(1, /*keepdim=*/true) +
          block.delta.norm(2, {1}, /*keepdim=*/true) * (z_prime - direction * (direction * z_prime).sum(1, true));
    }
    if (block.bias) part.bias = next(block.out);
    probe.push_back(part);
  }
  return probe;
}

Tensor squared_row_norms(const Tensor& t) { return t.pow(2).sum(1); }

VectorXd TorchNetwork::account_piece(const Tensor& w, const Tensor& x_data, const Tensor& labels, double C,
                                     const NetworkAccountingRequest& request, std::uint64_t seed, Index first_position,
                                     Index first, NetworkBatchAccounting& result) const {
  const std::int64_t B = x_data.size(0), d = x_data.size(1);
  const Tensor x = x_data.detach().requires_grad_(true);
  ClippedGradients clipped = per_example_gradients(w, x, labels, C, /*create_graph=*/true);
  VectorXd clipped_sum = to_vector(clipped.batch_sum());

  // G v = clipped.jacobian_vector_products(<H, v>) (ClippedGradients: the double-backward trick).
  const bool needs_jvp = request.trace != TraceMethod::kGaussian || request.spectral != SpectralMethod::kNone;
  Tensor H;
  if (needs_jvp) H = clipped.prepare_jacobian_vector_products();
  auto jvp = [&](const Tensor& V) { return clipped.jacobian_vector_products((H * V).sum()); };
  auto vjp = [&](const Tensor& W) { return clipped.vector_jacobian_products(W); };

  std::vector<SplitMixStream> streams = example_streams(seed, first_position + first, B);
  Tensor trace = at::zeros({B}, kDouble), spectral = at::full({B}, std::nan(""), kDouble);
  const bool exact_spectral = request.spectral == SpectralMethod::kExact;
  std::vector<Tensor> columns;  // G e_k, kept only for the exact spectral norm
  if (request.trace == TraceMethod::kExact || exact_spectral) {
    Tensor exact_trace = at::zeros({B}, kDouble);
    for (Index k = 0; k < d; ++k) {
      const Tensor column = clipped.jacobian_vector_products(H.select(1, k).sum());
      exact_trace += squared_row_norms(column);
      if (exact_spectral) columns.push_back(column);
    }
    if (request.trace == TraceMethod::kExact) trace = exact_trace;
  }
  if (request.trace == TraceMethod::kCoordinates) {
    for (int j = 0; j < request.probes; ++j) {
      const Tensor k = coordinate_rows(streams, d);
      trace += static_cast<double>(d) * squared_row_norms(clipped.jacobian_vector_products(H.gather(1, k).sum()));
    }
    trace /= request.probes;
  } else if (request.trace == TraceMethod::kGaussian) {
    for (int j = 0; j < request.probes; ++j)
      trace += squared_row_norms(clipped.vector_jacobian_products(gaussian_probe(clipped, streams)));
    trace /= request.probes;
  }
  if (exact_spectral) {
    const Tensor G = at::stack(columns, 2);  // B x p x d
    spectral = at::linalg_eigvalsh(at::bmm(G.transpose(1, 2), G)).select(1, d - 1).clamp_min(0.0);
  } else if (request.spectral == SpectralMethod::kPowerIteration) {
    Tensor v = gaussian_rows(streams, d).to(x.scalar_type());
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
  return clipped_sum;
}

/// The most doubles one example occupies in any tensor of a forward pass: a layer's input, its
/// output, or a convolution's unfolded patches (in kh kw x L).
Index widest_example_tensor(const NetworkPlan& plan) {
  const auto elements = [](const std::vector<Index>& shape) {
    return std::accumulate(shape.begin(), shape.end(), Index{1}, std::multiplies<Index>());
  };
  Index widest = elements(plan.input_shape);
  for (const PlannedLayer& layer : plan.layers) {
    widest = std::max(widest, elements(layer.output_shape));
    if (layer.spec.kind == LayerKind::kConv)
      widest = std::max(widest, layer.fan_in() * layer.output_shape[1] * layer.output_shape[2]);
  }
  return widest;
}

MatrixXd TorchNetwork::logits(const VectorXd& w, const RowMatrix& X) const {
  at::NoGradGuard no_grad;
  const Tensor weights = to_tensor(w, real);
  MatrixXd scores(X.rows(), plan.layers.back().output_shape[0]);
  // Pieces whose widest tensor is at most 4 MB: the heap reuses them (kMallocTuned), where the
  // ConvNet's patches of 2000 test images (200 MB, above glibc's 32 MB mmap bound) were mapped and
  // zeroed afresh for every chunk, and the pieces run on both threads. Each row's scores do not
  // depend on the piece it is in.
  constexpr Index kPieceDoubles = Index{1} << 19;
  const Index rows = std::clamp<Index>(kPieceDoubles / std::max<Index>(1, widest_example_tensor(plan)), 1, 2000);
  for_each_piece(pieces_of({0, X.rows()}, rows), [&](std::size_t, Rows piece) {
    scores.middleRows(piece.first, piece.count) =
        to_row_matrix(forward(weights, to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real)).logits);
  });
  return scores;
}

MatrixXd TorchNetwork::gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  return per_example_rows(w, X, y, 0.0);
}

VectorXd TorchNetwork::gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  const Tensor weights = to_tensor(w, real).requires_grad_(true);
  VectorXd sum = VectorXd::Zero(p);
  for (Index start = 0; start < X.rows(); start += options.chunk) {
    const std::vector<Rows> pieces = pieces_of_chunk({start, std::min(options.chunk, X.rows() - start)});
    std::vector<VectorXd> sums(pieces.size());
    for_each_piece(pieces, [&](std::size_t i, Rows piece) {
      const Tensor logits = forward(weights, to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real)).logits;
      const Tensor labels = to_labels(y.segment(piece.first, piece.count));
      const Tensor loss = -at::log_softmax(logits, 1).gather(1, labels.view({-1, 1})).sum();
      sums[i] = to_vector(torch::autograd::grad({loss}, {weights})[0]);
    });
    for (const VectorXd& piece_sum : sums) sum += piece_sum;  // in the pieces' order
  }
  return sum;
}

MatrixXd TorchNetwork::clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                         double clip_norm) const {
  return per_example_rows(w, X, y, clip_norm);
}

MatrixXd TorchNetwork::jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                double clip_norm, const RowMatrix& V) const {
  const Tensor x = to_tensor(X, real).requires_grad_(true);
  ClippedGradients clipped = per_example_gradients(to_tensor(w, real), x, to_labels(y), clip_norm, true);
  const Tensor H = clipped.prepare_jacobian_vector_products();
  return to_row_matrix(clipped.jacobian_vector_products((H * to_tensor(V, real)).sum()));
}

MatrixXd TorchNetwork::vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                double clip_norm, const RowMatrix& U) const {
  const Tensor x = to_tensor(X, real).requires_grad_(true);
  const ClippedGradients clipped = per_example_gradients(to_tensor(w, real), x, to_labels(y), clip_norm, true);
  return to_row_matrix(clipped.vector_jacobian_products(to_tensor(U, real)));
}

MatrixXd TorchNetwork::per_example_rows(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double C) const {
  const Tensor weights = to_tensor(w, real);
  const Tensor rows = at::empty({X.rows(), p}, at::TensorOptions().dtype(real));
  for (Index start = 0; start < X.rows(); start += options.chunk) {
    for_each_piece(pieces_of_chunk({start, std::min(options.chunk, X.rows() - start)}), [&](std::size_t, Rows piece) {
      const Tensor x = to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real).requires_grad_(true);
      Tensor piece_rows = rows.narrow(0, piece.first, piece.count);
      per_example_gradients(weights, x, to_labels(y.segment(piece.first, piece.count)), C, /*create_graph=*/false)
          .materialize(piece_rows);
    });
  }
  // Column-major for Eigen: transposed in blocks of columns on all threads (a piece's rows written
  // straight into their columns take three times as long, every cache line written in parts).
  MatrixXd g(X.rows(), p);
  const Tensor columns = at::from_blob(g.data(), {p, X.rows()}, kDouble);
  at::parallel_for(0, p, 2048, [&](std::int64_t begin, std::int64_t end) {
    columns.narrow(0, begin, end - begin).copy_(rows.narrow(1, begin, end - begin).t());
  });
  return g;
}

NetworkBatchAccounting TorchNetwork::account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                                   double clip_norm, const NetworkAccountingRequest& request,
                                                   std::uint64_t seed, Index first_position) const {
  NetworkBatchAccounting result;
  result.clipped_sum = VectorXd::Zero(p);
  result.trace = VectorXd::Zero(X.rows());
  result.spectral = VectorXd::Constant(X.rows(), std::numeric_limits<double>::quiet_NaN());
  const Tensor weights = to_tensor(w, real);
  const Index chunk = options.chunk;
  for (Index start = 0; start < X.rows(); start += chunk) {
    const std::vector<Rows> pieces = pieces_of_chunk({start, std::min(chunk, X.rows() - start)});
    std::vector<VectorXd> sums(pieces.size());
    for_each_piece(pieces, [&](std::size_t i, Rows piece) {
      sums[i] = account_piece(weights, to_tensor(RowMatrix(X.middleRows(piece.first, piece.count)), real),
                              to_labels(y.segment(piece.first, piece.count)), clip_norm, request, seed, first_position,
                              piece.first, result);
    });
    for (const VectorXd& sum : sums) result.clipped_sum += sum;
  }
  return result;
}

}  // namespace

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

ForwardPass forward_pass(const NetworkPlan& plan, bool intercept, const Tensor& w, const Tensor& x) {
  const std::int64_t B = x.size(0);
  ForwardPass pass;
  Tensor a = intercept ? at::cat({at::ones({B, 1}, x.options()), x}, 1) : x;
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
  network->real = filkit::real_type(options.precision);
  // LibTorch's own thread pool follows OpenMP's setting (--threads).
  at::set_num_threads(omp_get_max_threads());
  return network.release();
}
