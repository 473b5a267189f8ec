// networks.hpp: the options, and Network, which checks its arguments here and forwards the
// computations to a NetworkBackend from the LibTorch plugin (network_plugin.hpp).
#include "filkit/networks/networks.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/initialisers.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/data/npy.hpp"
#include "networks/network_backend.hpp"
#include "networks/network_plugin.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <system_error>

namespace filkit {

void NetworkOptions::validate() const {
  if (architecture == NetworkArchitecture::kMlp) {
    if (hidden.empty()) option_error("hidden", "an mlp needs at least one hidden layer");
    for (Index width : hidden) require_positive("hidden", width);
  }
  if (initialisation != NetworkInitialisation::kPyTorch && architecture == NetworkArchitecture::kSoftmax)
    option_error("network_init", to_string(initialisation),
                 "softmax starts at w_0 = 0 or from init_scale; network_init draws the other networks' layers");
  if (initialisation != NetworkInitialisation::kPyTorch && !torchscript.empty())
    option_error("network_init", to_string(initialisation), "a TorchScript module starts from its own weights");
  if (intercept && architecture != NetworkArchitecture::kSoftmax)
    option_error("intercept", "only the softmax network takes an intercept (the other networks' layers have biases)");
  const bool custom = architecture == NetworkArchitecture::kCustom;
  if (custom && layers.empty() == torchscript.empty())
    option_error("model", "custom",
                 "give a layer specification (" + option_name("arch") + ") or a TorchScript file (" +
                     option_name("torchscript") + ")" + (layers.empty() ? "" : ", not both"));
  if (!custom && !layers.empty())
    option_error(
        "arch", "'" + layers + "'",
        "a layer specification needs the custom model (it would be ignored by " + to_string(architecture) + ")");
  if (!custom && !torchscript.empty())
    option_error("torchscript", "'" + torchscript + "'",
                 "a TorchScript file needs the custom model (it would be ignored by " + to_string(architecture) + ")");
  if (!layers.empty()) {
    try {
      parse_network_layers(layers, "");
    } catch (const std::invalid_argument& error) {  // ": layer 2 'softplus:1e-300': ..." (no `what`)
      option_error("arch", "'" + layers + "'", std::string(error.what()).substr(2));
    }
  }
  if (!torchscript.empty()) {  // before any data is loaded, and without LibTorch
    std::error_code error;
    if (!std::filesystem::is_regular_file(torchscript, error))
      option_error("torchscript", "'" + torchscript + "'",
                   std::string(std::filesystem::exists(torchscript, error) ? "not a regular file" : "no such file") +
                       " (expected a module saved by torch.jit.save)");
  }
  require_positive("chunk", chunk);
}

std::vector<LayerSpec> builtin_network_layers(const NetworkOptions& options, Index num_classes) {
  const std::string K = std::to_string(num_classes);
  switch (options.architecture) {
    case NetworkArchitecture::kSoftmax: return parse_network_layers("dense:" + K + ":nobias");
    case NetworkArchitecture::kMlp: {
      std::string spec = "flatten";
      for (Index width : options.hidden) spec += ",dense:" + std::to_string(width) + ",tanh";
      return parse_network_layers(spec + ",dense:" + K);
    }
    case NetworkArchitecture::kCnn:
      return parse_network_layers(
          "conv:16:8:2:2,tanh,avgpool:2:1,conv:32:4:2,tanh,avgpool:2:1,flatten,dense:32,tanh,"
          "dense:" +
          K);
    case NetworkArchitecture::kCifarCnn:
      return parse_network_layers(
          "conv:32:3:1:1,tanh,conv:32:3:1:1,tanh,avgpool:2:2,conv:64:3:1:1,tanh,conv:64:3:1:1,tanh,avgpool:2:2,"
          "conv:128:3:1:1,tanh,conv:128:3:1:1,tanh,avgpool:2:2,flatten,dense:128,tanh,dense:" +
          K);
    case NetworkArchitecture::kCustom: break;
  }
  // Custom networks never ask: a bug otherwise.
  throw std::logic_error("builtin_network_layers: custom networks have no built-in layers");
}

bool networks_available() { return network_plugin_loads(); }

std::uint64_t NetworkMemoryEstimate::total() const {
  return saturating_sum(saturating_sum(parameters, activations), per_example_gradients);
}

std::string NetworkMemoryEstimate::describe() const {
  return "a network of " + std::to_string(parameter_count) + " parameters with " + std::to_string(rows) +
         " examples in flight (" + readable_bytes(parameters) + " of parameters and optimiser state, " +
         readable_bytes(activations) + " of activations, " + readable_bytes(per_example_gradients) +
         " of per-example gradients)";
}

NetworkMemoryEstimate estimate_network_memory(const NetworkPlan& plan, Index rows) {
  const auto count = [](const std::vector<Index>& shape) {
    std::uint64_t values = 1;
    for (Index size : shape) values = saturating_product(values, static_cast<std::uint64_t>(size));
    return values;
  };
  std::uint64_t activations = count(plan.input_shape);
  for (const PlannedLayer& layer : plan.layers) activations = saturating_sum(activations, count(layer.output_shape));
  const auto bytes = [](std::uint64_t values, std::uint64_t copies) {
    return saturating_product(values, copies * sizeof(double));
  };
  std::uint64_t conv_weights = 0;
  for (const PlannedLayer& layer : plan.layers)
    if (layer.spec.kind == LayerKind::kConv)
      conv_weights = saturating_sum(conv_weights, static_cast<std::uint64_t>(layer.parameter_count()));
  const auto p = static_cast<std::uint64_t>(plan.parameter_count), r = static_cast<std::uint64_t>(rows);
  NetworkMemoryEstimate estimate;
  estimate.parameter_count = plan.parameter_count;
  estimate.rows = rows;
  estimate.parameters = bytes(p, kNetworkParameterCopies);
  estimate.activations = bytes(saturating_product(r, activations), kNetworkActivationCopies);
  estimate.per_example_gradients = bytes(saturating_product(r, conv_weights), kNetworkPerExampleCopies);
  return estimate;
}

namespace {

/// The shape of one input: the image's (C, H, W) for the networks that take images, else {d}.
std::vector<Index> network_input_shape(const NetworkOptions& options, Index d, const std::optional<ImageShape>& image) {
  const NetworkArchitecture a = options.architecture;
  if (a == NetworkArchitecture::kSoftmax || a == NetworkArchitecture::kMlp) return {d + (options.intercept ? 1 : 0)};
  if (image) {
    if (image->size() != d)
      throw DataError("Network: the image shape " + to_string(*image) + " does not have " + std::to_string(d) +
                      " values");
    return {image->channels, image->height, image->width};
  }
  if (a == NetworkArchitecture::kCustom) return {d};
  const Index side = std::llround(std::sqrt(static_cast<double>(d)));
  if (side * side != d)
    throw DataError("Network: " + to_string(a) + " takes images, but these rows have no image shape and d = " +
                    std::to_string(d) + " is not a square (load image data with pca 0)");
  return {1, side, side};
}

/// `initialisation` (NetworkOptions::initialisation) of every layer, in parameter order.
VectorXd initial_parameters_of(const NetworkPlan& plan, NetworkInitialisation initialisation, std::mt19937_64& rng) {
  VectorXd w = VectorXd::Zero(plan.parameter_count);
  for (const PlannedLayer& layer : plan.layers) {
    if (!layer.spec.has_parameters()) continue;
    if (initialisation == NetworkInitialisation::kPyTorch) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(layer.fan_in()));
      std::uniform_real_distribution<double> uniform(-bound, bound);
      for (Index i = 0; i < layer.parameter_count(); ++i) w(layer.offset + i) = uniform(rng);
      continue;
    }
    for (Index i = 0; i < layer.weight_size(); ++i)
      w(layer.offset + i) = glorot_normal(rng, layer.fan_in(), layer.fan_out());
    std::normal_distribution<double> bias(
        0.0, layer.spec.kind == LayerKind::kConv ? kJaxConvBiasStddev : kJaxDenseBiasStddev);
    for (Index i = layer.weight_size(); i < layer.parameter_count(); ++i) w(layer.offset + i) = bias(rng);
  }
  return w;
}

