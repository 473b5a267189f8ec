// Smooth neural networks for private SGD with Fisher information accounting (docs/mathematics.md,
// sections 7.8 and 7.9; Guo, Karrer, Chaudhuri, van der Maaten, ICML 2022, Section 6.2),
// differentiated by LibTorch.
//
// For an example z = (x, y) with private pixels x (d_z = d) and a public label y, private SGD
// releases the smoothly clipped gradient g~(x) = f(||g||) g, g = grad_w l(x, y; w)
// (clipped_gradient.hpp), and the accountant needs G = d g~ / d x (p x d), a second derivative.
// G is never formed: it is contracted with probes,
//   G^T u  (vector-Jacobian product): one reverse pass through the graph of g~ about x;
//   G v    (Jacobian-vector product):  the double-backward trick: H(U) = G^T U is built once with
//          its own graph (U a dummy p-vector), then G v = d <H(U), v> / dU, one reverse pass;
// and everything is batched across examples. Per-example gradients come from one backward pass
// of the summed loss to every layer's pre-activations z_l (B x out): since example b's loss depends
// only on its own row, row b of dL/dz_l is example b's own, and its weight gradient is the outer
// product of that row with the layer's input (unfolded into patches for convolutions; for dense
// layers the product is never formed: its norm, its inner product with a probe and the batch sum
// come from the two factors, which halves the cost on a CPU, where the elementwise work on B x p
// tensors dominates). The clipped per-example gradients of a batch, their VJPs and their JVPs are
// each one batched pass, with no per-example backward: the probes' cotangents of each layer's
// backward-pass gradient and input are derived by hand (the clip factor's too) and autograd runs
// one reverse pass through the kept graph (docs/mathematics.md, section 7.9). A chunk is cut into
// pieces of at most 25 examples differentiated concurrently, one a thread, so results are the same
// bits for any number of threads. Estimators draw from one counter-based stream per example
// (base/splitmix_stream.hpp), so they do not depend on how a batch is cut either.
//
// Architectures: chains of smooth layers (network_layers.hpp), built in or the user's own:
//   softmax:   x -> W x~ (K x p, x~ = [1, x] with an intercept), parameters in the GLM's order, so
//              the autodiff accountant can be checked against the closed form of clipped_gradient.hpp;
//   mlp:       flatten, dense + tanh for each hidden width, then dense to K;
//   cnn:       the reconstruction paper's MNIST ConvNet (on C x H x W images; grey 28 x 28: 26,010
//              parameters): conv 16 8x8 stride 2 pad 2, tanh, avgpool 2x2 stride 1, conv 32 4x4
//              stride 2, tanh, avgpool 2x2 stride 1, flatten, dense 32, tanh, dense K;
//   cifar-cnn: the paper's CIFAR-10 ConvNet: (conv 3x3 pad 1 + tanh) x 2 at 32, 64 and 128
//              channels, each pair followed by avgpool 2x2 stride 2, flatten, dense 128, tanh,
//              dense K (550,570 parameters on 3 x 32 x 32);
//   custom:    a layer specification (`layers`, e.g. "conv:16:8:2:2,tanh,avgpool:2:1,...") or a
//              TorchScript file (`torchscript`, saved by torch.jit.save from a PyTorch module that
//              is a chain of supported layers; its weights are the initial parameters).
// Images come with their shape (Dataset::image, channel-major); without one, cnn and cifar-cnn
// take a square single-channel image (d = s^2).
// LibTorch is optional (CMake FILKIT_WITH_TORCH, turned on by scripts/setup.sh) and lives in a
// plugin, libfilkit_torch.so, opened on the first Network so that nothing else pays for loading it;
// without the plugin a Network cannot be constructed (std::runtime_error naming the paths tried;
// FILKIT_TORCH_PLUGIN chooses the file), and nothing else changes.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/initialisers.hpp"
#include "filkit/base/jacobian_estimators.hpp"
#include "filkit/base/precision.hpp"
#include "filkit/base/types.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/networks/network_layers.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

enum class NetworkArchitecture { kSoftmax, kMlp, kCnn, kCifarCnn, kCustom };
template <>
struct EnumNames<NetworkArchitecture> {
  static constexpr const char* what = "network architecture";
  static constexpr std::pair<NetworkArchitecture, const char*> names[] = {{NetworkArchitecture::kSoftmax, "softmax"},
                                                                          {NetworkArchitecture::kMlp, "mlp"},
                                                                          {NetworkArchitecture::kCnn, "cnn"},
                                                                          {NetworkArchitecture::kCifarCnn, "cifar-cnn"},
                                                                          {NetworkArchitecture::kCustom, "custom"}};
};

