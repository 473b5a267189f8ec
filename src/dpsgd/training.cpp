#include "filkit/dpsgd/training.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/base/timing.hpp"

#include "filkit/base/finite.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/run_bootstrap.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/step_privacy.hpp"

#include "base/seeding.hpp"
#include "dpsgd/resume_state.hpp"
#include "dpsgd/trainable_models.hpp"
#include "dpsgd/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>

namespace filkit {

using detail::ExpectedState;
using detail::job_fingerprint;
using detail::load_state;
using detail::refuse_checkpoint;
using detail::ResumeState;
using detail::RunAccountant;
using detail::save_state;
using detail::SnapshotSums;
using detail::Trainer;

VectorXd DpSgdSnapshot::dfil(Index private_dims) const {
  return (fisher_trace / static_cast<double>(private_dims)).cwiseSqrt();
}

VectorXd DpSgdSnapshot::dfil() const {
  if (private_dims < 1) throw std::logic_error("DpSgdSnapshot::dfil(): private_dims is not set");
  return dfil(private_dims);
}

VectorXd DpSgdSnapshot::eta() const { return fisher_spectral.cwiseSqrt(); }

namespace {

// The snapshot's privacy: the RDP curve always, and eps by the accountant the options name, both
// for the sampler's neighbouring relation and the smooth clip's noise multiplier sigma / 1.11524.
void account_snapshot(DpSgdSnapshot& snapshot, const DpSgdOptions& options, double sample_rate) {
  const NeighbouringRelation relation = neighbouring_relation(options.sampling);
  const double sigma = rdp_noise_multiplier(options.noise_multiplier);
  RdpAccountant rdp(rdp_orders(OrderGrid::kOpacus), relation);
  rdp.step(sigma, sample_rate, snapshot.step);
  snapshot.privacy = rdp.get_privacy_spent(options.rdp_delta);
  RdpAccountant order2({2.0}, relation);
  order2.step(sigma, sample_rate, snapshot.step);
  snapshot.rdp_order2 = order2.rdp()[0];
  snapshot.epsilon = snapshot.privacy.eps;
  if (options.accountant == AccountantKind::kPld) {
    PldAccountant pld(relation, PldSettings{options.discretization});
    pld.step(sigma, sample_rate, snapshot.step);
    snapshot.epsilon = pld.epsilon(options.rdp_delta);
    snapshot.pld_infinity_mass = pld.infinity_mass();
  }
}

}  // namespace

double DpSgdSnapshot::rdp_mse_bound() const { return 1.0 / (4.0 * std::expm1(rdp_order2)); }

double DpSgdSnapshot::mean_test_accuracy() const { return mean_of(test_accuracy); }
double DpSgdSnapshot::mean_train_accuracy() const { return mean_of(train_accuracy); }

namespace {

/// K: the largest label over every rank's train and test rows, plus one (at least 2).
Index number_of_classes(const Dataset& train, const Dataset& test, ModelKind kind, const Communicator& comm) {
  // Rows are named by their global index.
  const Index offsets[] = {comm.exclusive_prefix_sum(train.n()), comm.exclusive_prefix_sum(test.n())};
  const Index K = comm.max(class_count({{train, "train", offsets[0]}, {test, "test", offsets[1]}}));
  if (kind == ModelKind::kLogistic && K > 2) {  // every rank throws: K is over all ranks
    for (const Dataset* data : {&train, &test})
      for (Index i = 0; i < data->n(); ++i)
        if (data->y(i) > 1)
          throw DataError("train_dpsgd: " + std::string(data == &train ? "train" : "test") + " row " +
                          std::to_string(offsets[data == &train ? 0 : 1] + i) + " has label " +
                          shown_value(data->y(i)) + ": logistic regression needs labels in {0, 1}");
    throw DataError("train_dpsgd: logistic regression needs labels in {0, 1}, and another rank's rows have label " +
                    std::to_string(K - 1));
  }
  return K;
}

/// The fraction of every rank's rows of `data` that `w` classifies correctly (NaN without rows).
double accuracy_over_ranks(const TrainableModel& model, const VectorXd& w, const Dataset& data,
                           const Communicator& comm) {
  return share_over_ranks(data.n() > 0 ? model.accuracy(w, data) : std::numeric_limits<double>::quiet_NaN(), data.n(),
                          comm);
}

/// Every per-example vector of a resume state (each over this process's rows, or over all n).
template <class Visit>
void for_each_per_example_vector(ResumeState& state, const Visit& visit) {
  for (SnapshotSums& sums : state.sums) {
    for (VectorXd& trace : sums.trace_per_run) visit(trace);
    visit(sums.spectral);
    visit(sums.sampled);
  }
  if (state.trainer) {
    visit(state.trainer->accountant.trace);
    visit(state.trainer->accountant.spectral);
    visit(state.trainer->accountant.sampled);
  }
}

/// A state over all n rows (a resume file, written by any number of ranks) cut to this rank's rows.
void keep_own_rows(ResumeState& state, Index first_row, Index rows) {
  for_each_per_example_vector(state, [&](VectorXd& v) { v = VectorXd(v.segment(first_row, rows)); });
}

/// At rank 0 the state over all n rows (what one process would save); elsewhere the per-example
/// vectors are empty. Collective.
ResumeState gathered_state(ResumeState state, const Communicator& comm) {
  for_each_per_example_vector(state, [&](VectorXd& v) { v = comm.gather(v); });
  return state;
}

/// The snapshot steps: report epochs rounded to steps, and T, sorted and unique.
std::vector<Index> snapshot_steps(const DpSgdOptions& options, Index n) {
  std::vector<Index> steps{options.steps};
  for (double epoch : options.report_epochs) {
    // Compared before rounding: llround of a step beyond 2^63 (epochs 1e300) is undefined.
    const double exact = epoch * static_cast<double>(n) / static_cast<double>(options.batch_size);
    if (!(exact < static_cast<double>(options.steps) + 0.5))
      option_error("report_epochs", format_double(epoch),
                   "is step " + format_double(std::round(exact)) + " (epoch x n / " + option_name("batch_size") +
                       "), beyond " + option_name("steps") + " = " + std::to_string(options.steps));
    steps.push_back(std::max<Index>(1, std::llround(exact)));
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

std::string training_stage(int run, Index step) {
  return "training (run " + std::to_string(run) + ", step " + std::to_string(step) + ")";
}

// Why parameters or accounted Fisher information stop being finite: training diverged.
Message divergence_cause(const DpSgdOptions& options) {
  return "training diverged: " + option_name("step_size") + " = " + format_double(options.step_size) +
         " is likely too large (try 0.01 to 1), or the data far from unit scale";
}

// The accountant's sums of one run at a snapshot: traces always, spectral norms when computed.
void require_finite_accounting(const RunAccountant& a, const DpSgdOptions& options, const std::string& stage) {
  require_finite(a.trace, stage, "the accounted Tr(G^T G) of an example (its dFIL)", divergence_cause(options));
  if (options.spectral != SpectralMethod::kNone)
    require_finite(a.spectral, stage, "the accounted ||G||_2^2 of an example (its eta)", divergence_cause(options));
}

std::uint64_t run_seed(const DpSgdOptions& options, int run) { return dpsgd_run_seed(options, run); }

// A stream apart from the runs' (theirs mix the seed with splitmix64 of the run index).
std::uint64_t bootstrap_seed(const DpSgdOptions& options) { return splitmix64(~splitmix64(options.seed)); }

/// Refuses, before training, per-run traces (with their copies) beyond the memory budget.
void check_per_run_trace_memory(const DpSgdOptions& options, Index n, std::size_t snapshots) {
  const std::uint64_t doubles = saturating_product(
      saturating_product(static_cast<std::uint64_t>(snapshots), static_cast<std::uint64_t>(options.runs)),
      static_cast<std::uint64_t>(n));
  const std::uint64_t copies = options.checkpoint_path.empty() ? 2 : 6;  // see DpSgdOptions::max_memory
  check_memory(saturating_product(doubles, copies * sizeof(double)), options.max_memory,
               "keeping each run's per-example traces for the confidence intervals (" + std::to_string(snapshots) +
                   " snapshots x " + std::to_string(options.runs) + " runs x " + std::to_string(n) + " examples, " +
                   std::to_string(copies) + " copies)");
}

/// Each run's traces as rows.
MatrixXd rows_of(const std::vector<VectorXd>& runs, Index n) {
  MatrixXd matrix(static_cast<Index>(runs.size()), n);
  for (std::size_t r = 0; r < runs.size(); ++r) matrix.row(static_cast<Index>(r)) = runs[r].transpose();
  return matrix;
}

/// The standard error over runs of each column's mean (0 for one run).
VectorXd standard_error_of_mean(const MatrixXd& per_run, const VectorXd& mean) {
  const Index runs = per_run.rows();
  if (runs < 2) return VectorXd::Zero(per_run.cols());
  const VectorXd squares = (per_run.rowwise() - mean.transpose()).colwise().squaredNorm().transpose();
  return (squares / static_cast<double>(runs - 1) / static_cast<double>(runs)).cwiseSqrt();
}

/// What a resume file of this call must agree with (n: rows over all ranks).
ExpectedState expected_state(const Dataset& train, const Dataset& test, Index n, const DpSgdOptions& options,
                             const TrainableModel& model, const std::vector<Index>& steps, const Communicator& comm) {
  ExpectedState expected;
  expected.fingerprint = job_fingerprint(train, test, options, comm);
  // The network as resolved (a TorchScript module's layers) and the module file's contents: a
  // resume after either changed would mix two networks in one run.
  if (const std::string network = model.describe(); !network.empty()) expected.fingerprint["network"] = network;
  // What a model that trains besides the parameters was built from (fim: its method, gradient
  // model settings, pre-trained start and public part).
  if (nlohmann::json built = model.resume_fingerprint(); !built.is_null())
    expected.fingerprint["model"] = std::move(built);
  if (options.network && !options.network->torchscript.empty())
    expected.fingerprint["torchscript_sha256"] = file_sha256_hex(options.network->torchscript);
  expected.runs = options.runs;
  expected.steps = options.steps;
  expected.max_memory = options.max_memory;
  expected.n = n;
  expected.parameter_count = model.parameter_count();
  expected.snapshot_steps = steps;
  for (int run = 0; run < options.runs; ++run) expected.run_seeds.push_back(run_seed(options, run));
  expected.adam = options.optimizer == Optimizer::kAdam;
  expected.spectral_computed = options.spectral != SpectralMethod::kNone;
  expected.has_test = comm.sum(test.n()) > 0;
  return expected;
}

}  // namespace

std::uint64_t dpsgd_run_seed(const DpSgdOptions& options, int run) {
  return splitmix64(options.seed ^ splitmix64(static_cast<std::uint64_t>(run)));
}

namespace {

/// What the stages of train_runs share: the data, the options as resolved, the snapshot steps and
/// each run's model.
struct TrainingRuns {
  TrainingRuns(const Dataset& train_rows, const Dataset& test_rows, DpSgdOptions resolved, const Communicator& ranks,
               Index all_rows, Index first)
      : train(train_rows), test(test_rows), options(std::move(resolved)), comm(ranks), n(all_rows), first_row(first) {}

  const Dataset& train;
  const Dataset& test;
  const DpSgdOptions options;
  const Communicator& comm;
  const Index n;          ///< training examples over all ranks
  const Index first_row;  ///< this rank's first row in the whole
  std::vector<Index> steps;
  std::unique_ptr<TrainableModel> shared_model;  ///< when every run trains the same model
  const TrainableModelOfRun* model_of_run = nullptr;
  ExpectedState expected;

  TrainableModel& model(int run) const {
    return model_of_run == nullptr ? *shared_model : (*model_of_run)(run, run_seed(options, run));
  }
};

/// Checks the data against the options and fills what the result states before any step: n, K,
/// the sampling rate, kappa and the private dimensions.
DpSgdResult result_before_training(const TrainingRuns& r) {
  const DpSgdOptions& options = r.options;
  r.train.validate();
  if (r.test.n() > 0) r.test.validate();
  if (r.test.n() > 0 && r.test.d() != r.train.d())
    throw DataError("train_dpsgd: test has " + std::to_string(r.test.d()) + " features, train " +
                    std::to_string(r.train.d()));
  if (options.batch_size > r.n)
    option_error("batch_size", std::to_string(options.batch_size), "must be <= n = " + std::to_string(r.n));
  DpSgdResult result;
  result.n = r.n;
  result.num_classes = number_of_classes(r.train, r.test, options.network ? ModelKind::kSoftmax : options.kind, r.comm);
  result.sampling_rate = static_cast<double>(options.batch_size) / r.n;
  result.kappa_delta = *options.kappa_delta;
  result.step_epsilon = step_epsilon(options.noise_multiplier, result.kappa_delta);
  result.kappa = options.subsampling == SubsamplingFactor::kOne
                     ? 1.0
                     : subsampling_kappa(result.sampling_rate, options.noise_multiplier, result.kappa_delta);
  result.private_dims =
      r.train.d() +
      (options.label == LabelPrivacy::kPrivate ? (options.kind == ModelKind::kSoftmax ? result.num_classes : 1) : 0);
  return result;
}

/// The state saved in the resume file, each started run's model restored from it (`resumed` set),
/// or a fresh state.
ResumeState resume_or_start(const TrainingRuns& r, bool& resumed) {
  const DpSgdOptions& options = r.options;
  ResumeState state;
  resumed = false;
  if (!options.checkpoint_path.empty()) {
    // Every rank reads the file (written over all n rows by rank 0, on any number of ranks) and
    // keeps its own rows.
    std::optional<ResumeState> saved = load_state(options.checkpoint_path, r.expected);
    const bool anywhere = !r.comm.all(!saved.has_value());
    if (anywhere && !r.comm.all(saved.has_value()))
      throw ResourceError("checkpoint " + options.checkpoint_path +
                          ": found by some MPI ranks and not by "
                          "others; on several machines it must be on a file system they share");
    if (saved) {
      state = std::move(*saved);
      keep_own_rows(state, r.first_row, r.train.n());
      resumed = true;
      // Each started run's model as it was: the finished runs' (their diagnostics) and the one in progress.
      for (std::size_t i = 0; i < state.model_states.size(); ++i) {
        const int run = static_cast<int>(i);
        try {
          r.model(run).restore(state.model_states[i], run < state.run ? options.steps : state.step);
        } catch (const DataError& error) {  // "'field' problem" -> "'model_states[i].field' problem"
          const std::string field = "model_states[" + std::to_string(i) + "]", what = error.what();
          refuse_checkpoint(options.checkpoint_path,
                            what.starts_with("'") ? "'" + field + "." + what.substr(1) : "'" + field + "' " + what);
        }
      }
    }
  }
  if (!resumed) {
    state.sums.assign(r.steps.size(), {{}, VectorXd::Zero(r.train.n()), VectorXd::Zero(r.train.n())});
    state.train_accuracy.assign(r.steps.size(), {});
    state.test_accuracy.assign(r.steps.size(), {});
  }
  return state;
}

/// Trains the runs and steps `state` has not done (each run's model of `parameter_count`), adding each snapshot's
/// accounting and accuracies to it and saving it every checkpoint_every steps. Returns the steps done over all runs
/// when it stops early (stop_after), after saving; nullopt when every run is done.
std::optional<Index> train_remaining_runs(const TrainingRuns& r, ResumeState& state, Index parameter_count,
                                          double scale, bool progress, const std::string& label) {
  const DpSgdOptions& options = r.options;
  const auto start = std::chrono::steady_clock::now();
  const double evaluation_before = state.evaluation_seconds, training_before = state.training_seconds;
  double evaluation_seconds = 0.0;
  auto elapsed = [&] {
    state.evaluation_seconds = evaluation_before + evaluation_seconds;
    state.training_seconds = training_before + seconds_since(start) - evaluation_seconds;
  };
  Progress bar(label, static_cast<std::int64_t>(options.runs) * options.steps, !progress || !r.comm.is_root());
  bar.resume_at(static_cast<std::int64_t>(state.run) * options.steps + state.step);
  Index steps_this_call = 0;
  for (int run = state.run; run < options.runs; ++run) {
    TrainableModel& model = r.model(run);
    if (model.parameter_count() != parameter_count)
      throw std::logic_error("train_dpsgd: the models of the runs differ in size");
    Trainer trainer(r.train, options, model, run_seed(options, run), r.first_row, r.n, r.comm);
    const Index first_step = run == state.run ? state.step + 1 : 1;
    if (first_step > 1) trainer.restore(*state.trainer);
    if (first_step == 1) state.run_seeds.push_back(run_seed(options, run));
    std::size_t next = std::lower_bound(r.steps.begin(), r.steps.end(), first_step) - r.steps.begin();
    for (Index t = first_step; t <= options.steps; ++t) {
      trainer.step(t);
      if (!trainer.parameters().allFinite())  // the message only when needed: steps can take microseconds
        require_finite(trainer.parameters(), training_stage(run, t), "a parameter", divergence_cause(options));
      bar.advance();
      ++steps_this_call;
      if (next < r.steps.size() && t == r.steps[next]) {
        const RunAccountant& a = trainer.accountant();
        require_finite_accounting(a, options, training_stage(run, t));
        SnapshotSums& sums = state.sums[next];
        sums.trace_per_run.push_back(scale * a.trace);
        sums.spectral += scale * a.spectral;
        sums.sampled += a.sampled;
        const auto evaluation_start = std::chrono::steady_clock::now();
        state.train_accuracy[next].push_back(accuracy_over_ranks(model, trainer.parameters(), r.train, r.comm));
        state.test_accuracy[next].push_back(accuracy_over_ranks(model, trainer.parameters(), r.test, r.comm));
        evaluation_seconds += seconds_since(evaluation_start);
        ++next;
      }
      if (run + 1 == options.runs && t == options.steps) break;  // done: nothing to save
      const bool stop = options.stop_after > 0 && steps_this_call >= options.stop_after;
      const bool periodic =
          options.checkpoint_every > 0 && (static_cast<Index>(run) * options.steps + t) % options.checkpoint_every == 0;
      if (options.checkpoint_path.empty() || !(stop || periodic)) continue;
      elapsed();
      ResumeState saved = state;  // the run in progress, or the next one when this run just finished
      saved.model_states.clear();
      for (int i = 0; i <= run; ++i) saved.model_states.push_back(r.model(i).resume_state());
      if (t == options.steps) {
        saved.parameters.push_back(trainer.parameters());
        saved.run = run + 1;
        saved.step = 0;
        saved.trainer.reset();
      } else {
        saved.run = run;
        saved.step = t;
        saved.trainer = trainer.state();
      }
      if (r.comm.distributed()) saved = gathered_state(std::move(saved), r.comm);
      if (r.comm.is_root()) save_state(options.checkpoint_path, r.expected.fingerprint, saved);
      if (stop) {
        bar.finish();
        return static_cast<Index>(run) * options.steps + t;
      }
    }
    state.parameters.push_back(trainer.parameters());
  }
  bar.finish();
  elapsed();
  return std::nullopt;
}

/// Snapshot `snapshot` of `result` from its per-run traces (fisher_trace_per_run, R x n) and
/// accuracies, set by the caller, and the runs' summed spectral norms and times sampled: the mean
/// trace and its standard error over runs, the bootstrap intervals of max and median dFIL and the
/// privacy spent. Returns the bootstrap's seconds.
double summarise_snapshot(DpSgdSnapshot& snapshot, const DpSgdOptions& options, const DpSgdResult& result,
                          const VectorXd& spectral_sum, const VectorXd& sampled_sum) {
  const double runs = options.runs;
  const auto dfil_of_trace = [d = static_cast<double>(result.private_dims)](double trace) {
    return std::sqrt(trace / d);
  };
  snapshot.private_dims = result.private_dims;
  snapshot.epoch = static_cast<double>(snapshot.step) * result.sampling_rate;
  snapshot.fisher_trace = mean_over_runs(snapshot.fisher_trace_per_run);
  snapshot.fisher_trace_standard_error = standard_error_of_mean(snapshot.fisher_trace_per_run, snapshot.fisher_trace);
  snapshot.fisher_spectral = spectral_sum / runs;
  require_finite(snapshot.dfil(result.private_dims), "accounting (step " + std::to_string(snapshot.step) + ")",
                 "dFIL of an example",
                 "the accounted Fisher information overflows: clip_norm x noise_multiplier "
                 "may be too small, or steps too many");
  const auto bootstrap_start = std::chrono::steady_clock::now();
  snapshot.dfil_over_runs = bootstrap_over_runs(snapshot.fisher_trace_per_run, dfil_of_trace, options.confidence_level,
                                                options.bootstrap_resamples, result.bootstrap_seed);
  const double bootstrap_seconds = seconds_since(bootstrap_start);
  snapshot.times_sampled = sampled_sum / runs;
  account_snapshot(snapshot, options, result.sampling_rate);
  return bootstrap_seconds;
}

/// The snapshots of `result` from the summed accounting of every run (rank 0, after the gather).
void summarise_snapshots(const TrainingRuns& r, ResumeState& state, DpSgdResult& result) {
  result.bootstrap_seed = bootstrap_seed(r.options);
  result.snapshots.resize(r.steps.size());
  double bootstrap_seconds = 0.0;
  for (std::size_t c = 0; c < r.steps.size(); ++c) {
    DpSgdSnapshot& snapshot = result.snapshots[c];
    snapshot.step = r.steps[c];
    snapshot.fisher_trace_per_run = rows_of(state.sums[c].trace_per_run, r.n);
    state.sums[c].trace_per_run.clear();  // held once
    snapshot.train_accuracy = state.train_accuracy[c];
    snapshot.test_accuracy = state.test_accuracy[c];
    bootstrap_seconds += summarise_snapshot(snapshot, r.options, result, state.sums[c].spectral, state.sums[c].sampled);
  }
  result.seconds["evaluation"] = state.evaluation_seconds;
  result.seconds["training"] = state.training_seconds;
  result.seconds["bootstrap"] = bootstrap_seconds;
}

/// The stages before any step: the result's constants (result_before_training), the models, the
/// snapshot steps and the memory check.
DpSgdResult prepare_runs(TrainingRuns& r, const TrainableModelOfRun* model_of_run) {
  DpSgdResult result = result_before_training(r);
  r.model_of_run = model_of_run;
  if (model_of_run == nullptr) r.shared_model = make_trainable_model(r.train, r.options, result.num_classes);
  const TrainableModel& first_model = r.model(0);
  result.parameter_count = first_model.parameter_count();
  result.architecture = first_model.describe();
  r.steps = snapshot_steps(r.options, r.n);
  check_per_run_trace_memory(r.options, r.n, r.steps.size());
  return result;
}

/// The result of every run done: `state` (this rank's rows) gathered over the ranks and summarised.
DpSgdResult finish_runs(const TrainingRuns& r, ResumeState& state, DpSgdResult result) {
  const DpSgdOptions& options = r.options;
  result.steps_done = static_cast<Index>(options.runs) * options.steps;
  result.run_seeds = state.run_seeds;
  result.parameters = state.parameters;
  const TrainableModel& last_model = r.model(options.runs - 1);
  if (last_model.is_glm())
    for (const VectorXd& w : result.parameters) {
      result.models.push_back(last_model.glm(w));
      result.models.back().n_train = r.n;
    }
  if (r.comm.distributed()) {  // rank 0 gathers every rank's accounting; the others are done
    state = gathered_state(std::move(state), r.comm);
    if (!r.comm.is_root()) {
      result.seconds["training"] = state.training_seconds;
      return result;
    }
  }
  summarise_snapshots(r, state, result);
  return result;
}

/// What identifies run `run` of a call with `whole` (resolved) in its run file: the call's
/// fingerprint (settings and data) and the run. Collective.
nlohmann::json run_file_fingerprint(const TrainingRuns& r, const DpSgdOptions& whole, int run) {
  nlohmann::json fingerprint = expected_state(r.train, r.test, r.n, whole, r.model(0), r.steps, r.comm).fingerprint;
  fingerprint["run_alone"] = run;
  return fingerprint;
}

/// Where train_dpsgd_run writes its run: run `run` of a call with `whole` (as requested).
struct RunFileOut {
  const DpSgdOptions& whole;
  int run = 0;
  const std::string& path;
};

/// Writes the run file of the one run r trained (state: every run done): the state of that call,
/// finished, under the fingerprint of run `out.run` of the whole call. Collective; rank 0 writes.
void write_run_file(const TrainingRuns& r, const ResumeState& state, const RunFileOut& out) {
  const nlohmann::json fingerprint = run_file_fingerprint(r, out.whole.resolved(r.n), out.run);
  ResumeState saved = state;
  saved.run = r.options.runs;
  saved.step = 0;
  saved.trainer.reset();
  saved.model_states = {r.model(0).resume_state()};
  if (r.comm.distributed()) saved = gathered_state(std::move(saved), r.comm);
  if (r.comm.is_root()) save_state(out.path, fingerprint, saved);
}

/// train_dpsgd, train_dpsgd_with_models and train_dpsgd_run: the runs from their start or a resume
/// file, then (train_dpsgd_run) the run file, the gather over ranks and the snapshots.
DpSgdResult train_runs(const Dataset& train, const Dataset& test, const DpSgdOptions& requested, bool progress,
                       CheckpointWhenDone when_done, const TrainableModelOfRun* model_of_run, const std::string& label,
                       const Communicator& comm, const RunFileOut* run_file = nullptr) {
  requested.validate();
  const Index n = comm.sum(train.n());  // over all ranks; this process holds rows first_row ..
  TrainingRuns r(train, test, requested.resolved(n), comm, n, comm.exclusive_prefix_sum(train.n()));
  const DpSgdOptions& options = r.options;
  if (!options.checkpoint_path.empty()) check_output_path("checkpoint", options.checkpoint_path);
  DpSgdResult result = prepare_runs(r, model_of_run);
  if (!options.checkpoint_path.empty()) r.expected = expected_state(train, test, n, options, r.model(0), r.steps, comm);

  ResumeState state = resume_or_start(r, result.resumed);
  const double scale = result.kappa / std::pow(options.noise_multiplier * options.clip_norm, 2);
  require_finite(scale, "accounting", "kappa / (noise_multiplier x clip_norm)^2",
                 option_name("noise_multiplier") + " x " + option_name("clip_norm") +
                     " is too small for its square to be represented");
  if (const std::optional<Index> stopped =
          train_remaining_runs(r, state, result.parameter_count, scale, progress, label)) {
    result.complete = false;
    result.steps_done = *stopped;
    result.run_seeds = state.run_seeds;
    return result;
  }
  if (run_file != nullptr) write_run_file(r, state, *run_file);
  if (!options.checkpoint_path.empty() && when_done == CheckpointWhenDone::kRemove && comm.is_root())
    std::remove(options.checkpoint_path.c_str());
  return finish_runs(r, state, std::move(result));
}

/// Refuses float32 for the closed-form GLMs.
void check_precision(const DpSgdOptions& options) {
  if (options.precision == Precision::kFloat32 && !options.network)
    option_error("precision", "float32",
                 "is offered for networks (" + option_name("model") +
                     " = mlp, cnn, cifar-cnn or custom) and private training with public data: the closed-form GLMs "
                     "compute in float64 only");
}

}  // namespace

DpSgdResult train_dpsgd(const Dataset& train, const Dataset& test, const DpSgdOptions& requested, bool progress,
                        CheckpointWhenDone when_done, const Communicator& comm) {
  check_precision(requested);
  return train_runs(train, test, requested, progress, when_done, nullptr, "dpsgd", comm);
}

void check_run_index(const DpSgdOptions& options, int run) {
  if (run < 0 || run >= options.runs)
    option_error(
        "run", std::to_string(run),
        "must be a run of the call: 0 .. " + option_name("runs") + " - 1 = " + std::to_string(options.runs - 1));
}

DpSgdResult train_dpsgd_run(const Dataset& train, const Dataset& test, const DpSgdOptions& options, int run,
                            const std::string& path, bool progress, CheckpointWhenDone when_done,
                            const Communicator& comm) {
  check_precision(options);
  options.validate();
  check_run_index(options, run);
  check_output_path("run_dir", path);
  DpSgdOptions alone = options;
  alone.runs = 1;
  alone.seed = seed_of_run_alone(options, run);
  const RunFileOut out{options, run, path};
  return train_runs(train, test, alone, progress, when_done, nullptr, "dpsgd", comm, &out);
}

DpSgdResult combine_dpsgd_run_files(const Dataset& train, const Dataset& test, const DpSgdOptions& requested,
                                    const std::vector<std::string>& paths, const Communicator& comm) {
  check_precision(requested);
  requested.validate();
  if (std::ssize(paths) != requested.runs)
    throw std::logic_error("combine_dpsgd_run_files: " + std::to_string(paths.size()) +
                           " run files for runs = " + std::to_string(requested.runs));
  const Index n = comm.sum(train.n());
  TrainingRuns r(train, test, requested.resolved(n), comm, n, comm.exclusive_prefix_sum(train.n()));
  const DpSgdOptions& options = r.options;
  DpSgdResult result = prepare_runs(r, nullptr);
  // Each file is the finished state of a call of its run alone, over all n rows (any rank count).
  ExpectedState expected = expected_state(train, test, n, options, r.model(0), r.steps, comm);
  expected.kind = &detail::kRunFile;
  expected.runs = 1;
  // The sums of one call, formed in its order: from zero, run after run.
  ResumeState state;
  state.sums.assign(r.steps.size(), {{}, VectorXd::Zero(n), VectorXd::Zero(n)});
  state.train_accuracy.assign(r.steps.size(), {});
  state.test_accuracy.assign(r.steps.size(), {});
  for (int run = 0; run < options.runs; ++run) {
    const std::string& path = paths[static_cast<std::size_t>(run)];
    expected.fingerprint["run_alone"] = run;
    expected.run_seeds = {run_seed(options, run)};
    std::optional<ResumeState> one = load_state(path, expected);
    if (!one)
      throw DataError("run file " + path + " does not exist: run " + std::to_string(run) + " of " +
                      option_name("runs") + " " + std::to_string(options.runs) + " is not trained yet (" +
                      option_name("run") + " " + std::to_string(run) + " writes it)");
    for (std::size_t c = 0; c < r.steps.size(); ++c) {
      state.sums[c].trace_per_run.push_back(std::move(one->sums[c].trace_per_run.front()));
      state.sums[c].spectral += one->sums[c].spectral;
      state.sums[c].sampled += one->sums[c].sampled;
      state.train_accuracy[c].push_back(one->train_accuracy[c].front());
      state.test_accuracy[c].push_back(one->test_accuracy[c].front());
    }
    state.run_seeds.push_back(one->run_seeds.front());
    state.parameters.push_back(std::move(one->parameters.front()));
    state.model_states.push_back(std::move(one->model_states.front()));
    state.training_seconds += one->training_seconds;
    state.evaluation_seconds += one->evaluation_seconds;
  }
  state.run = options.runs;
  keep_own_rows(state, r.first_row, r.train.n());
  return finish_runs(r, state, std::move(result));
}

DpSgdResult train_dpsgd_with_models(const Dataset& train, const Dataset& test, const DpSgdOptions& options,
                                    const TrainableModelOfRun& model_of_run, bool progress,
                                    const std::string& progress_label, CheckpointWhenDone when_done,
                                    const Communicator& comm) {
  return train_runs(train, test, options, progress, when_done, &model_of_run, progress_label, comm);
}

std::uint64_t seed_of_run_alone(const DpSgdOptions& options, int run) {
  // dpsgd_run_seed mixes the seed with splitmix64(run) by exclusive or, which undoes itself.
  return options.seed ^ splitmix64(static_cast<std::uint64_t>(run)) ^ splitmix64(0);
}

DpSgdResult combine_runs(const std::vector<DpSgdResult>& runs, const DpSgdOptions& options) {
  if (runs.size() != static_cast<std::size_t>(options.runs))
    throw std::logic_error("combine_runs: " + std::to_string(runs.size()) + " results for " +
                           std::to_string(options.runs) + " runs");
  const DpSgdResult& first = runs.front();
  for (const DpSgdResult& run : runs)
    if (!run.complete || run.parameters.size() != 1 || run.snapshots.size() != first.snapshots.size())
      throw std::logic_error("combine_runs: every result must be one complete run with the same snapshots");
  DpSgdResult result = first;  // the constants of the data and options, the same for every run
  result.run_seeds.clear();
  result.parameters.clear();
  result.models.clear();
  result.seconds.clear();
  result.steps_done = 0;
  result.resumed = false;
  result.bootstrap_seed = bootstrap_seed(options);
  for (const DpSgdResult& run : runs) {
    result.run_seeds.insert(result.run_seeds.end(), run.run_seeds.begin(), run.run_seeds.end());
    result.parameters.push_back(run.parameters.front());
    result.models.insert(result.models.end(), run.models.begin(), run.models.end());
    for (const auto& [name, seconds] : run.seconds) result.seconds[name] += seconds;
    result.steps_done += run.steps_done;
  }
  for (std::size_t c = 0; c < result.snapshots.size(); ++c) {
    DpSgdSnapshot& snapshot = result.snapshots[c];
    const Index n = first.snapshots[c].fisher_trace_per_run.cols();
    // The sums of one call, formed in its order: from zero, run after run (a single run's
    // fisher_spectral and times_sampled are its sums divided by 1, exactly).
    VectorXd spectral = VectorXd::Zero(n), sampled = VectorXd::Zero(n);
    snapshot.fisher_trace_per_run.resize(options.runs, n);
    snapshot.train_accuracy.clear();
    snapshot.test_accuracy.clear();
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const DpSgdSnapshot& alone = runs[r].snapshots[c];
      if (alone.step != snapshot.step || alone.fisher_trace_per_run.rows() != 1 ||
          alone.fisher_trace_per_run.cols() != n)
        throw std::logic_error("combine_runs: run " + std::to_string(r) + "'s snapshot " + std::to_string(c) +
                               " differs in step or size");
      snapshot.fisher_trace_per_run.row(static_cast<Index>(r)) = alone.fisher_trace_per_run.row(0);
      spectral += alone.fisher_spectral;
      sampled += alone.times_sampled;
      snapshot.train_accuracy.push_back(alone.train_accuracy.front());
      snapshot.test_accuracy.push_back(alone.test_accuracy.front());
    }
    summarise_snapshot(snapshot, options, result, spectral, sampled);
  }
  return result;
}

}  // namespace filkit