/// A module's weights must be numbers the data's bound admits: a NaN, an infinity or 1e200 would
/// otherwise show up as outputs that differ, or as training that diverges.
void check_torchscript_weights(const NetworkPlan& plan, const VectorXd& w, const std::string& path) {
  for (std::size_t l = 0; l < plan.layers.size(); ++l) {
    const PlannedLayer& layer = plan.layers[l];
    for (Index i = 0; i < layer.parameter_count(); ++i) {
      const double value = w(layer.offset + i);
      if (std::isfinite(value) && std::abs(value) <= kMaxInputMagnitude) continue;
      const bool bias = i >= layer.weight_size();
      throw DataError(
          "torchscript '" + path + "': layer " + std::to_string(l + 1) + " (" + to_string(layer.spec) + ") has " +
          (bias ? "bias " + std::to_string(i - layer.weight_size()) : "weight " + std::to_string(i)) + " = " +
          format_double(value) + ": " + (std::isfinite(value) ? "beyond +-1e150" : "not finite") +
          "; filkit takes weights that are finite numbers within +-1e150 (larger ones overflow the network's sums)");
    }
  }
}

/// LibTorch holds a module's members as they unpack (`unpacked` bytes, the zip directory's sizes,
/// so a deflated bomb counts in full) and filkit its weights as doubles (twice the bytes of
/// float32 weights): three times the members, refused before LibTorch reads the file; the
/// network's own estimate follows once its parameters are counted.
void check_torchscript_memory(const std::string& path, std::uint64_t unpacked, std::uint64_t budget) {
  check_memory(saturating_product(unpacked, 3), ByteSize{budget},
               "loading torchscript '" + path + "' (" + readable_bytes(unpacked) +
                   " unpacked: the module, and its weights as doubles)");
}

