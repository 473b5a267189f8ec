#include "filkit/dpsgd/training.hpp"
#include "filkit/data/pipeline.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/base/io.hpp"
#include "filkit/dpsgd/jacobian_estimators.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/summary.hpp"

#include "dpsgd/trainable_models.hpp"
#include "base/seeding.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace filkit {

namespace {

constexpr std::pair<BatchSampling, const char*> kSamplingNames[] = {{BatchSampling::kUniform, "uniform"},
                                                                     {BatchSampling::kPoisson, "poisson"}};
constexpr std::pair<SubsamplingFactor, const char*> kFactorNames[] = {{SubsamplingFactor::kAmplified, "amplified"},
                                                                       {SubsamplingFactor::kOne, "one"}};
constexpr std::pair<Optimizer, const char*> kOptimizerNames[] = {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}};

}  // namespace


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
  if (!network && kind != ModelKind::kLogistic && kind != ModelKind::kSoftmax)
    invalid("kind", to_string(kind), "must be logistic or softmax");
  if (network) network->validate();
  if (batch_size < 1) invalid("batch_size", std::to_string(batch_size), "must be >= 1");
  if (steps < 1) invalid("steps", std::to_string(steps), "must be >= 1");
  require_positive("step_size", step_size);
  require_positive("clip_norm", clip_norm);
  require_positive("noise_multiplier", noise_multiplier);
  if (!(momentum >= 0.0 && momentum < 1.0)) invalid("momentum", format_double(momentum), "must be in [0, 1)");
  if (!(adam_beta1 >= 0.0 && adam_beta1 < 1.0)) invalid("adam_beta1", format_double(adam_beta1), "must be in [0, 1)");
  if (!(adam_beta2 >= 0.0 && adam_beta2 < 1.0)) invalid("adam_beta2", format_double(adam_beta2), "must be in [0, 1)");
  require_positive("adam_epsilon", adam_epsilon);
  if (checkpoint_every < 0) invalid("checkpoint_every", std::to_string(checkpoint_every), "must be >= 0");
  if (stop_after < 0) invalid("stop_after", std::to_string(stop_after), "must be >= 0");
  if (checkpoint_path.empty() && (checkpoint_every > 0 || stop_after > 0))
    invalid(checkpoint_every > 0 ? "checkpoint_every" : "stop_after",
            std::to_string(checkpoint_every > 0 ? checkpoint_every : stop_after),
            "needs checkpoint_path (where to save the state)");
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    invalid("weight_decay", format_double(weight_decay), "must be finite and >= 0");
  if (!(init_scale >= 0.0) || !std::isfinite(init_scale))
    invalid("init_scale", format_double(init_scale), "must be finite and >= 0");
  require_probability("kappa_delta", kappa_delta);
  require_probability("rdp_delta", rdp_delta);
  if (probes && *probes < 1) invalid("probes", std::to_string(*probes), "must be >= 1");
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

VectorXd DpSgdSnapshot::dfil(Index private_dims) const {
  return (fisher_trace / static_cast<double>(private_dims)).cwiseSqrt();
}

VectorXd DpSgdSnapshot::eta() const { return fisher_spectral.cwiseSqrt(); }

namespace {
double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / values.size();
}
}  // namespace

double DpSgdSnapshot::rdp_mse_bound() const { return 1.0 / (4.0 * std::expm1(rdp_order2)); }

double DpSgdSnapshot::mean_test_accuracy() const { return mean_of(test_accuracy); }
double DpSgdSnapshot::mean_train_accuracy() const { return mean_of(train_accuracy); }

// ---------------------------------------------------------------------------------------------

