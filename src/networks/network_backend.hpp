// The boundary between Network (networks.hpp, in the library) and its LibTorch implementation,
// the plugin libfilkit_torch.so (src/networks/torch/network.cpp), which the library opens only when
// a network is first built (network_plugin.cpp), so that programs that never build one never map
// LibTorch (0.5 s and 160 MB at start).
//
// Both sides are built by the same compiler with the same flags, so C++ types (Eigen matrices,
// std::string, the options structs, exceptions) cross it as they are; kNetworkBackendAbiVersion
// refuses a plugin built from another version of this interface. The plugin must not link the
// static library (it would get a second copy of its globals): it may use only header-only code.
#pragma once

#include "filkit/networks/gradient_model.hpp"
#include "filkit/networks/network_layers.hpp"
#include "filkit/networks/networks.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace filkit {

/// Raise whenever NetworkBackend, the factory, or a type they take or return changes.
inline constexpr int kNetworkBackendAbiVersion = 10;  // 10: ReleasedGradientBackend::account_batch's batch position

/// One network's computations for a plan (network_layers.hpp) that Network has checked. Network
/// checks every argument's shape and range before calling these.
class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;

  virtual MatrixXd logits(const VectorXd& w, const RowMatrix& X) const = 0;
  virtual MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const = 0;
  /// Network::gradient_sum.
  virtual VectorXd gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const = 0;
  virtual MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                     double clip_norm) const = 0;
  virtual MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                            const RowMatrix& V) const = 0;
  virtual MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                            const RowMatrix& U) const = 0;
  /// Network::account_batch (first_position: X's first row's position in the whole batch).
  virtual NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                               double clip_norm, const NetworkAccountingRequest& request,
                                               std::uint64_t seed, Index first_position) const = 0;
};

/// What the released-gradient backend computes (public_data_training.hpp): the trained model's
/// per-example gradient restricted to the unfrozen coordinates, optionally with a learned gradient
/// model g_phi, and the smooth clip of the result.
struct ReleasedGradientSpec {
  NetworkPlan plan;                 ///< the trained model (softmax regression is the softmax plan)
  Index input_dim = 0;              ///< d (the private pixels)
  std::optional<ImageShape> image;  ///< the rows' shape, for the gradient model's conv branch
  Index num_classes = 2;            ///< K
  bool intercept = false;           ///< x~ = [1, x] (the softmax plan's)
  std::vector<Index> released;      ///< the unfrozen coordinates of the plan's parameters
  bool learned = false;             ///< with a gradient model g_phi (fim); else r = clip(M g)
  GradientModelOptions gradient_model;
  double clip_norm = 1.0;
  /// The arithmetic of the trained model's gradients, the releases, their clip and their Jacobian
  /// products (DpSgdOptions::precision); results are widened to double. float32 only without a
  /// learned gradient model (the constant models' shift c is rounded to it).
  Precision precision = Precision::kFloat64;
  /// Examples a piece (pieces.hpp) at most; 0: the conditional model's as many as keep its widest
  /// per-piece tensor near 8 MB, the constant models' objective's kPieceRows. Any value gives the
  /// same results up to rounding (the tests' 1).
  Index max_piece_rows = 0;
};

/// The statistics of one call of LearnedGradientBackend::train.
struct GradientModelTraining {
  double final_loss = 0.0;  ///< the objective on the last public batch
};

/// The constant gradient models' objective on a public batch (constant_gradient_model.hpp): the
/// mean over the batch of ||c||^2 + lambda (T_b + floor) / (snr ? ||r_b||^2 : 1), r_b = clip(M g_b
/// + c), T_b the mean of ||J_b v||^2 over input-space probes v or Tr(J_b^T J_b) exactly.
/// precision: of the per-example gradients and their Jacobian products (the rest is float64).
struct PerturbationObjectiveRequest {
  double lambda = 0.0;
  bool snr = true;
  double floor = kFisherTermFloor;
  Precision precision = Precision::kFloat64;
};

/// What the constant models' objective needs of a batch besides c: each example's released
/// gradient M g_b (B x m) and its input-space probe products M J_g v_bs (B S x m, row b S + s),
/// float64 (computed in the requested precision). theta is fixed over the epochs before a private
/// step, so with probes drawn once a step (ProbeDraws::kStep) these are computed once and the
/// objective at any c follows in O(B S m) (constant_perturbation.hpp, perturbation_objective_from_terms).
struct PerturbationObjectiveTerms {
  RowMatrix gradients;
  RowMatrix probe_products;
};

/// PerturbationObjectiveTerms of one set of examples at one theta for many draws of probes: the thesis'
/// per-batch probes over the epochs before a private step, where theta and the public examples
/// stay the same and only the probes change. The examples' gradients and the records of their
/// forward and backward passes, with the graph of their Jacobian products, are computed once and
/// kept (about 45 % of a batch's cost on the thesis' ConvNet), so each draw costs only the
/// products. The same numbers as perturbation_objective_terms for the same probes (a test checks).
class PerturbationObjectiveTermCache {
 public:
  virtual ~PerturbationObjectiveTermCache() = default;
  /// M g_b of every example (n x m, float64).
  virtual const RowMatrix& gradients() const = 0;
  /// M J_g v_bs of every example for probes (n S x d, row b S + s, S >= 1) into `products`
  /// (resized to n S x m, float64; reused between draws, so that its pages are not faulted in anew).
  virtual void probe_products(const RowMatrix& probes, RowMatrix& products) const = 0;
};