/// The rebuilt network must compute what the module computes (it may do more than call its
/// layers in order: a residual connection, a scaling, another order).
void check_torchscript_outputs(const Network& network, const TorchScriptNetwork& module, const std::string& path) {
  check_torchscript_weights(network.plan(), module.parameters, path);
  if (module.sample_outputs.cols() != network.num_classes())
    throw DataError("torchscript '" + path + "': the module returns " + std::to_string(module.sample_outputs.cols()) +
                    " scores an example, but the data has " + std::to_string(network.num_classes()) + " classes");
  const MatrixXd rebuilt = network.logits(module.parameters, module.sample_inputs);
  const double scale = std::max(1.0, module.sample_outputs.cwiseAbs().maxCoeff());
  const double difference = (rebuilt - module.sample_outputs).cwiseAbs().maxCoeff();
  if (!(difference <= 1e-9 * scale))
    throw DataError("torchscript '" + path +
                    "': the module's outputs differ from those of its layers "
                    "applied in order (" +
                    network.plan().describe() + ") by up to " + std::to_string(difference) +
                    ": filkit accounts only networks that are a chain of "
                    "supported layers (no residual connections or other operations between them)");
}

}  // namespace

struct Network::Impl {
  NetworkOptions options;
  Index d = 0, K = 0, p = 0;
  NetworkPlan plan;
  std::optional<VectorXd> imported_parameters;  // a TorchScript module's weights
  std::unique_ptr<NetworkBackend> backend;

  void check_shapes(const VectorXd& w, const RowMatrix& X, const VectorXd& y, const char* what) const {
    if (w.size() != p)
      throw OptionError::with_text("parameters", std::string("Network::") + what + ": " + std::to_string(w.size()) +
                                                     " parameters, the network has " + std::to_string(p));
    if (X.cols() != d)
      throw OptionError::with_text("X", std::string("Network::") + what + ": inputs have " + std::to_string(X.cols()) +
                                            " features, the network takes " + std::to_string(d));
    if (y.size() != X.rows())
      throw OptionError::with_text("y", std::string("Network::") + what + ": " + std::to_string(y.size()) +
                                            " labels for " + std::to_string(X.rows()) + " inputs");
    for (Index i = 0; i < y.size(); ++i)
      if (!(y(i) >= 0 && y(i) < K && y(i) == std::floor(y(i))))
        throw DataError(std::string("Network::") + what + ": label " + std::to_string(y(i)) + " of row " +
                        std::to_string(i) + " is not a class index in [0, " + std::to_string(K) + ")");
  }

  static void check_clip_norm(double clip_norm, const char* what) {
    if (!(clip_norm > 0.0) || !std::isfinite(clip_norm))
      throw OptionError::with_text("clip_norm", std::string("Network::") + what + ": clip_norm must be finite and > 0");
  }
};

