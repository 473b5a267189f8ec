#include "filkit/dpsgd.hpp"
#include "filkit/pipeline.hpp"

#include "filkit/clipped_gradient.hpp"
#include "filkit/io.hpp"
#include "filkit/jacobian_estimators.hpp"
#include "filkit/summary.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace filkit {

namespace {

template <typename Enum, std::size_t N>
Enum enum_from_string(const std::string& name, const std::pair<Enum, const char*> (&names)[N], const char* what) {
  std::string expected;
  for (const auto& [value, spelling] : names) {
    if (name == spelling) return value;
    expected += (expected.empty() ? "" : ", ") + std::string(spelling);
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "': expected one of " + expected);
}

template <typename Enum, std::size_t N>
std::string enum_to_string(Enum value, const std::pair<Enum, const char*> (&names)[N]) {
  for (const auto& [candidate, spelling] : names)
    if (candidate == value) return spelling;
  return "unknown";
}

constexpr std::pair<BatchSampling, const char*> kSamplingNames[] = {{BatchSampling::kUniform, "uniform"},
                                                                     {BatchSampling::kPoisson, "poisson"}};
constexpr std::pair<SubsamplingFactor, const char*> kFactorNames[] = {{SubsamplingFactor::kAmplified, "amplified"},
                                                                       {SubsamplingFactor::kOne, "one"}};
constexpr std::pair<TraceMethod, const char*> kTraceNames[] = {
    {TraceMethod::kExact, "exact"}, {TraceMethod::kCoordinates, "coordinates"}, {TraceMethod::kGaussian, "gaussian"}};
constexpr std::pair<SpectralMethod, const char*> kSpectralNames[] = {{SpectralMethod::kExact, "exact"},
                                                                      {SpectralMethod::kPowerIteration, "power-iteration"},
                                                                      {SpectralMethod::kNone, "none"}};

}  // namespace

std::string to_string(BatchSampling sampling) { return enum_to_string(sampling, kSamplingNames); }
BatchSampling batch_sampling_from_string(const std::string& name) {
  return enum_from_string(name, kSamplingNames, "batch sampling");
}
std::string to_string(SubsamplingFactor factor) { return enum_to_string(factor, kFactorNames); }
SubsamplingFactor subsampling_factor_from_string(const std::string& name) {
  return enum_from_string(name, kFactorNames, "subsampling factor");
}
std::string to_string(TraceMethod method) { return enum_to_string(method, kTraceNames); }
TraceMethod trace_method_from_string(const std::string& name) {
  return enum_from_string(name, kTraceNames, "trace method");
}
std::string to_string(SpectralMethod method) { return enum_to_string(method, kSpectralNames); }
SpectralMethod spectral_method_from_string(const std::string& name) {
  return enum_from_string(name, kSpectralNames, "spectral method");
}

// ---------------------------------------------------------------------------------------------

namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& value, const std::string& rule) {
  throw std::invalid_argument("DpSgdOptions." + field + " = " + value + ": " + rule);
}

void require_positive(const std::string& field, double value) {
  if (!(value > 0.0) || !std::isfinite(value)) invalid(field, format_double(value), "must be finite and > 0");
}

void require_probability(const std::string& field, double value) {
  if (!(value > 0.0 && value < 1.0)) invalid(field, format_double(value), "must be in (0, 1)");
}

}  // namespace

void DpSgdOptions::validate() const {
  if (kind != ModelKind::kLogistic && kind != ModelKind::kSoftmax)
    invalid("kind", to_string(kind), "must be logistic or softmax");
  if (batch_size < 1) invalid("batch_size", std::to_string(batch_size), "must be >= 1");
  if (steps < 1) invalid("steps", std::to_string(steps), "must be >= 1");
  require_positive("step_size", step_size);
  require_positive("clip_norm", clip_norm);
  require_positive("noise_multiplier", noise_multiplier);
  if (!(momentum >= 0.0 && momentum < 1.0)) invalid("momentum", format_double(momentum), "must be in [0, 1)");
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    invalid("weight_decay", format_double(weight_decay), "must be finite and >= 0");
  if (!(init_scale >= 0.0) || !std::isfinite(init_scale))
    invalid("init_scale", format_double(init_scale), "must be finite and >= 0");
  require_probability("kappa_delta", kappa_delta);
  require_probability("rdp_delta", rdp_delta);
  if (probes < 1) invalid("probes", std::to_string(probes), "must be >= 1");
  if (power_iterations < 1) invalid("power_iterations", std::to_string(power_iterations), "must be >= 1");
  if (runs < 1) invalid("runs", std::to_string(runs), "must be >= 1");
  for (double epoch : report_epochs) require_positive("report_epochs", epoch);
}