struct NetworkOptions {
  NetworkArchitecture architecture = NetworkArchitecture::kCnn;
  /// Widths of the MLP's hidden layers (each >= 1, at least one layer).
  std::vector<Index> hidden = {128};
  /// softmax only: a constant-1 coordinate, as the GLM's intercept.
  bool intercept = false;
  /// Examples in flight at once (>= 1; its pieces of <= 25 run on the threads concurrently): the
  /// memory bound; the results
  /// do not depend on it.
  Index chunk = 100;
  /// custom: a layer specification (parse_network_layers' syntax); exactly one of this and
  /// `torchscript`.
  std::string layers;
  /// custom: a TorchScript file (torch.jit.save of a scripted or traced module).
  std::string torchscript;
  /// The memory budget in bytes (a job's max_memory, Network's Python keyword max_memory): a
  /// network whose estimate (estimate_network_memory) or a TorchScript file whose size is beyond
  /// it is refused before anything is allocated. Empty: the default budget, as the command line's
  /// (default_memory_budget: half the physical memory). A count, not a ByteSize: the plugin
  /// compiles this header as C++17.
  std::optional<std::uint64_t> max_memory;
  /// The largest batch the network is given (0: unknown, `chunk`): with `chunk`, the examples in
  /// flight at once that the memory estimate counts.
  Index batch_rows = 0;
  /// The arithmetic of every computation of the network (its logits, per-example gradients, clip
  /// and Jacobian products; DpSgdOptions::precision): results are returned widened to double.
  Precision precision = Precision::kFloat64;
  /// How the layers draw their starting weights (base/initialisers.hpp; a convolution's fans are its
  /// channels times the kernel's size). Not softmax, whose start is w_0 = 0 or init_scale's; not a
  /// TorchScript module, which brings its own.
  NetworkInitialisation initialisation = NetworkInitialisation::kPyTorch;
  /// Throws std::invalid_argument naming the option; a TorchScript file must exist (it is read
  /// when the Network is built).
  void validate() const;
};

/// What training a network holds in memory, estimated from its plan before anything is allocated
/// (bytes; each part saturates at UINT64_MAX). LibTorch's own ~200 MB are not counted. The estimate
/// errs low, so that no run that fits is refused: the peak resident memory of dpsgd, less that of
/// the same run with the smallest network (LibTorch, the data), is 0.8 to 1.9 times it (always
/// below 2x). Dense networks (flatten,dense:N,tanh,dense:2 on 20 features, N = 10^5..10^6, B = 4
/// and 16): 0.8..1.5. Convolutional ones (bench/network_memory.py: 276 random images, 2 steps, 2
/// threads, Gaussian traces; MiB, in flight = min(chunk 100, B)):
///
///   network                 parameters    B   estimate   peak - baseline   ratio
///   cnn (MNIST, 1x28x28)        26,010   16         11                18    1.58
///                                        64         34                48    1.40
///                                       256         51                56    1.10
///   cifar-cnn (3x32x32)        550,570   16        259               484    1.87
///                                        64        834              1205    1.45
///                                       256       1229              1562    1.27
///   conv:32:3:1:1,tanh,      1,068,682   16        249               327    1.32
///   conv:64:3:1:1,tanh,                  64        604               795    1.32
///   avgpool:2:2,flatten,                256        870               969    1.11
///   dense:64,tanh,dense:10
///
/// (Measured with evaluation a chunk of rows at a time; 2,000 rows at once had put cifar-cnn's
/// ratio at 7. Evaluation now goes in pieces whose widest tensor is at most 4 MB, one a thread,
/// below what training holds.)
struct NetworkMemoryEstimate {
  Index parameter_count = 0, rows = 0;
  std::uint64_t parameters = 0;             ///< p-sized vectors: the trainer's, the optimiser's and the plugin's
  std::uint64_t activations = 0;            ///< every layer's outputs for the rows in flight, with their graphs
  std::uint64_t per_example_gradients = 0;  ///< rows x the convolutions' weights (dense layers never form them)
  std::uint64_t total() const;
  /// "a network of 23000002 parameters with 4 examples in flight (... of parameters and optimiser
  /// state, ... of activations, ... of per-example gradients)"
  std::string describe() const;
};

/// p-sized vectors at the peak of training: w, the clipped-gradient sum, the noise, the update,
/// Adam's two moments, the plugin's tensors of w and its gradient, and the pieces' partial sums
/// (about 16 measured for dense networks, whatever the batch).
inline constexpr int kNetworkParameterCopies = 16;
/// Copies of each in-flight example's activations: the forward values, their gradients and the
/// double-backward graph's two (the Jacobian-vector products differentiate the backward pass).
inline constexpr int kNetworkActivationCopies = 4;
/// Per-example weight gradients of the convolutions (formed for each example, unlike a dense
/// layer's, which stay the outer product of two factors) and their probes' products.
inline constexpr int kNetworkPerExampleCopies = 2;

/// The estimate for `rows` examples in flight at once (min(chunk, batch)).
NetworkMemoryEstimate estimate_network_memory(const NetworkPlan& plan, Index rows);

