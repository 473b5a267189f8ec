// The boundary between Network (networks.hpp, in the library) and its LibTorch implementation,
// the plugin libfilkit_torch.so (src/dpsgd/torch/network.cpp), which the library opens only when
// a network is first built (network_plugin.cpp), so that programs that never build one never map
// LibTorch (0.5 s and 160 MB at start).
//
// Both sides are built by the same compiler with the same flags, so C++ types (Eigen matrices,
// std::string, the options structs, exceptions) cross it as they are; kNetworkBackendAbiVersion
// refuses a plugin built from another version of this interface. The plugin must not link the
// static library (it would get a second copy of its globals): it may use only header-only code.
#pragma once

#include "filkit/dpsgd/network_layers.hpp"
#include "filkit/dpsgd/networks.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace filkit {

/// Raise whenever NetworkBackend, the factory, or a type they take or return changes.
inline constexpr int kNetworkBackendAbiVersion = 2;

/// One network's computations for a plan (network_layers.hpp) that Network has checked. Network
/// checks every argument's shape and range before calling these.
class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;

  virtual MatrixXd logits(const VectorXd& w, const RowMatrix& X) const = 0;
  virtual MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const = 0;
  virtual MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                     double clip_norm) const = 0;
  virtual MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                            double clip_norm, const RowMatrix& V) const = 0;
  virtual MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                            double clip_norm, const RowMatrix& U) const = 0;
  virtual NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                               double clip_norm, const NetworkAccountingRequest& request,
                                               std::uint64_t seed) const = 0;
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

}  // namespace filkit

// Defined only in the plugin; the library calls them through dlsym (the declarations give the types).
extern "C" {
/// The plugin's kNetworkBackendAbiVersion, checked before anything else is called.
int filkit_network_backend_abi_version();
/// A new backend (owned by the caller) for a checked plan; `options` gives the chunk size and the
/// softmax intercept.
filkit::NetworkBackend* filkit_create_network_backend(const filkit::NetworkPlan& plan,
                                                      const filkit::NetworkOptions& options);
/// Reads a TorchScript file for inputs of `input_shape` ({d} or {C, H, W}). Throws
/// std::invalid_argument when the file cannot be read as a TorchScript module or its forward
/// cannot run on such inputs; an unsupported operator is reported in the result, not thrown.
filkit::TorchScriptNetwork filkit_read_torchscript(const std::string& path,
                                                   const std::vector<filkit::Index>& input_shape,
                                                   std::uint64_t seed);
}
