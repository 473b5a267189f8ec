#include "dpsgd/trainable_models.hpp"
#include "base/seeding.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/jacobian_estimators.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/networks/networks.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace filkit {

Model TrainableModel::glm(const VectorXd&) const { throw std::logic_error("TrainableModel::glm: not a GLM"); }

void TrainableModel::restore(const nlohmann::json& state, Index) {
  if (!state.is_null()) throw DataError("holds a state for a model that keeps none");
}

namespace {

// Below this many (examples x parameters) a step runs on one thread: the work is too small to
// pay for waking the others.
constexpr Index kParallelWork = 1 << 15;

/// Logistic or softmax regression: parameters are W (p x K, K = 1 for logistic) column by column,
/// G in closed form (O(K d) a trace, a (1 + 2K)-dimensional eigenproblem a spectral norm).
class TrainableGlm : public TrainableModel {
 public:
  TrainableGlm(const Dataset& train, const DpSgdOptions& options, Index num_classes)
      : train_(train),
        options_(options),
        K_(num_classes),
        p_(train.d() + (options.intercept ? 1 : 0)),
        columns_(options.kind == ModelKind::kLogistic ? 1 : num_classes) {}

  Index parameter_count() const override { return p_ * columns_; }
  bool is_glm() const override { return true; }

  VectorXd initial_parameters(std::mt19937_64& rng) const override {
    VectorXd w = VectorXd::Zero(parameter_count());
    if (options_.init_scale > 0.0) {  // a standard deviation of 0 is not admitted
      std::normal_distribution<double> normal(0.0, options_.init_scale);
      for (Index i = 0; i < w.size(); ++i) w(i) = normal(rng);
    }
    return w;
  }

  Model glm(const VectorXd& w) const override {
    Model m;
    m.kind = options_.kind;
    m.intercept = options_.intercept;
    m.n_train = train_.n();
    m.num_classes = K_;
    m.weights = Eigen::Map<const MatrixXd>(w.data(), p_, columns_);
    return m;
  }

  double accuracy(const VectorXd& w, const Dataset& data) const override { return filkit::accuracy(glm(w), data); }

  StepAccounting step(const VectorXd& w, const LocalBatch& local, std::uint64_t run_seed, Index t) override {
    const std::vector<Index>& batch = local.rows;
    const ClippedGradientStep shared(options_.kind, Eigen::Map<const MatrixXd>(w.data(), p_, columns_),
                                     options_.intercept, options_.clip_norm, options_.label);
    const Index B = static_cast<Index>(batch.size()), d = train_.d();
    MatrixXd coefficients(B, columns_);  // rows f_i r_i^T: g~_i = x~_i (f_i r_i)^T
    StepAccounting out{VectorXd(), VectorXd(B), VectorXd(B)};
#pragma omp parallel for schedule(static) if (B * w.size() >= kParallelWork)
    for (Index b = 0; b < B; ++b) {
      const Index i = batch[b];
      const ClippedGlmGradient g(shared, train_.X.row(i).transpose(), shared.label_vector(train_.y(i)));
      coefficients.row(b) = g.clip_factor() * g.residual().transpose();
      const Index row = local.row_offset + i;  // keyed by the global row: the same probes on any number of ranks
      std::mt19937_64 probe_rng(
          splitmix64(run_seed ^ splitmix64(static_cast<std::uint64_t>(t * local.total_rows + row))));
      out.trace(b) = trace_of(g, probe_rng);
      out.spectral(b) = spectral_norm_squared_of(g, probe_rng);
    }
    // The batch sum is one product: sum_b x~_b (f_b r_b)^T.
    RowMatrix rows(B, d);
    for (Index b = 0; b < B; ++b) rows.row(b) = train_.X.row(batch[b]);
    MatrixXd sum(p_, columns_);
    sum.bottomRows(d).noalias() = rows.transpose() * coefficients;
    if (options_.intercept) sum.row(0) = coefficients.colwise().sum();
    out.clipped_sum = Eigen::Map<const VectorXd>(sum.data(), sum.size());
    return out;
  }