/// The examples in flight at once under `options` while training: min(chunk, batch_rows), or chunk.
inline Index network_rows_in_flight(const NetworkOptions& options) {
  return options.batch_rows > 0 ? std::min(options.chunk, options.batch_rows) : options.chunk;
}

/// The layers of a built-in architecture (any but custom) for `num_classes` classes.
std::vector<LayerSpec> builtin_network_layers(const NetworkOptions& options, Index num_classes);

/// Whether the LibTorch plugin loads (loading it now if not yet tried), i.e. a Network can be built.
bool networks_available();

/// What the accountant asks of each example of a batch. The defaults are a network's accounting
/// wherever none is chosen (DP-SGD's autos for networks, Network.account_batch in Python): one
/// Gaussian probe of the trace and no spectral norm, since exact traces of a network cost a
/// backward pass per input coordinate.
struct NetworkAccountingRequest {
  TraceMethod trace = TraceMethod::kGaussian;
  SpectralMethod spectral = SpectralMethod::kNone;
  int probes = 1;             ///< per example, for an estimated trace
  int power_iterations = 20;  ///< per example, for power iteration (the reconstruction paper's 20)
};

/// The clipped gradients of a batch and their accounting.
struct NetworkBatchAccounting {
  VectorXd clipped_sum;  ///< sum over the batch of g~ (p)
  VectorXd trace;        ///< Tr(G_b^T G_b) (exact or estimated), one per example
  VectorXd spectral;     ///< ||G_b||_2^2 (exact or estimated), NaN when not requested
};

/// A smooth network with its per-example clipped gradients and their Jacobians about the input.
/// All inputs are Eigen (one example a row); LibTorch stays inside the implementation.
class Network {
 public:
  /// `input_dim` d >= 1, `num_classes` K >= 2, `image` the rows' shape when they are images
  /// (C * H * W = d). Throws std::invalid_argument for bad options or shapes (naming the layer
  /// that does not fit), for a TorchScript module that is not a chain of supported layers or whose
  /// outputs the rebuilt network does not reproduce, and std::runtime_error when the LibTorch
  /// plugin does not load.
  Network(const NetworkOptions& options, Index input_dim, Index num_classes,
          const std::optional<ImageShape>& image = std::nullopt);
  ~Network();
  Network(Network&&) noexcept;
  Network& operator=(Network&&) noexcept;

  const NetworkOptions& options() const;
  Index input_dim() const;
  Index num_classes() const;
  Index parameter_count() const;
  /// The layers as laid out for the input.
  const NetworkPlan& plan() const;
  /// One line a layer with its output shape and parameter count.
  std::string describe() const;

  /// The options' initialisation (PyTorch's or jax's) drawn from `rng` in parameter order; zeros
  /// for softmax; a TorchScript module's own weights.
  VectorXd initial_parameters(std::mt19937_64& rng) const;

  /// Class scores (B x K) of the rows of X at parameters w.
  MatrixXd logits(const VectorXd& w, const RowMatrix& X) const;
  /// Fraction of rows whose largest score is at their label.
  double accuracy(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const;

  /// Per-example gradients of the cross-entropy (B x p), unclipped: g_b = grad_w l(x_b, y_b; w).
  MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const;
  /// The sum of those gradients over the rows (p): one reverse pass of the summed loss a piece of
  /// rows, without forming any example's own gradient (non-private training: pre-training, sgd).
  VectorXd gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const;
  /// Per-example clipped gradients g~_b (B x p), clip norm C > 0.
  MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm) const;
  /// Row b: G_b V_b (B x p), V one tangent of size d a row.
  MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& V) const;
  /// Row b: G_b^T U_b (B x d), U one cotangent of size p a row.
  MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                    const RowMatrix& U) const;

  /// The batch's clipped-gradient sum and each member's Tr(G^T G) and ||G||_2^2, in chunks of
  /// options().chunk examples. Estimates draw their probes from a generator seeded with `seed`:
  ///   coordinates:  d ||G e_k||^2, k uniform per example and probe (JVPs);
  ///   gaussian:     ||G^T u||^2, u ~ N(0, I_p) per example and probe (VJPs: Tr(G G^T) = Tr(G^T G),
  ///                 the same variance 2 ||G^T G||_F^2 as input-side probes at half the cost);
  ///   exact:        all d coordinates (d JVPs); the spectral norm then from the dense G^T G;
  ///   power iteration: `power_iterations` products with G and G^T from a Gaussian start.
  /// Example b's probes come from its own stream, keyed by `seed` and first_position + b (its
  /// position in the whole batch when X is a part of it, as on a rank of an MPI job), so that
  /// estimates depend neither on the chunks nor on how the batch is split over processes.
  NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                       const NetworkAccountingRequest& request, std::uint64_t seed,
                                       Index first_position = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace filkit
