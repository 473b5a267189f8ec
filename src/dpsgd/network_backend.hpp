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

#include "filkit/dpsgd/networks.hpp"

#include <cstdint>
#include <random>
#include <string>

namespace filkit {

/// Raise whenever NetworkBackend, the factory, or a type they take or return changes.
inline constexpr int kNetworkBackendAbiVersion = 1;

/// One network's computations. Network checks every argument's shape and range before calling
/// these; the backend only throws std::invalid_argument for a shape the architecture cannot take
/// (when it is created).
class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;

  virtual Index parameter_count() const = 0;
  virtual std::string describe() const = 0;
  virtual VectorXd initial_parameters(std::mt19937_64& rng) const = 0;

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

/// The plugin's exported symbols, looked up by these names with dlsym.
inline constexpr const char* kNetworkBackendAbiVersionSymbol = "filkit_network_backend_abi_version";
inline constexpr const char* kCreateNetworkBackendSymbol = "filkit_create_network_backend";

}  // namespace filkit

// Defined only in the plugin; the library calls them through dlsym (the declarations give the types).
extern "C" {
/// The plugin's kNetworkBackendAbiVersion, checked before anything else is called.
int filkit_network_backend_abi_version();
/// A new backend (owned by the caller) for validated options, input_dim >= 1 and num_classes >= 2.
/// Throws std::invalid_argument when the architecture cannot take the input (a cnn's image side).
filkit::NetworkBackend* filkit_create_network_backend(const filkit::NetworkOptions& options, filkit::Index input_dim,
                                                      filkit::Index num_classes);
}