/// The released vectors r(x) = clip(M g + g_phi) (or clip(g_phi), clip(M g)) of a batch, their
/// accounting and the gradient model's training. All matrices one example a row.
class ReleasedGradientBackend {
 public:
  virtual ~ReleasedGradientBackend() = default;
  /// Draws phi afresh (PyTorch's default initialisation) from `seed`.
  virtual void initialize(std::uint64_t seed) = 0;
  /// `steps` AdamW steps of phi on uniformly drawn batches of the public data at parameters theta.
  virtual GradientModelTraining train(const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Index steps,
                                      std::uint64_t seed) = 0;
  /// Sum of r over the members X (released coordinates) and each member's Tr(J^T J), J = dr/dx.
  /// The members are positions first_position, ... of a batch of batch_rows (on the ranks of one
  /// run, a rank's part of it; docs/distributed.md): the whole batch's probes are drawn from `seed`
  /// and the members' rows kept, so that the parts' traces are the whole batch's.
  virtual NetworkBatchAccounting account_batch(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                               const NetworkAccountingRequest& request, std::uint64_t seed,
                                               Index first_position, Index batch_rows) const = 0;
  /// r of every row (B x released), g_phi of every row (B x released; zeros without a model).
  virtual MatrixXd released(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const = 0;
  virtual MatrixXd perturbation(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const = 0;
  /// Row b: J_b^T U_b (B x d).
  virtual MatrixXd released_vjp(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                const RowMatrix& U) const = 0;
  /// The gradient model's objective on a batch with the given probes (row b * probes + s: the s-th
  /// probe of example b), and its gradient about phi (for the finite-difference tests).
  virtual double objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                           const RowMatrix& probes) const = 0;
  virtual VectorXd objective_gradient(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                      const RowMatrix& probes) const = 0;
  virtual VectorXd phi() const = 0;
  virtual void set_phi(const VectorXd& phi) = 0;
  /// A constant c (released coordinates) added before the clip by every computation above:
  /// r = clip(M g + c) (the constant gradient models; spec.learned false). Empty: none.
  virtual void set_shift(const VectorXd& c) = 0;
  /// The objective above at the shift c with probes (B * S x d, row b * S + s; no rows: exact).
  virtual PerturbationObjectiveValue perturbation_objective(const VectorXd& theta, const RowMatrix& X,
                                                            const VectorXd& y, const VectorXd& c,
                                                            const RowMatrix& probes,
                                                            const PerturbationObjectiveRequest& request) const = 0;
  /// The objective's terms of a batch with probes (B * S x d, S >= 1).
  virtual PerturbationObjectiveTerms perturbation_objective_terms(const VectorXd& theta, const RowMatrix& X,
                                                                  const VectorXd& y, const RowMatrix& probes,
                                                                  Precision precision) const = 0;
  /// The cache of the examples X (n x d) at theta, in `precision` (it does not depend on the shift).
  virtual std::unique_ptr<PerturbationObjectiveTermCache> perturbation_objective_term_cache(
      const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Precision precision) const = 0;
};

/// A TorchScript module read as a chain of layers.
struct TorchScriptNetwork {
  std::vector<LayerSpec> layers;  ///< empty when an operator is not a supported layer
  VectorXd parameters;            ///< the module's weights in network_layers.hpp's order
  /// The first operator that is not a supported layer (e.g. "relu", "batch_norm", "mul") and its
  /// position among the module's operators (1-based); "" when all are supported.
  std::string unsupported_operator;
  Index unsupported_position = 0;
  /// Two seeded random inputs (rows, in the data's layout) and the module's own outputs on them,
  /// to check that the rebuilt network computes what the module computes.
  RowMatrix sample_inputs;
  MatrixXd sample_outputs;
};

/// The plugin's exported symbols, looked up by these names with dlsym.
inline constexpr const char* kNetworkBackendAbiVersionSymbol = "filkit_network_backend_abi_version";
inline constexpr const char* kCreateNetworkBackendSymbol = "filkit_create_network_backend";
inline constexpr const char* kReadTorchScriptSymbol = "filkit_read_torchscript";
inline constexpr const char* kCreateReleasedGradientBackendSymbol = "filkit_create_released_gradient_backend";

}  // namespace filkit

// Defined only in the plugin; the library calls them through dlsym (the declarations give the types).
// Both sides are built together by the same compiler, so C++ types cross the C-linkage boundary
// (clang warns about that; C linkage is here only for unmangled names).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wreturn-type-c-linkage"
#endif
extern "C" {
/// The plugin's kNetworkBackendAbiVersion, checked before anything else is called.
int filkit_network_backend_abi_version();
/// A new backend (owned by the caller) for a checked plan; `options` gives the chunk size and the
/// softmax intercept.
filkit::NetworkBackend* filkit_create_network_backend(const filkit::NetworkPlan& plan,
                                                      const filkit::NetworkOptions& options);
/// A new released-gradient backend (owned by the caller) for a checked specification.
filkit::ReleasedGradientBackend* filkit_create_released_gradient_backend(const filkit::ReleasedGradientSpec& spec);
/// Reads a TorchScript file for inputs of `input_shape` ({d} or {C, H, W}). Throws
/// std::invalid_argument when the file cannot be read as a TorchScript module or its forward
/// cannot run on such inputs; an unsupported operator is reported in the result, not thrown.
filkit::TorchScriptNetwork filkit_read_torchscript(const std::string& path,
                                                   const std::vector<filkit::Index>& input_shape, std::uint64_t seed);
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
