// Finds and opens the LibTorch plugin. Search order:
//   1. $FILKIT_TORCH_PLUGIN, a file path: when set (and not empty), the only path tried, so that a
//      user's explicit choice is never silently replaced by another plugin;
//   2. beside the program or shared object containing this code (the build tree puts the plugin
//      next to the filkit executable), then its ../lib/filkit/ (an installed layout);
//   3. the build tree's plugin, compiled in (FILKIT_TORCH_PLUGIN_BUILD_PATH), which serves programs
//      built elsewhere in the tree (the tests, the Python module).
// The first that opens and has this build's kNetworkBackendAbiVersion is used. It is never
// closed: its backends may live until exit, and unloading LibTorch is not safe.
#include "networks/network_plugin.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/stage.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace filkit {

namespace {

constexpr const char* kPluginFileName = "libfilkit_torch.so";

using CreateNetworkBackend = decltype(&filkit_create_network_backend);
using NetworkBackendAbiVersion = decltype(&filkit_network_backend_abi_version);
using ReadTorchScript = decltype(&filkit_read_torchscript);
using CreateReleasedGradientBackend = decltype(&filkit_create_released_gradient_backend);

struct LoadedPlugin {
  CreateNetworkBackend create = nullptr;  // null when no plugin loaded
  ReadTorchScript read_torchscript = nullptr;
  CreateReleasedGradientBackend create_released_gradient = nullptr;
  std::string failure;  // then: every path tried and why it failed
};

/// The directory of the executable or shared object this function was linked into ("" if unknown).
std::filesystem::path directory_of_this_code() {
  Dl_info info;
  link_map* object = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&directory_of_this_code), &info, reinterpret_cast<void**>(&object),
              RTLD_DL_LINKMAP) == 0 ||
      object == nullptr)
    return {};
  // The main program's link map has an empty name (and dli_fname is argv[0], maybe relative or
  // found on PATH): ask the kernel where it is.
  std::error_code error;
  const std::filesystem::path file = object->l_name[0] != '\0' ? std::filesystem::path(object->l_name)
                                                               : std::filesystem::read_symlink("/proc/self/exe", error);
  if (error || file.empty()) return {};
  return std::filesystem::absolute(file, error).parent_path();
}

std::vector<std::string> plugin_candidates() {
  if (const char* chosen = std::getenv("FILKIT_TORCH_PLUGIN"); chosen != nullptr && *chosen != '\0') return {chosen};
  std::vector<std::string> paths;
  if (const std::filesystem::path directory = directory_of_this_code(); !directory.empty()) {
    paths.push_back((directory / kPluginFileName).string());
    paths.push_back((directory / ".." / "lib" / "filkit" / kPluginFileName).lexically_normal().string());
  }
#ifdef FILKIT_TORCH_PLUGIN_BUILD_PATH
  paths.push_back(FILKIT_TORCH_PLUGIN_BUILD_PATH);
#endif
  std::vector<std::string> unique;
  for (const std::string& path : paths)
    if (std::find(unique.begin(), unique.end(), path) == unique.end()) unique.push_back(path);
  return unique;
}

/// OpenBLAS (LibTorch's BLAS on Debian, through libblas.so.3) picks its kernels at load time from
/// the CPU's family and model, and falls back to its oldest x86-64 kernels (Prescott: SSE3) for a
/// model it does not know, such as the 5th-generation Xeons (model 207) that Debian 12's OpenBLAS
/// 0.3.21 predates: its double GEMM then runs 4 times slower (bench/blas_kernels.py). Unless the user
/// chose (OPENBLAS_CORETYPE set), name the kernels the CPU's instruction sets support before
/// LibTorch, and with it OpenBLAS, is loaded. Only the kernels change, not what is computed.
void choose_openblas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  __builtin_cpu_init();
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) core = "Haswell";
  else if (__builtin_cpu_supports("avx")) core = "Sandybridge";
  if (core != nullptr) setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
}

