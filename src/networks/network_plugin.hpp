// Opens the LibTorch plugin (libfilkit_torch.so, network_backend.hpp) once per process, on the
// first Network, so that programs that never build a network never load LibTorch.
#pragma once

#include "networks/network_backend.hpp"

#include <memory>
#include <string>

namespace filkit {

/// A backend from the plugin, which is loaded on the first call (thread-safe, once; a failure is
/// remembered). Throws std::runtime_error naming every path tried and why each failed when no
/// plugin loads.
std::unique_ptr<NetworkBackend> create_network_backend(const NetworkPlan& plan, const NetworkOptions& options);

/// A TorchScript file read by the plugin (network_backend.hpp's filkit_read_torchscript).
TorchScriptNetwork read_torchscript(const std::string& path, const std::vector<Index>& input_shape, std::uint64_t seed);

/// A released-gradient backend from the plugin (public_data_training.hpp's dpsgd, prune and fim).
std::unique_ptr<ReleasedGradientBackend> create_released_gradient_backend(const ReleasedGradientSpec& spec);

namespace detail {
/// One line for what the plugin threw: LibTorch's backtrace cut off, and an allocation failure
/// ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes") as
/// out_of_memory_message() with the size. Other messages are returned as they are.
std::string libtorch_error_message(const std::string& what);
}  // namespace detail

/// Whether the plugin loads (loading it if not yet tried); never throws.
bool network_plugin_loads() noexcept;

}  // namespace filkit