double step_epsilon(double noise_multiplier, double delta) {
  return soft_clip_norm_bound() * 2.0 * std::sqrt(2.0 * std::log(1.25 / delta)) / noise_multiplier;
}

double rdp_noise_multiplier(double noise_multiplier) { return noise_multiplier / soft_clip_norm_bound(); }

double subsampling_kappa(double q, double noise_multiplier, double delta) {
  if (!(q > 0.0 && q <= 1.0)) throw std::invalid_argument("subsampling_kappa: q = " + format_double(q) + ": must be in (0, 1]");
  require_positive("noise_multiplier", noise_multiplier);
  require_probability("kappa_delta", delta);
  return q / (q + (1.0 - q) * std::exp(-step_epsilon(noise_multiplier, delta)));
}

// ---------------------------------------------------------------------------------------------

VectorXd DpSgdCheckpoint::dfil(Index private_dims) const {
  return (fisher_trace / static_cast<double>(private_dims)).cwiseSqrt();
}

VectorXd DpSgdCheckpoint::eta() const { return fisher_spectral.cwiseSqrt(); }

namespace {
double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / values.size();
}
}  // namespace

double DpSgdCheckpoint::rdp_mse_bound() const { return 1.0 / (4.0 * std::expm1(rdp_order2)); }

double DpSgdCheckpoint::mean_test_accuracy() const { return mean_of(test_accuracy); }
double DpSgdCheckpoint::mean_train_accuracy() const { return mean_of(train_accuracy); }

// ---------------------------------------------------------------------------------------------

namespace {

// Below this many (examples x parameters) a step runs on one thread: the work is too small to
// pay for waking the others.
constexpr Index kParallelWork = 1 << 15;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Per-run running sums of the accountant (before the 1/(sigma C)^2 and kappa factors).
struct RunAccountant {
  explicit RunAccountant(Index n) : trace(VectorXd::Zero(n)), spectral(VectorXd::Zero(n)), sampled(VectorXd::Zero(n)) {}
  VectorXd trace, spectral, sampled;
};

/// Sums over runs of each checkpoint's accountant, turned into means at the end.
struct CheckpointSums {
  VectorXd trace, trace_squares, spectral, sampled;
};

/// The state and the fixed inputs of one training run.
class Trainer {
 public:
  Trainer(const Dataset& train, const DpSgdOptions& options, Index num_classes, std::uint64_t run_seed)
      : train_(train), options_(options), K_(num_classes), run_seed_(run_seed), rng_(run_seed),
        accountant_(train.n()) {
    const Index p = train.d() + (options.intercept ? 1 : 0), columns = options.kind == ModelKind::kLogistic ? 1 : K_;
    W_ = MatrixXd::Zero(p, columns);
    velocity_ = MatrixXd::Zero(p, columns);
    std::normal_distribution<double> normal(0.0, options.init_scale);
    if (options.init_scale > 0.0)
      for (Index i = 0; i < W_.size(); ++i) W_(i) = normal(rng_);
    order_.resize(train.n());
    for (Index i = 0; i < train.n(); ++i) order_[i] = i;
  }

  /// One DP-SGD step with its accounting.
  void step(Index t) {
    const std::vector<Index> batch = sample_batch();
    const ClippedGradientStep shared(options_.kind, W_, options_.intercept, options_.clip_norm, options_.label);
    const Index B = static_cast<Index>(batch.size());
    MatrixXd coefficients(B, W_.cols());  // rows f_i r_i^T: g~_i = x~_i (f_i r_i)^T
    VectorXd traces(B), spectral(B);
#pragma omp parallel for schedule(static) if (B * W_.size() >= kParallelWork)
    for (Index b = 0; b < B; ++b) {
      const Index i = batch[b];
      const ClippedGlmGradient g(shared, train_.X.row(i).transpose(), shared.label_vector(train_.y(i)));
      coefficients.row(b) = g.clip_factor() * g.residual().transpose();
      std::mt19937_64 probe_rng(splitmix64(run_seed_ ^ splitmix64(static_cast<std::uint64_t>(t * train_.n() + i))));
      traces(b) = trace_of(g, probe_rng);
      spectral(b) = spectral_norm_squared_of(g, probe_rng);
    }
    for (Index b = 0; b < B; ++b) {
      accountant_.trace(batch[b]) += traces(b);
      accountant_.spectral(batch[b]) += spectral(b);
      accountant_.sampled(batch[b]) += 1.0;
    }
    update(batch, coefficients);
  }