LoadedPlugin load_plugin() {
  choose_openblas_kernels();
  std::string tried;
  for (const std::string& path : plugin_candidates()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      tried += "\n  " + path + ": " + (error != nullptr ? error : "dlopen failed");
      continue;
    }
    const auto abi_version = reinterpret_cast<NetworkBackendAbiVersion>(dlsym(handle, kNetworkBackendAbiVersionSymbol));
    const auto create = reinterpret_cast<CreateNetworkBackend>(dlsym(handle, kCreateNetworkBackendSymbol));
    const auto read_torchscript = reinterpret_cast<ReadTorchScript>(dlsym(handle, kReadTorchScriptSymbol));
    const auto create_released_gradient =
        reinterpret_cast<CreateReleasedGradientBackend>(dlsym(handle, kCreateReleasedGradientBackendSymbol));
    if (abi_version == nullptr || create == nullptr || read_torchscript == nullptr ||
        create_released_gradient == nullptr) {
      tried += "\n  " + path + ": not a filkit network plugin (it lacks " + kNetworkBackendAbiVersionSymbol + " or " +
               kCreateNetworkBackendSymbol + ")";
      continue;
    }
    if (const int version = abi_version(); version != kNetworkBackendAbiVersion) {
      tried += "\n  " + path + ": a stale plugin (interface version " + std::to_string(version) +
               ", this filkit expects " + std::to_string(kNetworkBackendAbiVersion) +
               "): rebuild it (target filkit_torch_plugin)";
      continue;
    }
    return {create, read_torchscript, create_released_gradient, {}};
  }
  if (tried.empty()) tried = "\n  (no candidate path)";
  return {
      nullptr, nullptr, nullptr,
      std::string(
          "the networks (and private training with public data: fim, prune, dpsgd) need LibTorch, which filkit loads "
          "from its plugin ") +
          kPluginFileName + " on first use, and no plugin could be loaded; tried:" + tried +
          "\nRun scripts/setup.sh (installs libtorch-dev and builds with -DFILKIT_WITH_TORCH=ON), or set "
          "FILKIT_TORCH_PLUGIN to the plugin's path."};
}

const LoadedPlugin& plugin() {
  static const LoadedPlugin loaded = load_plugin();  // thread-safe, once
  return loaded;
}

}  // namespace

namespace detail {

std::string libtorch_error_message(const std::string& what) {
  // c10::Error's what() carries LibTorch's C++ backtrace after the message.
  std::string message = what;
  for (const char* backtrace : {"\nException raised from", "\nframe #"})
    if (const std::size_t at = message.find(backtrace); at != std::string::npos) message.resize(at);
  const std::string allocating = "you tried to allocate ";
  const std::size_t at = message.find(allocating);
  if (message.find("can't allocate memory") == std::string::npos || at == std::string::npos) return message;
  const std::string bytes = message.substr(at + allocating.size());
  std::uint64_t count = 0;
  const bool known = std::sscanf(bytes.c_str(), "%lu", &count) == 1;
  return out_of_memory_message() + ": LibTorch could not allocate " +
         (known ? readable_bytes(count) : std::string("a tensor")) +
         "; use a smaller network, batch or chunk (filkit's estimate of training was within max_memory, which "
         "may be more than the machine has free)";
}

}  // namespace detail

namespace {

/// Runs a call into the plugin, turning what it throws into filkit's typed errors (the plugin, built
/// apart with hidden symbols and without the library, throws standard exceptions only), in one
/// line (c10::Error's message ends in a C++ backtrace): LibTorch failing to allocate becomes a
/// MemoryLimitError; a std::invalid_argument (the plugin's refusal of a TorchScript module or of the
/// data's shape) a DataError; any other std::logic_error (a bug) stays one; anything else (LibTorch
/// failing in a computation) a NumericalError. std::bad_alloc passes as it is (the caller names the
/// stage).
template <class Call>
decltype(auto) guarded(const Call& call) {
  try {
    return call();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& error) {
    const std::string message = detail::libtorch_error_message(error.what());
    if (message.starts_with(out_of_memory_message())) throw MemoryLimitError(message);
    if (dynamic_cast<const std::invalid_argument*>(&error) != nullptr) throw DataError(message);
    if (dynamic_cast<const std::logic_error*>(&error) != nullptr) throw std::logic_error(message);
    throw NumericalError(message);
  }
}

/// The plugin's backends, every call guarded.
class GuardedNetworkBackend final : public NetworkBackend {
 public:
  explicit GuardedNetworkBackend(NetworkBackend* inner) : inner_(inner) {}
  MatrixXd logits(const VectorXd& w, const RowMatrix& X) const override {
    return guarded([&] { return inner_->logits(w, X); });
  }
  MatrixXd gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const override {
    return guarded([&] { return inner_->gradients(w, X, y); });
  }
  VectorXd gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const override {
    return guarded([&] { return inner_->gradient_sum(w, X, y); });
  }
  MatrixXd clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip) const override {
    return guarded([&] { return inner_->clipped_gradients(w, X, y, clip); });
  }
  MatrixXd jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip,
                                    const RowMatrix& V) const override {
    return guarded([&] { return inner_->jacobian_vector_products(w, X, y, clip, V); });
  }
  MatrixXd vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip,
                                    const RowMatrix& U) const override {
    return guarded([&] { return inner_->vector_jacobian_products(w, X, y, clip, U); });
  }
  NetworkBatchAccounting account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip,
                                       const NetworkAccountingRequest& request, std::uint64_t seed,
                                       Index first_position) const override {
    return guarded([&] { return inner_->account_batch(w, X, y, clip, request, seed, first_position); });
  }

 private:
  std::unique_ptr<NetworkBackend> inner_;
};