namespace {

VectorXd to_vector(const nlohmann::json& values) {
  const std::vector<double> v = values.get<std::vector<double>>();
  return Eigen::Map<const VectorXd>(v.data(), static_cast<Index>(v.size()));
}

std::vector<double> to_list(const VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

/// Per-run running sums of the accountant (before the 1/(sigma C)^2 and kappa factors).
struct RunAccountant {
  explicit RunAccountant(Index n) : trace(VectorXd::Zero(n)), spectral(VectorXd::Zero(n)), sampled(VectorXd::Zero(n)) {}
  VectorXd trace, spectral, sampled;
};

/// Sums over runs of each snapshot's accountant, turned into means at the end.
struct CheckpointSums {
  VectorXd trace, trace_squares, spectral, sampled;
};

/// The state of one training run: parameters, optimiser, generator, sampler, accountant.
class Trainer {
 public:
  Trainer(const Dataset& train, const DpSgdOptions& options, const DpSgdModel& model, std::uint64_t run_seed)
      : train_(train), options_(options), model_(model), run_seed_(run_seed), rng_(run_seed), accountant_(train.n()) {
    w_ = model.initial_parameters(rng_);
    first_moment_ = VectorXd::Zero(w_.size());
    if (options.optimizer == Optimizer::kAdam) second_moment_ = VectorXd::Zero(w_.size());
    order_.resize(train.n());
    for (Index i = 0; i < train.n(); ++i) order_[i] = i;
  }

  /// One DP-SGD step with its accounting.
  void step(Index t) {
    const std::vector<Index> batch = sample_batch();
    const StepAccounting a = model_.step(w_, batch, run_seed_, t);
    for (std::size_t b = 0; b < batch.size(); ++b) {
      accountant_.trace(batch[b]) += a.trace(b);
      accountant_.spectral(batch[b]) += a.spectral(b);
      accountant_.sampled(batch[b]) += 1.0;
    }
    update(a.clipped_sum);
  }

  const VectorXd& parameters() const { return w_; }
  const RunAccountant& accountant() const { return accountant_; }

  nlohmann::json state() const {
    std::ostringstream generator;
    generator << rng_;
    return {{"parameters", to_list(w_)},
            {"first_moment", to_list(first_moment_)},
            {"second_moment", to_list(second_moment_)},
            {"adam_steps", adam_steps_},
            {"generator", generator.str()},
            {"order", order_},
            {"trace", to_list(accountant_.trace)},
            {"spectral", to_list(accountant_.spectral)},
            {"sampled", to_list(accountant_.sampled)}};
  }

  void restore(const nlohmann::json& state) {
    w_ = to_vector(state.at("parameters"));
    first_moment_ = to_vector(state.at("first_moment"));
    second_moment_ = to_vector(state.at("second_moment"));
    adam_steps_ = state.at("adam_steps").get<Index>();
    std::istringstream generator(state.at("generator").get<std::string>());
    generator >> rng_;
    order_ = state.at("order").get<std::vector<Index>>();
    accountant_.trace = to_vector(state.at("trace"));
    accountant_.spectral = to_vector(state.at("spectral"));
    accountant_.sampled = to_vector(state.at("sampled"));
  }

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

  /// Releases the noisy sum and moves the parameters (post-processing of the release).
  void update(VectorXd gradient) {
    std::normal_distribution<double> noise(0.0, options_.noise_multiplier * options_.clip_norm);
    for (Index i = 0; i < gradient.size(); ++i) gradient(i) += noise(rng_);
    gradient = gradient / static_cast<double>(options_.batch_size) + options_.weight_decay * w_;
    if (options_.optimizer == Optimizer::kSgd) {
      first_moment_ = options_.momentum * first_moment_ + gradient;  // the velocity
      w_ -= options_.step_size * first_moment_;
      return;
    }
    ++adam_steps_;
    const double b1 = options_.adam_beta1, b2 = options_.adam_beta2;
    first_moment_ = b1 * first_moment_ + (1.0 - b1) * gradient;
    second_moment_ = b2 * second_moment_ + (1.0 - b2) * gradient.cwiseAbs2();
    const double c1 = 1.0 - std::pow(b1, adam_steps_), c2 = 1.0 - std::pow(b2, adam_steps_);
    w_.array() -= options_.step_size * (first_moment_.array() / c1) /
                  ((second_moment_.array() / c2).sqrt() + options_.adam_epsilon);
  }

  const Dataset& train_;
  const DpSgdOptions& options_;
  const DpSgdModel& model_;
  std::uint64_t run_seed_;
  std::mt19937_64 rng_;
  VectorXd w_, first_moment_, second_moment_;
  Index adam_steps_ = 0;
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

/// The snapshot steps: report epochs rounded to steps, and T, sorted and unique.
std::vector<Index> snapshot_steps(const DpSgdOptions& options, Index n) {
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

namespace {

/// Resuming: what identifies a job (settings and data, not where or how often it saves).
nlohmann::json job_fingerprint(const Dataset& train, const Dataset& test, const DpSgdOptions& options) {
  nlohmann::json settings = to_json(options);
  for (const char* key : {"checkpoint_path", "checkpoint_every", "stop_after"}) settings.erase(key);
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the bytes of X and y
  auto mix = [&hash](const double* data, Index count) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < sizeof(double) * static_cast<std::size_t>(count); ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  };
  for (const Dataset* data : {&train, &test}) {
    mix(data->X.data(), data->X.size());
    mix(data->y.data(), data->y.size());
  }
  return {{"settings", settings}, {"train", {train.n(), train.d()}}, {"test", {test.n(), test.d()}},
          {"data_hash", std::to_string(hash)}};
}

/// The loop's state between steps: everything a resumed call needs besides the current run.
struct JobState {
  int run = 0;           ///< the run in progress
  Index step = 0;        ///< steps done in that run
  nlohmann::json trainer;  ///< the run's Trainer::state() (null when step = 0)
  std::vector<CheckpointSums> sums;
  std::vector<std::vector<double>> train_accuracy, test_accuracy;  ///< per snapshot, one per run so far
  std::vector<std::uint64_t> run_seeds;
  std::vector<VectorXd> parameters;  ///< of the finished runs
  double training_seconds = 0.0, evaluation_seconds = 0.0;
};

void save_state(const std::string& path, const nlohmann::json& fingerprint, const JobState& state) {
  nlohmann::json sums = nlohmann::json::array(), parameters = nlohmann::json::array();
  for (const CheckpointSums& c : state.sums)
    sums.push_back({to_list(c.trace), to_list(c.trace_squares), to_list(c.spectral), to_list(c.sampled)});
  for (const VectorXd& w : state.parameters) parameters.push_back(to_list(w));
  const nlohmann::json json = {{"format", "filkit-dpsgd-state"},
                               {"version", 1},
                               {"job", fingerprint},
                               {"run", state.run},
                               {"step", state.step},
                               {"trainer", state.trainer},
                               {"sums", sums},
                               {"train_accuracy", state.train_accuracy},
                               {"test_accuracy", state.test_accuracy},
                               {"run_seeds", state.run_seeds},
                               {"parameters", parameters},
                               {"training_seconds", state.training_seconds},
                               {"evaluation_seconds", state.evaluation_seconds}};
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(json);  // exact doubles, compact
  write_file_atomically(path, std::string(bytes.begin(), bytes.end()));
}

/// The saved state at `path`, or nullopt when there is none. Throws when it belongs to another job.
std::optional<JobState> load_state(const std::string& path, const nlohmann::json& fingerprint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json json;
  try {
    json = nlohmann::json::from_cbor(bytes);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("checkpoint " + path + ": not a filkit DP-SGD state file (" + e.what() +
                             "); delete it or choose another path");
  }
  if (json.value("format", "") != "filkit-dpsgd-state")
    throw std::runtime_error("checkpoint " + path + ": not a filkit DP-SGD state file; delete it or choose another path");
  const nlohmann::json& saved = json.at("job");
  if (saved != fingerprint) {
    std::string difference = "the data differ";
    for (const auto& [key, value] : fingerprint.at("settings").items())
      if (!saved.at("settings").contains(key) || saved.at("settings").at(key) != value) {
        difference = "setting '" + key + "' was " + saved.at("settings").value(key, nlohmann::json()).dump() +
                     ", now " + value.dump();
        break;
      }
    throw std::runtime_error("checkpoint " + path + " belongs to a different job (" + difference +
                             "): delete it to start afresh, or choose another path");
  }
  JobState state;
  state.run = json.at("run").get<int>();
  state.step = json.at("step").get<Index>();
  state.trainer = json.at("trainer");
  for (const auto& c : json.at("sums"))
    state.sums.push_back({to_vector(c.at(0)), to_vector(c.at(1)), to_vector(c.at(2)), to_vector(c.at(3))});
  state.train_accuracy = json.at("train_accuracy").get<std::vector<std::vector<double>>>();
  state.test_accuracy = json.at("test_accuracy").get<std::vector<std::vector<double>>>();
  state.run_seeds = json.at("run_seeds").get<std::vector<std::uint64_t>>();
  for (const auto& w : json.at("parameters")) state.parameters.push_back(to_vector(w));
  state.training_seconds = json.at("training_seconds").get<double>();
  state.evaluation_seconds = json.at("evaluation_seconds").get<double>();
  return state;
}

}  // namespace

DpSgdOptions DpSgdOptions::resolved() const {
  DpSgdOptions options = *this;
  const bool autodiff = network.has_value();
  if (!options.trace) options.trace = autodiff ? TraceMethod::kGaussian : TraceMethod::kExact;
  if (!options.spectral) options.spectral = autodiff ? SpectralMethod::kNone : SpectralMethod::kExact;
  if (!options.probes) options.probes = autodiff ? 1 : 50;
  return options;
}

DpSgdResult train_dpsgd(const Dataset& train, const Dataset& test, const DpSgdOptions& requested, bool progress) {
  requested.validate();
  const DpSgdOptions options = requested.resolved();
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
  result.num_classes = number_of_classes(train, test, options.network ? ModelKind::kSoftmax : options.kind);
  result.sampling_rate = static_cast<double>(options.batch_size) / n;
  result.step_epsilon = step_epsilon(options.noise_multiplier, options.kappa_delta);
  result.kappa = options.subsampling == SubsamplingFactor::kOne
                     ? 1.0
                     : subsampling_kappa(result.sampling_rate, options.noise_multiplier, options.kappa_delta);
  result.private_dims = train.d() + (options.label == LabelPrivacy::kPrivate
                                         ? (options.kind == ModelKind::kSoftmax ? result.num_classes : 1)
                                         : 0);
  const std::unique_ptr<DpSgdModel> model = make_dpsgd_model(train, options, result.num_classes);
  result.parameter_count = model->parameter_count();
  result.architecture = model->describe();
  const std::vector<Index> steps = snapshot_steps(options, n);

  const nlohmann::json fingerprint = options.checkpoint_path.empty() ? nlohmann::json() : job_fingerprint(train, test, options);
  JobState state;
  if (!options.checkpoint_path.empty()) {
    if (std::optional<JobState> saved = load_state(options.checkpoint_path, fingerprint)) {
      state = std::move(*saved);
      result.resumed = true;
    }
  }
  if (!result.resumed) {
    state.sums.assign(steps.size(), {VectorXd::Zero(n), VectorXd::Zero(n), VectorXd::Zero(n), VectorXd::Zero(n)});
    state.train_accuracy.assign(steps.size(), {});
    state.test_accuracy.assign(steps.size(), {});
  }

  const double scale = result.kappa / std::pow(options.noise_multiplier * options.clip_norm, 2);
  const auto start = std::chrono::steady_clock::now();
  const double evaluation_before = state.evaluation_seconds, training_before = state.training_seconds;
  double evaluation_seconds = 0.0;
  auto elapsed = [&] {
    state.evaluation_seconds = evaluation_before + evaluation_seconds;
    state.training_seconds = training_before + seconds_since(start) - evaluation_seconds;
  };
  Progress bar("dpsgd", static_cast<std::int64_t>(options.runs) * options.steps, !progress);
  bar.advance(static_cast<std::int64_t>(state.run) * options.steps + state.step);
  Index steps_this_call = 0;
  for (int run = state.run; run < options.runs; ++run) {
    const std::uint64_t run_seed = splitmix64(options.seed ^ splitmix64(static_cast<std::uint64_t>(run)));
    Trainer trainer(train, options, *model, run_seed);
    const Index first_step = run == state.run ? state.step + 1 : 1;
    if (first_step > 1) trainer.restore(state.trainer);
    if (first_step == 1) state.run_seeds.push_back(run_seed);
    std::size_t next = std::lower_bound(steps.begin(), steps.end(), first_step) - steps.begin();
    for (Index t = first_step; t <= options.steps; ++t) {
      trainer.step(t);
      bar.advance();
      ++steps_this_call;
      if (next < steps.size() && t == steps[next]) {
        const RunAccountant& a = trainer.accountant();
        CheckpointSums& sums = state.sums[next];
        sums.trace += scale * a.trace;
        sums.trace_squares += (scale * a.trace).cwiseAbs2();
        sums.spectral += scale * a.spectral;
        sums.sampled += a.sampled;
        const auto evaluation_start = std::chrono::steady_clock::now();
        state.train_accuracy[next].push_back(model->accuracy(trainer.parameters(), train));
        state.test_accuracy[next].push_back(test.n() > 0 ? model->accuracy(trainer.parameters(), test)
                                                         : std::numeric_limits<double>::quiet_NaN());
        evaluation_seconds += seconds_since(evaluation_start);
        ++next;
      }
      if (run + 1 == options.runs && t == options.steps) break;  // done: nothing to save
      const bool stop = options.stop_after > 0 && steps_this_call >= options.stop_after;
      const bool periodic = options.checkpoint_every > 0 &&
                            (static_cast<Index>(run) * options.steps + t) % options.checkpoint_every == 0;
      if (options.checkpoint_path.empty() || !(stop || periodic)) continue;
      elapsed();
      JobState saved = state;  // the run in progress, or the next one when this run just finished
      if (t == options.steps) {
        saved.parameters.push_back(trainer.parameters());
        saved.run = run + 1;
        saved.step = 0;
        saved.trainer = nullptr;
      } else {
        saved.run = run;
        saved.step = t;
        saved.trainer = trainer.state();
      }
      save_state(options.checkpoint_path, fingerprint, saved);
      if (stop) {
        bar.finish();
        result.complete = false;
        result.steps_done = static_cast<Index>(run) * options.steps + t;
        result.run_seeds = state.run_seeds;
        return result;
      }
    }
    state.parameters.push_back(trainer.parameters());
  }
  bar.finish();
  elapsed();
  if (!options.checkpoint_path.empty()) std::remove(options.checkpoint_path.c_str());

  result.steps_done = static_cast<Index>(options.runs) * options.steps;
  result.run_seeds = state.run_seeds;
  result.parameters = state.parameters;
  if (model->is_glm())
    for (const VectorXd& w : result.parameters) result.models.push_back(model->glm(w));
  const double runs = options.runs;
  result.snapshots.resize(steps.size());
  for (std::size_t c = 0; c < steps.size(); ++c) {
    DpSgdSnapshot& snapshot = result.snapshots[c];
    snapshot.step = steps[c];
    snapshot.epoch = static_cast<double>(steps[c]) * result.sampling_rate;
    snapshot.fisher_trace = state.sums[c].trace / runs;
    const VectorXd variance = (state.sums[c].trace_squares / runs - snapshot.fisher_trace.cwiseAbs2()).cwiseMax(0.0);
    snapshot.fisher_trace_standard_error =
        options.runs > 1 ? VectorXd((variance / (runs - 1)).cwiseSqrt()) : VectorXd::Zero(n);
    snapshot.fisher_spectral = state.sums[c].spectral / runs;
    snapshot.times_sampled = state.sums[c].sampled / runs;
    snapshot.train_accuracy = state.train_accuracy[c];
    snapshot.test_accuracy = state.test_accuracy[c];
    RdpAccountant accountant;
    accountant.compose(result.sampling_rate, rdp_noise_multiplier(options.noise_multiplier), steps[c]);
    snapshot.privacy = accountant.get_privacy_spent(options.rdp_delta);
    snapshot.rdp_order2 = static_cast<double>(steps[c]) *
                            subsampled_gaussian_rdp(result.sampling_rate, rdp_noise_multiplier(options.noise_multiplier), {2.0})[0];
  }
  result.seconds["evaluation"] = state.evaluation_seconds;
  result.seconds["training"] = state.training_seconds;
  return result;
}

// ---------------------------------------------------------------------------------------------

nlohmann::json to_json(const DpSgdOptions& options) {
  nlohmann::json network = nullptr;
  if (options.network)
    network = {{"architecture", to_string(options.network->architecture)},
               {"hidden", options.network->hidden},
               {"chunk", options.network->chunk}};
  return {{"kind", options.network ? "network" : to_string(options.kind)},
          {"network", network},
          {"intercept", options.intercept},
          {"label", to_string(options.label)},
          {"batch_size", options.batch_size},
          {"sampling", to_string(options.sampling)},
          {"steps", options.steps},
          {"step_size", options.step_size},
          {"clip_norm", options.clip_norm},
          {"noise_multiplier", options.noise_multiplier},
          {"optimizer", to_string(options.optimizer)},
          {"momentum", options.momentum},
          {"adam_beta1", options.adam_beta1},
          {"adam_beta2", options.adam_beta2},
          {"adam_epsilon", options.adam_epsilon},
          {"weight_decay", options.weight_decay},
          {"init_scale", options.init_scale},
          {"subsampling", to_string(options.subsampling)},
          {"kappa_delta", options.kappa_delta},
          {"trace", option_to_json(options.trace)},
          {"spectral", option_to_json(options.spectral)},
          {"probes", option_to_json(options.probes)},
          {"power_iterations", options.power_iterations},
          {"runs", options.runs},
          {"seed", options.seed},
          {"report_epochs", options.report_epochs},
          {"rdp_delta", options.rdp_delta},
          {"checkpoint_path", options.checkpoint_path},
          {"checkpoint_every", options.checkpoint_every},
          {"stop_after", options.stop_after}};
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
  nlohmann::json snapshots_json = nlohmann::json::array();
  for (const DpSgdSnapshot& c : snapshots)
    snapshots_json.push_back({{"step", c.step},
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
          {"parameter_count", parameter_count},
          {"architecture", architecture},
          {"resumed", resumed},
          {"snapshots", snapshots_json},
          {"seconds", seconds}};
}

std::vector<std::string> DpSgdResult::table_header() const {
  return {"step", "epoch", "index", "label", "times_sampled", "eta", "dfil", "attribute_mse_bound",
          "example_mse_bound", "fisher_trace", "fisher_trace_standard_error"};
}

std::vector<std::vector<double>> DpSgdResult::table_rows(const Dataset& train) const {
  std::vector<std::vector<double>> rows;
  for (const DpSgdSnapshot& c : snapshots) {
    const VectorXd eta = c.eta(), dfil = c.dfil(private_dims);
    for (Index i = 0; i < n; ++i)
      rows.push_back({static_cast<double>(c.step), c.epoch, static_cast<double>(i), train.y(i), c.times_sampled(i),
                      eta(i), dfil(i), 1.0 / (eta(i) * eta(i)), 1.0 / (dfil(i) * dfil(i)), c.fisher_trace(i),
                      c.fisher_trace_standard_error(i)});
  }
  return rows;
}

}  // namespace filkit