 private:
  double trace_of(const ClippedGlmGradient& g, std::mt19937_64& rng) const {
    switch (options_.trace.value()) {
      case TraceMethod::kCoordinates: return estimate_trace_by_coordinates(g, options_.probes.value(), rng).value;
      case TraceMethod::kGaussian: return estimate_trace_by_gaussian_probes(g, options_.probes.value(), rng).value;
      case TraceMethod::kExact: break;
    }
    return g.jacobian_trace();
  }

  double spectral_norm_squared_of(const ClippedGlmGradient& g, std::mt19937_64& rng) const {
    switch (options_.spectral.value()) {
      case SpectralMethod::kPowerIteration: {
        const double norm = estimate_spectral_norm(g, options_.power_iterations, 0.0, rng).value;
        return norm * norm;
      }
      case SpectralMethod::kNone: return std::numeric_limits<double>::quiet_NaN();
      case SpectralMethod::kExact: break;
    }
    return g.jacobian_spectral_norm_squared();
  }

  const Dataset& train_;
  const DpSgdOptions& options_;
  Index K_, p_, columns_;
};

NetworkOptions network_options(const DpSgdOptions& options) {
  NetworkOptions network = *options.network;
  network.intercept = options.intercept;
  network.precision = options.precision;
  network.max_memory = options.max_memory.bytes;
  network.batch_rows = std::max(network.batch_rows, options.batch_size);  // a caller may know of larger batches
  return network;
}

/// A network through LibTorch (networks.hpp): batched per-example clipped gradients, G probed by
/// JVPs and VJPs.
class TrainableNetwork : public TrainableModel {
 public:
  TrainableNetwork(const Dataset& train, const DpSgdOptions& options, Index num_classes)
      : train_(train), options_(options), network_(network_options(options), train.d(), num_classes, train.image) {
    if (options.label == LabelPrivacy::kPrivate)
      option_error("label", "private",
                   "networks treat the label as public (only the closed-form GLMs account for a private label)");
    request_.trace = options.trace.value();
    request_.spectral = options.spectral.value();
    request_.probes = options.probes.value();
    request_.power_iterations = options.power_iterations;
  }

  Index parameter_count() const override { return network_.parameter_count(); }
  VectorXd initial_parameters(std::mt19937_64& rng) const override {
    if (options_.network->architecture == NetworkArchitecture::kSoftmax && options_.init_scale > 0.0) {
      // As the GLM, so that the two start from the same w_0.
      VectorXd w(parameter_count());
      std::normal_distribution<double> normal(0.0, options_.init_scale);
      for (Index i = 0; i < w.size(); ++i) w(i) = normal(rng);
      return w;
    }
    return network_.initial_parameters(rng);
  }
  double accuracy(const VectorXd& w, const Dataset& data) const override {
    return data.n() == 0 ? std::numeric_limits<double>::quiet_NaN() : network_.accuracy(w, data.X, data.y);
  }
  std::string describe() const override { return network_.describe(); }
  const Network* network() const override { return &network_; }

  StepAccounting step(const VectorXd& w, const LocalBatch& local, std::uint64_t run_seed, Index t) override {
    const std::vector<Index>& batch = local.rows;
    const Index B = static_cast<Index>(batch.size());
    RowMatrix X(B, train_.d());
    VectorXd y(B);
    for (Index b = 0; b < B; ++b) {
      X.row(b) = train_.X.row(batch[b]);
      y(b) = train_.y(batch[b]);
    }
    NetworkBatchAccounting a =
        network_.account_batch(w, X, y, options_.clip_norm, request_,
                               splitmix64(run_seed ^ splitmix64(static_cast<std::uint64_t>(t))), local.position);
    return {std::move(a.clipped_sum), std::move(a.trace), std::move(a.spectral)};
  }

 private:
  const Dataset& train_;
  const DpSgdOptions& options_;
  Network network_;
  NetworkAccountingRequest request_;
};

}  // namespace

std::unique_ptr<TrainableModel> make_trainable_model(const Dataset& train, const DpSgdOptions& options,
                                                     Index num_classes) {
  if (options.network) return std::make_unique<TrainableNetwork>(train, options, num_classes);
  return std::make_unique<TrainableGlm>(train, options, num_classes);
}

}  // namespace filkit