class GuardedPerturbationObjectiveTermCache final : public PerturbationObjectiveTermCache {
 public:
  explicit GuardedPerturbationObjectiveTermCache(std::unique_ptr<PerturbationObjectiveTermCache> inner)
      : inner_(std::move(inner)) {}
  const RowMatrix& gradients() const override { return inner_->gradients(); }
  void probe_products(const RowMatrix& probes, RowMatrix& products) const override {
    guarded([&] { inner_->probe_products(probes, products); });
  }

 private:
  std::unique_ptr<PerturbationObjectiveTermCache> inner_;
};

class GuardedReleasedGradientBackend final : public ReleasedGradientBackend {
 public:
  explicit GuardedReleasedGradientBackend(ReleasedGradientBackend* inner) : inner_(inner) {}
  void initialize(std::uint64_t seed) override {
    guarded([&] { inner_->initialize(seed); });
  }
  GradientModelTraining train(const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Index steps,
                              std::uint64_t seed) override {
    return guarded([&] { return inner_->train(theta, X, y, steps, seed); });
  }
  NetworkBatchAccounting account_batch(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                       const NetworkAccountingRequest& request, std::uint64_t seed,
                                       Index first_position, Index batch_rows) const override {
    return guarded([&] { return inner_->account_batch(theta, X, y, request, seed, first_position, batch_rows); });
  }
  MatrixXd released(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    return guarded([&] { return inner_->released(theta, X, y); });
  }
  MatrixXd perturbation(const VectorXd& theta, const RowMatrix& X, const VectorXd& y) const override {
    return guarded([&] { return inner_->perturbation(theta, X, y); });
  }
  MatrixXd released_vjp(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                        const RowMatrix& U) const override {
    return guarded([&] { return inner_->released_vjp(theta, X, y, U); });
  }
  double objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                   const RowMatrix& probes) const override {
    return guarded([&] { return inner_->objective(theta, X, y, probes); });
  }
  VectorXd objective_gradient(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                              const RowMatrix& probes) const override {
    return guarded([&] { return inner_->objective_gradient(theta, X, y, probes); });
  }
  VectorXd phi() const override {
    return guarded([&] { return inner_->phi(); });
  }
  void set_phi(const VectorXd& phi) override {
    guarded([&] { inner_->set_phi(phi); });
  }
  void set_shift(const VectorXd& c) override {
    guarded([&] { inner_->set_shift(c); });
  }
  PerturbationObjectiveValue perturbation_objective(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                                    const VectorXd& c, const RowMatrix& probes,
                                                    const PerturbationObjectiveRequest& request) const override {
    return guarded([&] { return inner_->perturbation_objective(theta, X, y, c, probes, request); });
  }
  PerturbationObjectiveTerms perturbation_objective_terms(const VectorXd& theta, const RowMatrix& X, const VectorXd& y,
                                                          const RowMatrix& probes, Precision precision) const override {
    return guarded([&] { return inner_->perturbation_objective_terms(theta, X, y, probes, precision); });
  }
  std::unique_ptr<PerturbationObjectiveTermCache> perturbation_objective_term_cache(
      const VectorXd& theta, const RowMatrix& X, const VectorXd& y, Precision precision) const override {
    return std::make_unique<GuardedPerturbationObjectiveTermCache>(
        guarded([&] { return inner_->perturbation_objective_term_cache(theta, X, y, precision); }));
  }

 private:
  std::unique_ptr<ReleasedGradientBackend> inner_;
};

const LoadedPlugin& loaded_plugin() {
  const LoadedPlugin& loaded = plugin();
  if (loaded.create == nullptr) throw ResourceError(loaded.failure);
  return loaded;
}
}  // namespace

std::unique_ptr<NetworkBackend> create_network_backend(const NetworkPlan& plan, const NetworkOptions& options) {
  const LoadedPlugin& plugin = loaded_plugin();
  return std::make_unique<GuardedNetworkBackend>(guarded([&] { return plugin.create(plan, options); }));
}

TorchScriptNetwork read_torchscript(const std::string& path, const std::vector<Index>& input_shape,
                                    std::uint64_t seed) {
  const LoadedPlugin& plugin = loaded_plugin();
  return guarded([&] { return plugin.read_torchscript(path, input_shape, seed); });
}

std::unique_ptr<ReleasedGradientBackend> create_released_gradient_backend(const ReleasedGradientSpec& spec) {
  const LoadedPlugin& plugin = loaded_plugin();
  return std::make_unique<GuardedReleasedGradientBackend>(
      guarded([&] { return plugin.create_released_gradient(spec); }));
}

bool network_plugin_loads() noexcept {
  try {
    return plugin().create != nullptr;
  } catch (...) {  // std::bad_alloc while loading
    return false;
  }
}

}  // namespace filkit
