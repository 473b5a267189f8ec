// networks.hpp: the options, and Network, which checks its arguments here and forwards the
// computations to a NetworkBackend from the LibTorch plugin (network_plugin.hpp).
#include "filkit/dpsgd/networks.hpp"

#include "dpsgd/network_backend.hpp"
#include "dpsgd/network_plugin.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace filkit {


void NetworkOptions::validate() const {
  if (architecture == NetworkArchitecture::kMlp) {
    if (hidden.empty()) throw std::invalid_argument("NetworkOptions.hidden: an mlp needs at least one hidden layer");
    for (Index width : hidden)
      if (width < 1)
        throw std::invalid_argument("NetworkOptions.hidden = " + std::to_string(width) + ": widths must be >= 1");
  }
  if (intercept && architecture != NetworkArchitecture::kSoftmax)
    throw std::invalid_argument("NetworkOptions.intercept: only the softmax network takes an intercept (the mlp "
                                "and cnn layers have biases)");
  if (chunk < 1) throw std::invalid_argument("NetworkOptions.chunk = " + std::to_string(chunk) + ": must be >= 1");
}

bool networks_available() { return network_plugin_loads(); }

struct Network::Impl {
  NetworkOptions options;
  Index d = 0, K = 0, p = 0;
  std::unique_ptr<NetworkBackend> backend;

  void check_shapes(const VectorXd& w, const RowMatrix& X, const VectorXd& y, const char* what) const {
    if (w.size() != p)
      throw std::invalid_argument(std::string("Network::") + what + ": " + std::to_string(w.size()) +
                                  " parameters, the network has " + std::to_string(p));
    if (X.cols() != d)
      throw std::invalid_argument(std::string("Network::") + what + ": inputs have " + std::to_string(X.cols()) +
                                  " features, the network takes " + std::to_string(d));
    if (y.size() != X.rows())
      throw std::invalid_argument(std::string("Network::") + what + ": " + std::to_string(y.size()) + " labels for " +
                                  std::to_string(X.rows()) + " inputs");
    for (Index i = 0; i < y.size(); ++i)
      if (!(y(i) >= 0 && y(i) < K && y(i) == std::floor(y(i))))
        throw std::invalid_argument(std::string("Network::") + what + ": label " + std::to_string(y(i)) + " of row " +
                                    std::to_string(i) + " is not a class index in [0, " + std::to_string(K) + ")");
  }

  static void check_clip_norm(double clip_norm, const char* what) {
    if (!(clip_norm > 0.0) || !std::isfinite(clip_norm))
      throw std::invalid_argument(std::string("Network::") + what + ": clip_norm must be finite and > 0");
  }
};

Network::Network(const NetworkOptions& options, Index input_dim, Index num_classes) : impl_(std::make_unique<Impl>()) {
  options.validate();
  if (input_dim < 1) throw std::invalid_argument("Network: input_dim = " + std::to_string(input_dim) + ": must be >= 1");
  if (num_classes < 2)
    throw std::invalid_argument("Network: num_classes = " + std::to_string(num_classes) + ": must be >= 2");
  impl_->options = options;
  impl_->d = input_dim;
  impl_->K = num_classes;
  impl_->backend = create_network_backend(options, input_dim, num_classes);
  impl_->p = impl_->backend->parameter_count();
}

Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

const NetworkOptions& Network::options() const { return impl_->options; }
Index Network::input_dim() const { return impl_->d; }
Index Network::num_classes() const { return impl_->K; }
Index Network::parameter_count() const { return impl_->p; }
std::string Network::describe() const { return impl_->backend->describe(); }

VectorXd Network::initial_parameters(std::mt19937_64& rng) const { return impl_->backend->initial_parameters(rng); }

MatrixXd Network::logits(const VectorXd& w, const RowMatrix& X) const {
  impl_->check_shapes(w, X, VectorXd::Zero(X.rows()), "logits");
  return impl_->backend->logits(w, X);
}

double Network::accuracy(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  impl_->check_shapes(w, X, y, "accuracy");
  if (X.rows() == 0) return std::numeric_limits<double>::quiet_NaN();
  const MatrixXd scores = logits(w, X);
  Index correct = 0;
  for (Index i = 0; i < X.rows(); ++i) {
    Index best = 0;
    scores.row(i).maxCoeff(&best);
    correct += best == static_cast<Index>(y(i));
  }
  return static_cast<double>(correct) / X.rows();
}

MatrixXd Network::gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  impl_->check_shapes(w, X, y, "gradients");
  return impl_->backend->gradients(w, X, y);
}

MatrixXd Network::clipped_gradients(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm) const {
  impl_->check_shapes(w, X, y, "clipped_gradients");
  Impl::check_clip_norm(clip_norm, "clipped_gradients");
  return impl_->backend->clipped_gradients(w, X, y, clip_norm);
}

MatrixXd Network::jacobian_vector_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                           const RowMatrix& V) const {
  impl_->check_shapes(w, X, y, "jacobian_vector_products");
  Impl::check_clip_norm(clip_norm, "jacobian_vector_products");
  if (V.rows() != X.rows() || V.cols() != impl_->d)
    throw std::invalid_argument("Network::jacobian_vector_products: tangents must be " + std::to_string(X.rows()) +
                                " x " + std::to_string(impl_->d));
  return impl_->backend->jacobian_vector_products(w, X, y, clip_norm, V);
}

MatrixXd Network::vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                           const RowMatrix& U) const {
  impl_->check_shapes(w, X, y, "vector_jacobian_products");
  Impl::check_clip_norm(clip_norm, "vector_jacobian_products");
  if (U.rows() != X.rows() || U.cols() != impl_->p)
    throw std::invalid_argument("Network::vector_jacobian_products: cotangents must be " + std::to_string(X.rows()) +
                                " x " + std::to_string(impl_->p));
  return impl_->backend->vector_jacobian_products(w, X, y, clip_norm, U);
}

NetworkBatchAccounting Network::account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                              double clip_norm, const NetworkAccountingRequest& request,
                                              std::uint64_t seed) const {
  impl_->check_shapes(w, X, y, "account_batch");
  Impl::check_clip_norm(clip_norm, "account_batch");
  if (request.probes < 1 || request.power_iterations < 1)
    throw std::invalid_argument("Network::account_batch: probes and power_iterations must be >= 1");
  return impl_->backend->account_batch(w, X, y, clip_norm, request, seed);
}

}  // namespace filkit
