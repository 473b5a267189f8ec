// networks.hpp in a build without LibTorch (FILKIT_WITH_TORCH=OFF): a Network cannot be built.
#include "filkit/dpsgd/networks.hpp"

#include <stdexcept>

namespace filkit {

struct Network::Impl {};

bool networks_available() { return false; }

Network::Network(const NetworkOptions& options, Index, Index) {
  throw std::runtime_error("the " + to_string(options.architecture) +
                           " network needs LibTorch, and this filkit was built without it: run scripts/setup.sh "
                           "(installs libtorch-dev and configures with -DFILKIT_WITH_TORCH=ON)");
}

Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

// Unreachable: no Network exists in this build.
const NetworkOptions& Network::options() const { throw std::logic_error("no LibTorch"); }
Index Network::input_dim() const { return 0; }
Index Network::num_classes() const { return 0; }
Index Network::parameter_count() const { return 0; }
std::string Network::describe() const { return {}; }
VectorXd Network::initial_parameters(std::mt19937_64&) const { return {}; }
MatrixXd Network::logits(const VectorXd&, const RowMatrix&) const { return {}; }
double Network::accuracy(const VectorXd&, const RowMatrix&, const VectorXd&) const { return 0.0; }
MatrixXd Network::gradients(const VectorXd&, const RowMatrix&, const VectorXd&) const { return {}; }
MatrixXd Network::clipped_gradients(const VectorXd&, const RowMatrix&, const VectorXd&, double) const { return {}; }
MatrixXd Network::jacobian_vector_products(const VectorXd&, const RowMatrix&, const VectorXd&, double,
                                           const RowMatrix&) const {
  return {};
}
MatrixXd Network::vector_jacobian_products(const VectorXd&, const RowMatrix&, const VectorXd&, double,
                                           const RowMatrix&) const {
  return {};
}
NetworkBatchAccounting Network::account_batch(const VectorXd&, const RowMatrix&, const VectorXd&, double,
                                              const NetworkAccountingRequest&, std::uint64_t) const {
  return {};
}

}  // namespace filkit