  Model model() const {
    Model m;
    m.kind = options_.kind;
    m.intercept = options_.intercept;
    m.n_train = train_.n();
    m.num_classes = K_;
    m.weights = W_;
    return m;
  }
  const RunAccountant& accountant() const { return accountant_; }

 private:
  std::vector<Index> sample_batch() {
    const Index n = train_.n();
    std::vector<Index> batch;
    if (options_.sampling == BatchSampling::kUniform) {
      // Partial Fisher-Yates: the first B entries of order_ become a uniform B-subset.
      for (Index j = 0; j < options_.batch_size; ++j) {
        std::uniform_int_distribution<Index> pick(j, n - 1);
        std::swap(order_[j], order_[pick(rng_)]);
      }
      batch.assign(order_.begin(), order_.begin() + options_.batch_size);
    } else {
      const double q = static_cast<double>(options_.batch_size) / n;
      std::uniform_real_distribution<double> uniform;
      for (Index i = 0; i < n; ++i)
        if (uniform(rng_) < q) batch.push_back(i);
    }
    return batch;
  }

  double trace_of(const ClippedGlmGradient& g, std::mt19937_64& rng) const {
    switch (options_.trace) {
      case TraceMethod::kCoordinates: return estimate_trace_by_coordinates(g, options_.probes, rng).value;
      case TraceMethod::kGaussian: return estimate_trace_by_gaussian_probes(g, options_.probes, rng).value;
      case TraceMethod::kExact: break;
    }
    return g.jacobian_trace();
  }

  double spectral_norm_squared_of(const ClippedGlmGradient& g, std::mt19937_64& rng) const {
    switch (options_.spectral) {
      case SpectralMethod::kPowerIteration: {
        const double norm = estimate_spectral_norm(g, options_.power_iterations, 0.0, rng).value;
        return norm * norm;
      }
      case SpectralMethod::kNone: return std::numeric_limits<double>::quiet_NaN();
      case SpectralMethod::kExact: break;
    }
    return g.jacobian_spectral_norm_squared();
  }

  void update(const std::vector<Index>& batch, const MatrixXd& coefficients) {
    const Index d = train_.d();
    RowMatrix rows(static_cast<Index>(batch.size()), d);
    for (std::size_t b = 0; b < batch.size(); ++b) rows.row(b) = train_.X.row(batch[b]);
    MatrixXd sum(W_.rows(), W_.cols());
    sum.bottomRows(d).noalias() = rows.transpose() * coefficients;
    if (options_.intercept) sum.row(0) = coefficients.colwise().sum();
    std::normal_distribution<double> noise(0.0, options_.noise_multiplier * options_.clip_norm);
    for (Index i = 0; i < sum.size(); ++i) sum(i) += noise(rng_);
    const MatrixXd gradient = sum / static_cast<double>(options_.batch_size) + options_.weight_decay * W_;
    velocity_ = options_.momentum * velocity_ + gradient;
    W_ -= options_.step_size * velocity_;
  }