Network::Network(const NetworkOptions& options, Index input_dim, Index num_classes,
                 const std::optional<ImageShape>& image)
    : impl_(std::make_unique<Impl>()) {
  options.validate();
  if (input_dim < 1)
    throw OptionError::with_text("input_dim", "Network: input_dim = " + std::to_string(input_dim) + ": must be >= 1");
  if (num_classes < 2)
    throw OptionError::with_text("num_classes",
                                 "Network: num_classes = " + std::to_string(num_classes) + ": must be >= 2");
  impl_->options = options;
  impl_->d = input_dim;
  impl_->K = num_classes;
  const std::vector<Index> input_shape = network_input_shape(options, input_dim, image);
  std::optional<TorchScriptNetwork> module;
  std::vector<LayerSpec> layers;
  const std::uint64_t budget = options.max_memory.value_or(default_memory_budget().bytes);
  if (!options.torchscript.empty()) {
    // A damaged file (a flipped bit in a weight) fails its members' CRC-32s; LibTorch does not check them.
    check_torchscript_memory(options.torchscript, verify_zip_members(options.torchscript, "TorchScript (zip) file"),
                             budget);
    module = read_torchscript(options.torchscript, input_shape, /*seed=*/0x5eed);
    if (!module->unsupported_operator.empty()) {
      const std::string reason = refused_layer_reason(module->unsupported_operator);
      throw DataError("torchscript '" + options.torchscript + "': operation " +
                      std::to_string(module->unsupported_position) + " (" + module->unsupported_operator + ") " +
                      (reason.empty()
                           ? "is not one of the supported layers (linear, conv2d, avg_pool2d, flatten, tanh, sigmoid, "
                             "softplus, gelu, elu, selu)"
                           : "cannot be accounted: " + reason));
    }
    layers = module->layers;
  } else {
    layers =
        options.layers.empty() ? builtin_network_layers(options, num_classes) : parse_network_layers(options.layers);
  }
  impl_->plan = plan_network(layers, input_shape, num_classes);
  impl_->p = impl_->plan.parameter_count;
  const NetworkMemoryEstimate estimate = estimate_network_memory(impl_->plan, network_rows_in_flight(options));
  check_memory(estimate.total(), ByteSize{budget},
               "training " + estimate.describe() + " (fewer examples at once: " + option_name("chunk") + ", " +
                   option_name("batch_size") + "; or a smaller network)");
  impl_->backend = create_network_backend(impl_->plan, options);
  if (module) {
    if (module->parameters.size() != impl_->p)
      throw DataError("torchscript '" + options.torchscript + "': " + std::to_string(module->parameters.size()) +
                      " weights for " + std::to_string(impl_->p) + " parameters");
    check_torchscript_outputs(*this, *module, options.torchscript);
    impl_->imported_parameters = std::move(module->parameters);
  }
}

Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

const NetworkOptions& Network::options() const { return impl_->options; }
Index Network::input_dim() const { return impl_->d; }
Index Network::num_classes() const { return impl_->K; }
Index Network::parameter_count() const { return impl_->p; }
const NetworkPlan& Network::plan() const { return impl_->plan; }
std::string Network::describe() const { return impl_->plan.describe(); }

VectorXd Network::initial_parameters(std::mt19937_64& rng) const {
  if (impl_->imported_parameters) return *impl_->imported_parameters;
  if (impl_->options.architecture == NetworkArchitecture::kSoftmax) return VectorXd::Zero(impl_->p);
  return initial_parameters_of(impl_->plan, impl_->options.initialisation, rng);
}

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

VectorXd Network::gradient_sum(const VectorXd& w, const RowMatrix& X, const VectorXd& y) const {
  impl_->check_shapes(w, X, y, "gradient_sum");
  return impl_->backend->gradient_sum(w, X, y);
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
    throw OptionError::with_text("tangents", "Network::jacobian_vector_products: tangents must be " +
                                                 std::to_string(X.rows()) + " x " + std::to_string(impl_->d));
  return impl_->backend->jacobian_vector_products(w, X, y, clip_norm, V);
}

MatrixXd Network::vector_jacobian_products(const VectorXd& w, const RowMatrix& X, const VectorXd& y, double clip_norm,
                                           const RowMatrix& U) const {
  impl_->check_shapes(w, X, y, "vector_jacobian_products");
  Impl::check_clip_norm(clip_norm, "vector_jacobian_products");
  if (U.rows() != X.rows() || U.cols() != impl_->p)
    throw OptionError::with_text("cotangents", "Network::vector_jacobian_products: cotangents must be " +
                                                   std::to_string(X.rows()) + " x " + std::to_string(impl_->p));
  return impl_->backend->vector_jacobian_products(w, X, y, clip_norm, U);
}

NetworkBatchAccounting Network::account_batch(const VectorXd& w, const RowMatrix& X, const VectorXd& y,
                                              double clip_norm, const NetworkAccountingRequest& request,
                                              std::uint64_t seed, Index first_position) const {
  impl_->check_shapes(w, X, y, "account_batch");
  Impl::check_clip_norm(clip_norm, "account_batch");
  if (request.probes < 1 || request.power_iterations < 1)
    throw OptionError::with_text("probes", "Network::account_batch: probes and power_iterations must be >= 1");
  if (first_position < 0)
    throw OptionError::with_text("first_position", "Network::account_batch: first_position = " +
                                                       std::to_string(first_position) + ": must be >= 0");
  return impl_->backend->account_batch(w, X, y, clip_norm, request, seed, first_position);
}

}  // namespace filkit