  const Dataset& train_;
  DpSgdOptions options_;
  Index K_;
  std::uint64_t run_seed_;
  std::mt19937_64 rng_;
  MatrixXd W_, velocity_;
  std::vector<Index> order_;
  RunAccountant accountant_;
};

Index number_of_classes(const Dataset& train, const Dataset& test, ModelKind kind) {
  double largest = 1.0;
  for (const Dataset* data : {&train, &test})
    for (Index i = 0; i < data->n(); ++i) {
      const double y = data->y(i);
      if (y < 0 || y != std::floor(y) || (kind == ModelKind::kLogistic && y > 1))
        throw std::invalid_argument("train_dpsgd: label " + format_double(y) + " of row " + std::to_string(i) + " in " +
                                    (data == &train ? "train" : "test") + " is not a class index" +
                                    (kind == ModelKind::kLogistic ? " in {0, 1}" : ""));
      largest = std::max(largest, y);
    }
  return static_cast<Index>(largest) + 1;
}

/// The checkpoint steps: report epochs rounded to steps, and T, sorted and unique.
std::vector<Index> checkpoint_steps(const DpSgdOptions& options, Index n) {
  std::vector<Index> steps{options.steps};
  for (double epoch : options.report_epochs) {
    const Index step = std::max<Index>(1, std::llround(epoch * n / options.batch_size));
    if (step > options.steps)
      throw std::invalid_argument("DpSgdOptions.report_epochs = " + format_double(epoch) + ": is step " +
                                  std::to_string(step) + ", beyond steps = " + std::to_string(options.steps));
    steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

}  // namespace

DpSgdResult train_dpsgd(const Dataset& train, const Dataset& test, const DpSgdOptions& options, bool progress) {
  options.validate();
  train.validate();
  if (test.n() > 0) test.validate();
  if (test.n() > 0 && test.d() != train.d())
    throw std::invalid_argument("train_dpsgd: test has " + std::to_string(test.d()) + " features, train " +
                                std::to_string(train.d()));
  const Index n = train.n();
  if (options.batch_size > n)
    invalid("batch_size", std::to_string(options.batch_size), "must be <= n = " + std::to_string(n));

  DpSgdResult result;
  result.n = n;
  result.num_classes = number_of_classes(train, test, options.kind);
  result.sampling_rate = static_cast<double>(options.batch_size) / n;
  result.step_epsilon = step_epsilon(options.noise_multiplier, options.kappa_delta);
  result.kappa = options.subsampling == SubsamplingFactor::kOne
                     ? 1.0
                     : subsampling_kappa(result.sampling_rate, options.noise_multiplier, options.kappa_delta);
  result.private_dims = train.d() + (options.label == LabelPrivacy::kPrivate
                                         ? (options.kind == ModelKind::kSoftmax ? result.num_classes : 1)
                                         : 0);
  const std::vector<Index> steps = checkpoint_steps(options, n);
  std::vector<CheckpointSums> sums(steps.size(), {VectorXd::Zero(n), VectorXd::Zero(n), VectorXd::Zero(n), VectorXd::Zero(n)});
  result.checkpoints.resize(steps.size());

  const double scale = result.kappa / std::pow(options.noise_multiplier * options.clip_norm, 2);
  double evaluation_seconds = 0.0;
  const auto start = std::chrono::steady_clock::now();
  Progress bar("dpsgd", static_cast<std::int64_t>(options.runs) * options.steps, !progress);
  for (int run = 0; run < options.runs; ++run) {
    const std::uint64_t run_seed = splitmix64(options.seed ^ splitmix64(static_cast<std::uint64_t>(run)));
    result.run_seeds.push_back(run_seed);
    Trainer trainer(train, options, result.num_classes, run_seed);
    std::size_t next = 0;
    for (Index t = 1; t <= options.steps; ++t) {
      trainer.step(t);
      bar.advance();
      if (t != steps[next]) continue;
      const RunAccountant& a = trainer.accountant();
      sums[next].trace += scale * a.trace;
      sums[next].trace_squares += (scale * a.trace).cwiseAbs2();
      sums[next].spectral += scale * a.spectral;
      sums[next].sampled += a.sampled;
      const auto evaluation_start = std::chrono::steady_clock::now();
      const Model model = trainer.model();
      result.checkpoints[next].train_accuracy.push_back(accuracy(model, train));
      result.checkpoints[next].test_accuracy.push_back(test.n() > 0 ? accuracy(model, test)
                                                                    : std::numeric_limits<double>::quiet_NaN());
      evaluation_seconds += seconds_since(evaluation_start);
      ++next;
    }
    result.models.push_back(trainer.model());
  }
  bar.finish();

  const double runs = options.runs;
  for (std::size_t c = 0; c < steps.size(); ++c) {
    DpSgdCheckpoint& checkpoint = result.checkpoints[c];
    checkpoint.step = steps[c];
    checkpoint.epoch = static_cast<double>(steps[c]) * result.sampling_rate;
    checkpoint.fisher_trace = sums[c].trace / runs;
    const VectorXd variance = (sums[c].trace_squares / runs - checkpoint.fisher_trace.cwiseAbs2()).cwiseMax(0.0);
    checkpoint.fisher_trace_standard_error =
        options.runs > 1 ? VectorXd((variance / (runs - 1)).cwiseSqrt()) : VectorXd::Zero(n);
    checkpoint.fisher_spectral = sums[c].spectral / runs;
    checkpoint.times_sampled = sums[c].sampled / runs;
    RdpAccountant accountant;
    accountant.compose(result.sampling_rate, rdp_noise_multiplier(options.noise_multiplier), steps[c]);
    checkpoint.privacy = accountant.get_privacy_spent(options.rdp_delta);
    checkpoint.rdp_order2 = static_cast<double>(steps[c]) *
                            subsampled_gaussian_rdp(result.sampling_rate, rdp_noise_multiplier(options.noise_multiplier), {2.0})[0];
  }
  result.seconds["evaluation"] = evaluation_seconds;
  result.seconds["training"] = seconds_since(start) - evaluation_seconds;
  return result;
}

// ---------------------------------------------------------------------------------------------

nlohmann::json to_json(const DpSgdOptions& options) {
  return {{"kind", to_string(options.kind)},
          {"intercept", options.intercept},
          {"label", to_string(options.label)},
          {"batch_size", options.batch_size},
          {"sampling", to_string(options.sampling)},
          {"steps", options.steps},
          {"step_size", options.step_size},
          {"clip_norm", options.clip_norm},
          {"noise_multiplier", options.noise_multiplier},
          {"momentum", options.momentum},
          {"weight_decay", options.weight_decay},
          {"init_scale", options.init_scale},
          {"subsampling", to_string(options.subsampling)},
          {"kappa_delta", options.kappa_delta},
          {"trace", to_string(options.trace)},
          {"spectral", to_string(options.spectral)},
          {"probes", options.probes},
          {"power_iterations", options.power_iterations},
          {"runs", options.runs},
          {"seed", options.seed},
          {"report_epochs", options.report_epochs},
          {"rdp_delta", options.rdp_delta}};
}

namespace {

/// Summary statistics of a per-example quantity with the MSE bounds 1/v^2 of its median and max
/// (null when not computed).
nlohmann::json leakage_summary(const VectorXd& values) {
  if (values.size() == 0 || values.hasNaN()) return nullptr;
  const Summary s = summarize(values);
  nlohmann::json json = s.to_json();
  json["mse_bound_at_median"] = 1.0 / (s.median * s.median);
  json["mse_bound_at_max"] = 1.0 / (s.max * s.max);
  return json;
}

}  // namespace

nlohmann::json DpSgdResult::summary(const DpSgdOptions& options) const {
  nlohmann::json checkpoints_json = nlohmann::json::array();
  for (const DpSgdCheckpoint& c : checkpoints)
    checkpoints_json.push_back({{"step", c.step},
                                {"epoch", c.epoch},
                                {"dfil", leakage_summary(c.dfil(private_dims))},
                                {"eta", leakage_summary(c.eta())},
                                {"times_sampled_mean", c.times_sampled.mean()},
                                {"rdp",
                                 {{"eps", c.privacy.eps},
                                  {"delta", c.privacy.delta},
                                  {"optimal_order", c.privacy.optimal_order},
                                  {"order_status", to_string(c.privacy.status)},
                                  {"warning", c.privacy.warning},
                                  {"noise_multiplier", rdp_noise_multiplier(options.noise_multiplier)},
                                  {"order2_eps", c.rdp_order2},
                                  {"mse_bound", c.rdp_mse_bound()}}},
                                {"train_accuracy", c.mean_train_accuracy()},
                                {"test_accuracy", c.mean_test_accuracy()},
                                {"train_accuracy_per_run", c.train_accuracy},
                                {"test_accuracy_per_run", c.test_accuracy}});
  return {{"filkit_version", version()},
          {"seed", options.seed},
          {"settings", {{"dpsgd", to_json(options)}}},
          {"n", n},
          {"num_classes", num_classes},
          {"private_dims", private_dims},
          {"sampling_rate", sampling_rate},
          {"step_epsilon", step_epsilon},
          {"kappa", kappa},
          {"kappa_failure_probability", std::min(1.0, options.kappa_delta * static_cast<double>(options.steps))},
          {"soft_clip_norm_bound", soft_clip_norm_bound()},
          {"run_seeds", run_seeds},
          {"checkpoints", checkpoints_json},
          {"seconds", seconds}};
}

std::vector<std::string> DpSgdResult::table_header() const {
  return {"step", "epoch", "index", "label", "times_sampled", "eta", "dfil", "attribute_mse_bound",
          "example_mse_bound", "fisher_trace", "fisher_trace_standard_error"};
}

std::vector<std::vector<double>> DpSgdResult::table_rows(const Dataset& train) const {
  std::vector<std::vector<double>> rows;
  for (const DpSgdCheckpoint& c : checkpoints) {
    const VectorXd eta = c.eta(), dfil = c.dfil(private_dims);
    for (Index i = 0; i < n; ++i)
      rows.push_back({static_cast<double>(c.step), c.epoch, static_cast<double>(i), train.y(i), c.times_sampled(i),
                      eta(i), dfil(i), 1.0 / (eta(i) * eta(i)), 1.0 / (dfil(i) * dfil(i)), c.fisher_trace(i),
                      c.fisher_trace_standard_error(i)});
  }
  return rows;
}

}  // namespace filkit
