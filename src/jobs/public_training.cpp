#include "filkit/jobs/public_training.hpp"
#include "filkit/jobs/task.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/communicator.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/privacy/step_privacy.hpp"
#include "dpsgd/trainable_models.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <utility>

namespace filkit {

PublicDataTrainingOptions PublicTrainingJobOptions::default_training() {
  PublicDataTrainingOptions t;
  t.public_fraction = 0.5;
  t.freeze_fraction = 0.5;                                                                   // parameter density 0.5
  t.pretrain = {.steps = 1760, .batch_size = 512, .step_size = 0.01, .weight_decay = 1e-4};  // 30 epochs of 30000
  DpSgdOptions& p = t.private_phase;
  p.kind = ModelKind::kSoftmax;
  p.batch_size = 512;
  p.steps = 59;  // one epoch of the 30000 private examples
  p.step_size = 0.01;
  p.optimizer = Optimizer::kAdam;
  p.weight_decay = 1e-5;
  p.noise_multiplier = 0.5;
  p.clip_norm = 10.0;
  p.kappa_delta = 1e-9;  // the thesis' delta
  p.rdp_delta = 1e-9;
  p.spectral = SpectralMethod::kNone;
  return t;
}

PublicDataTrainingOptions PublicTrainingJobOptions::training_options() const {
  PublicDataTrainingOptions t = training;
  if (model == ModelChoice::kLogistic)
    option_error("model", "logistic", "use softmax (any number of classes, 2 included)");
  if (model != ModelChoice::kCustom && (!network.layers.empty() || !network.torchscript.empty()))
    option_error(network.layers.empty() ? "torchscript" : "arch", "a custom network needs " + option_name("model") +
                                                                      " = custom (" + option_name("model") + " is " +
                                                                      to_string(model) + ")");
  t.private_phase.kind = ModelKind::kSoftmax;
  t.private_phase.max_memory = data.max_memory;  // the budget of the networks and the gradient model
  t.private_phase.network.reset();
  if (model != ModelChoice::kSoftmax) {
    NetworkOptions net = network;
    net.architecture = network_architecture(model);
    net.max_memory = data.max_memory.bytes;
    net.batch_rows = std::max(t.private_phase.batch_size, t.pretrain.batch_size);
    t.private_phase.network = net;
  }
  return t;
}

void PublicTrainingJobOptions::validate() const {
  data.validate();
  for (Index width : network.hidden) require_positive("hidden", width);
  const PublicDataTrainingOptions t = training_options();
  t.validate();
  refuse_repeats("methods", t.methods);
  bounded_iterations({{"pretrain_steps", t.pretrain.steps}}, "pre-training steps");
  const DpSgdOptions& p = t.private_phase;
  bounded_iterations({{"steps", p.steps}, {"runs", p.runs}, {"methods", static_cast<long long>(t.methods.size())}},
                     "private steps");
  // Before each private step the gradient model takes at most max(gradient_steps, gradient_min_steps).
  bounded_iterations({{"steps", p.steps},
                      {"runs", p.runs},
                      {"max(" + option_name("gradient_steps") + ", " + option_name("gradient_min_steps") + ")",
                       std::max(t.gradient_model.steps, t.gradient_model.min_steps)}},
                     "gradient-model steps");
  // steps_before forms (t - 1) gradient_decay for every private step t.
  bounded_iterations({{"gradient_decay", t.gradient_model.decay}, {"steps", p.steps}}, "decayed gradient-model steps");
}

namespace {

double std_of(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  return summarize(Eigen::Map<const VectorXd>(values.data(), static_cast<Index>(values.size()))).std;
}
nlohmann::json mean_and_std(const std::vector<double>& values) {
  return {{"mean", mean_of(values)}, {"std", std_of(values)}, {"runs", values}};
}

/// The thesis' per-example dFIL (train_classifier.py `train`, accountant.py, utils.calc_sub_fact):
/// sqrt(kappa' sum_t (T_t + 1e-7) / (sigma C)^2 / d), T_t the 2-probe estimate, and kappa' = q / (q +
/// (1 - q) exp(-eps0')) with eps0' from the clip bound rounded to 1.115 (filkit: 1.11524).
VectorXd fisher_term_dfil(const VectorXd& trace_sum, const DpSgdResult& training, const DpSgdOptions& phase) {
  constexpr double kRoundedClipBound = 1.115;  // its gelu_approx
  // eps0 is proportional to the clip bound over sigma: the thesis' eps0 is filkit's at this sigma.
  const double kappa =
      subsampling_kappa(training.sampling_rate, phase.noise_multiplier * soft_clip_norm_bound() / kRoundedClipBound,
                        training.kappa_delta);
  const double scale =
      kappa / std::pow(phase.noise_multiplier * phase.clip_norm, 2) / static_cast<double>(training.private_dims);
  return (trace_sum * scale).cwiseSqrt();
}

MethodSummary summarize_method(const MethodResult& m, const DpSgdOptions& phase) {
  MethodSummary s;
  s.method = to_string(m.method);
  const DpSgdSnapshot& last = m.training.final_snapshot();
  s.test_accuracy = last.test_accuracy;
  s.train_accuracy = last.train_accuracy;
  if (m.method == PrivateTrainingMethod::kSgd) return s;
  const double d = static_cast<double>(m.training.private_dims);
  const auto add = [](const Summary& dfil, std::vector<double>& max, std::vector<double>& mean,
                      std::vector<double>& median) {
    max.push_back(dfil.max);
    mean.push_back(dfil.mean);
    median.push_back(dfil.median);
  };
  for (Index r = 0; r < last.fisher_trace_per_run.rows(); ++r)
    add(summarize(VectorXd((last.fisher_trace_per_run.row(r).transpose() / d).cwiseSqrt())), s.max_dfil, s.mean_dfil,
        s.median_dfil);
  for (const VectorXd& sum : m.fisher_term_sum)
    add(summarize(fisher_term_dfil(sum, m.training, phase)), s.fisher_term_max_dfil, s.fisher_term_mean_dfil,
        s.fisher_term_median_dfil);
  return s;
}

/// A unit of the work on MPI ranks: run `run` of the methods `methods` (indices into the options').
struct RunUnit {
  int run = 0;
  std::vector<std::size_t> methods;
};

/// The units of `training` over `ranks` ranks, in order, and the rank of each. Unit 0, rank 0's, is
/// run 0 of every method: its result holds what every run shares (the counts, the privacy spent,
/// run 0's frozen coordinates) and the others' results are laid into a copy of it. Then each
/// further run of each method, fim's first (its gradient model trains before every private step:
/// the costliest), each method's runs in order, handed out round robin from rank 1. Which rank
/// trains a run changes nothing in it: its streams are those of the run (seed_of_run_alone).
std::vector<std::pair<RunUnit, int>> units_over_ranks(const PublicDataTrainingOptions& training, int ranks) {
  const std::size_t methods = training.methods.size();
  RunUnit first;
  for (std::size_t k = 0; k < methods; ++k) first.methods.push_back(k);
  std::vector<std::pair<RunUnit, int>> units{{first, 0}};
  std::vector<std::size_t> order;  // fim first, then the others as given
  for (std::size_t k = 0; k < methods; ++k)
    if (training.methods[k] == PrivateTrainingMethod::kFim) order.push_back(k);
  for (std::size_t k = 0; k < methods; ++k)
    if (training.methods[k] != PrivateTrainingMethod::kFim) order.push_back(k);
  for (std::size_t k : order)
    for (int run = 1; run < training.private_phase.runs; ++run)
      units.push_back({RunUnit{run, {k}}, static_cast<int>(units.size() % static_cast<std::size_t>(ranks))});
  return units;
}

/// Numbers a rank sends rank 0, each vector after its length.
class Packed {
 public:
  void put(double value) { values_.push_back(value); }
  void put(const VectorXd& vector) {
    put(static_cast<double>(vector.size()));
    values_.insert(values_.end(), vector.data(), vector.data() + vector.size());
  }
  void put(const std::vector<double>& vector) { put(Eigen::Map<const VectorXd>(vector.data(), std::ssize(vector))); }
  VectorXd vector() const { return Eigen::Map<const VectorXd>(values_.data(), std::ssize(values_)); }

 private:
  std::vector<double> values_;
};

class Unpacked {
 public:
  explicit Unpacked(VectorXd values) : values_(std::move(values)) {}
  bool done() const { return at_ == values_.size(); }
  double take() {
    if (at_ >= values_.size()) throw std::logic_error("public-training: a rank's results end early");
    return values_(at_++);
  }
  VectorXd take_vector() {
    const auto size = static_cast<Index>(take());
    if (size < 0 || at_ + size > values_.size()) throw std::logic_error("public-training: a rank's results end early");
    VectorXd vector = values_.segment(at_, size);
    at_ += size;
    return vector;
  }
  std::vector<double> take_values() {
    const VectorXd vector = take_vector();
    return {vector.data(), vector.data() + vector.size()};
  }

 private:
  VectorXd values_;
  Index at_ = 0;
};

/// What run `unit.run` of method `unit.methods[0]` adds to the run-0 result: its pre-training,
/// its final parameters, each snapshot's traces, sums and accuracies, and fim's diagnostics.
void pack_unit(const PublicDataTrainingResult& trained, Packed& out) {
  out.put(trained.pretrain_test_accuracy.front());
  out.put(trained.pretrain_train_accuracy.front());
  out.put(trained.pretrain_parameters.front());
  const MethodResult& m = trained.methods.front();
  out.put(trained.seconds.at("pretrain"));
  out.put(trained.seconds.at(to_string(m.method)));
  out.put(m.training.parameters.front());
  for (const DpSgdSnapshot& snapshot : m.training.snapshots) {
    out.put(snapshot.fisher_trace_per_run.rows() == 1 ? VectorXd(snapshot.fisher_trace_per_run.row(0).transpose())
                                                      : VectorXd());
    out.put(snapshot.fisher_spectral);
    out.put(snapshot.times_sampled);
    out.put(snapshot.train_accuracy.front());
    out.put(snapshot.test_accuracy.front());
  }
  out.put(static_cast<double>(m.perturbation_cosine.size()));
  for (const std::vector<double>& values : m.perturbation_cosine) out.put(values);
  out.put(static_cast<double>(m.gradient_model_loss.size()));
  for (const std::vector<double>& values : m.gradient_model_loss) out.put(values);
  out.put(static_cast<double>(m.vector_norms.size()));
  for (const std::vector<VectorNorms>& run : m.vector_norms) {
    std::vector<double> values;
    for (const VectorNorms& n : run) values.insert(values.end(), {n.base, n.perturbation, n.released});
    out.put(values);
  }
  out.put(static_cast<double>(m.fisher_term_sum.size()));
  for (const VectorXd& values : m.fisher_term_sum) out.put(values);
}

/// pack_unit's numbers laid into `run`, a copy of the run-0 result, for method `k` of run `run_index`.
void unpack_unit(Unpacked& in, PublicDataTrainingResult& run, std::size_t k, int run_index, const DpSgdOptions& phase) {
  run.pretrain_test_accuracy = {in.take()};
  run.pretrain_train_accuracy = {in.take()};
  run.pretrain_parameters = {in.take_vector()};
  MethodResult& m = run.methods[k];
  run.seconds["pretrain"] = in.take();
  run.seconds[to_string(m.method)] = in.take();
  DpSgdResult& training = m.training;
  training.parameters = {in.take_vector()};
  const VectorXd& w = training.parameters.front();
  if (!training.models.empty()) {  // the GLM of these parameters, as the run's trainer forms it
    Model& model = training.models.front();
    model.weights = Eigen::Map<const MatrixXd>(w.data(), model.weights.rows(), model.weights.cols());
  }
  if (!training.run_seeds.empty()) training.run_seeds = {dpsgd_run_seed(phase, run_index)};
  for (DpSgdSnapshot& snapshot : training.snapshots) {
    const VectorXd trace = in.take_vector();
    if (trace.size() > 0) snapshot.fisher_trace_per_run = trace.transpose();
    snapshot.fisher_spectral = in.take_vector();
    snapshot.times_sampled = in.take_vector();
    snapshot.train_accuracy = {in.take()};
    snapshot.test_accuracy = {in.take()};
  }
  const auto runs = [&in] { return static_cast<std::size_t>(in.take()); };
  m.perturbation_cosine.resize(runs());
  for (std::vector<double>& values : m.perturbation_cosine) values = in.take_values();
  m.gradient_model_loss.resize(runs());
  for (std::vector<double>& values : m.gradient_model_loss) values = in.take_values();
  m.vector_norms.resize(runs());
  for (std::vector<VectorNorms>& norms : m.vector_norms) {
    const std::vector<double> values = in.take_values();
    norms.clear();
    for (std::size_t t = 0; t + 2 < values.size(); t += 3) norms.push_back({values[t], values[t + 1], values[t + 2]});
  }
  m.fisher_term_sum.resize(runs());
  for (VectorXd& values : m.fisher_term_sum) values = in.take_vector();
}

/// train_with_public_data's result on the ranks of `comm` (docs/distributed.md): the runs of the
/// methods spread over the ranks (units_over_ranks), each trained whole by one rank as a call of
/// one run (seed_of_run_alone), an all-reduce after each so that a failing rank ends the job, and
/// rank 0 gathering the runs' results in order (combine_runs): one call's result, bit for bit. The
/// other ranks return an empty result.
PublicDataTrainingResult train_on_ranks(const PublicPrivateSplit& split, const Dataset& test,
                                        const PublicDataTrainingOptions& training, bool progress,
                                        const Communicator& comm) {
  const std::vector<std::pair<RunUnit, int>> units = units_over_ranks(training, comm.size());
  std::vector<std::size_t> mine;
  std::vector<std::size_t> per_rank(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t j = 0; j < units.size(); ++j) {
    if (units[j].second == comm.rank()) mine.push_back(j);
    ++per_rank[static_cast<std::size_t>(units[j].second)];
  }
  const std::size_t rounds = *std::max_element(per_rank.begin(), per_rank.end());
  Progress bar("public-training runs", static_cast<std::int64_t>(units.size()), !progress || !comm.is_root());
  std::vector<PublicDataTrainingResult> trained;  // of this rank's units, in order
  for (std::size_t round = 0; round < rounds; ++round) {
    std::exception_ptr failed;
    if (round < mine.size()) {
      const RunUnit& unit = units[mine[round]].first;
      PublicDataTrainingOptions one = training;
      one.private_phase.runs = 1;
      one.private_phase.seed = seed_of_run_alone(training.private_phase, unit.run);
      one.methods.clear();
      for (std::size_t k : unit.methods) one.methods.push_back(training.methods[k]);
      try {
        trained.push_back(train_with_public_data(split.public_part, split.private_part, test, one, false));
      } catch (...) {
        failed = std::current_exception();
      }
    }
    stop_all_if_any_failed(failed, comm, nullptr, [](const std::string& messages) {
      return "public-training: a run failed on another rank (" + messages + ")";
    });
    std::int64_t done = 0;  // units of this round over all ranks
    for (std::size_t count : per_rank) done += count > round ? 1 : 0;
    bar.advance(done);
  }
  bar.finish();
  // Rank 0 gathers every unit but its first, as (unit, numbers).
  Packed packed;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (mine[i] == 0) continue;
    packed.put(static_cast<double>(mine[i]));
    pack_unit(trained[i], packed);
  }
  Unpacked gathered(comm.gather(packed.vector()));
  if (!comm.is_root()) return {};
  const DpSgdOptions phase = resolved_private_phase(training, trained.front().n_private);
  std::vector<PublicDataTrainingResult> runs(static_cast<std::size_t>(training.private_phase.runs), trained.front());
  while (!gathered.done()) {
    const RunUnit& unit = units.at(static_cast<std::size_t>(gathered.take())).first;
    unpack_unit(gathered, runs[static_cast<std::size_t>(unit.run)], unit.methods.front(), unit.run, phase);
  }
  return combine_runs(runs, training);
}

}  // namespace

PublicTrainingJobResult run_public_training(const PublicTrainingJobOptions& requested, bool progress) {
  requested.validate();
  const std::string& checkpoint = requested.training.private_phase.checkpoint_path;  // before the work
  if (!checkpoint.empty()) check_output_path("checkpoint", checkpoint);
  if (!checkpoint.empty() && Communicator::world().distributed() && requested.training.private_phase.runs != 1)
    throw OptionError::with_text(
        "checkpoint", option_name("checkpoint") + " " + checkpoint +
                          ": public-training resumes on several MPI ranks only with " + option_name("runs") +
                          " 1, which all ranks train together; with more runs each run is trained whole by one "
                          "rank, and a failure loses the runs in flight (docs/distributed.md): leave " +
                          option_name("checkpoint") + " out, train one run at a time, or run without mpirun");
  PublicTrainingJobResult result;
  result.options = requested;
  // Networks (model other than softmax) use every class unless classes says otherwise; so does softmax here.
  result.options.data.resolve();
  const PublicTrainingJobOptions& options = result.options;
  if (!options.network.torchscript.empty()) result.torchscript_sha256 = file_sha256_hex(options.network.torchscript);
  const std::uint64_t seed = options.training.private_phase.seed;
  PreparedData prepared = load_and_preprocess(options.data, seed);
  result.data = std::move(prepared.data);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
  result.split =
      split_public_private(result.data.train, options.training.public_fraction, seed, options.training.public_split);
  // The autos the private part decides (kappa_delta, trace, probes), recorded as used.
  result.options.training.private_phase = resolved_private_phase(options.training, result.split.private_part.n());
  const StageScope stage("training with public data");
  const Communicator& comm = Communicator::world();
  if (comm.distributed() && options.training.private_phase.runs == 1) {
    // One run: every rank trains it, fim's gradient model splitting its public batches over them
    // and the private phase its batches' members; the resume file (rank 0's) is kept until the
    // outputs are written.
    result.training =
        train_with_public_data(result.split.public_part, result.split.private_part, result.data.test,
                               result.options.training_options(), progress, CheckpointWhenDone::kKeep, comm);
    if (!comm.is_root()) return result;
  } else if (comm.distributed()) {
    result.training = train_on_ranks(result.split, result.data.test, result.options.training_options(), progress, comm);
    if (!comm.is_root()) return result;
  } else {
    // The resume file is kept until the outputs are written (outputs_written).
    result.training = train_with_public_data(result.split.public_part, result.split.private_part, result.data.test,
                                             result.options.training_options(), progress, CheckpointWhenDone::kKeep);
  }
  for (const auto& [name, seconds] : result.training.seconds) result.seconds[name] = seconds;
  if (!result.training.complete) return result;
  for (const MethodResult& m : result.training.methods)
    result.methods.push_back(summarize_method(m, result.options.training.private_phase));
  return result;
}

void PublicTrainingJobResult::outputs_written() const {
  const std::string& checkpoint = options.training.private_phase.checkpoint_path;
  if (!training.complete || checkpoint.empty()) return;
  std::error_code ignored;  // a file left behind only resumes to the same results
  std::filesystem::remove(checkpoint, ignored);
}

nlohmann::json PublicTrainingJobResult::to_json() const {
  nlohmann::json json = job_summary_header(PublicTrainingJob::name, options.training.private_phase.seed);
  json["settings"] = settings_json(options);
  if (!torchscript_sha256.empty()) json["settings"]["torchscript_sha256"] = torchscript_sha256;
  json["source"] = data.train.source;
  json["class_names"] = data.train.class_names;  // label k is class_names[k] (the report's legends)
  json["preprocessing"] = preprocessor.to_json();
  json["n_public"] = training.n_public;
  json["n_private"] = training.n_private;
  json["n_test"] = data.test.n();
  json.update(data_rows_json(data));  // the rows dropped or with unseen levels, as measure and dpsgd count them
  json["d"] = data.train.d();
  json["num_classes"] = training.num_classes;
  json["parameter_count"] = training.parameter_count;
  json["gradient_model"] =
      options.training.gradient_model.is_constant()
          ? "constant: the thesis' gradient model as its code computes it (batch normalisation over a batch of one "
            "example outputs its shift, so the model is a learned vector c added to every released gradient; "
            "docs/mathematics.md, section 11.3)"
          : "conditional: filkit's input-dependent extension, normalising each example's features (layer "
            "normalisation), not the batch";
  if (const char* note = sampling_note(options.training.private_phase.sampling)) json["sampling_note"] = note;
  json["accounting"] = accounting_summary(options.training.private_phase);
  json["pretrain"] = {{"test_accuracy", mean_and_std(training.pretrain_test_accuracy)},
                      {"train_accuracy", mean_and_std(training.pretrain_train_accuracy)}};
  nlohmann::json methods = nlohmann::json::array();
  for (std::size_t k = 0; k < this->methods.size(); ++k) {
    const MethodSummary& s = this->methods[k];
    const MethodResult& m = training.methods[k];
    nlohmann::json entry = {{"method", s.method},
                            {"test_accuracy", mean_and_std(s.test_accuracy)},
                            {"train_accuracy", mean_and_std(s.train_accuracy)}};
    if (m.method != PrivateTrainingMethod::kSgd) {
      const DpSgdSnapshot& last = m.training.final_snapshot();
      entry["max_dfil"] = mean_and_std(s.max_dfil);
      entry["mean_dfil"] = mean_and_std(s.mean_dfil);
      entry["median_dfil"] = mean_and_std(s.median_dfil);
      if (!s.fisher_term_max_dfil.empty())
        entry["fisher_term_accountant"] = {
            {"what",
             "the thesis' own aggregation: 2 Gaussian probes per example and step, sqrt(T + 1e-7) squared, "
             "kappa with the clip bound 1.115"},
            {"max_dfil", mean_and_std(s.fisher_term_max_dfil)},
            {"mean_dfil", mean_and_std(s.fisher_term_mean_dfil)},
            {"median_dfil", mean_and_std(s.fisher_term_median_dfil)}};
      entry["frozen_parameters"] = m.frozen;
      entry["kappa"] = m.training.kappa;
      entry["step_epsilon"] = m.training.step_epsilon;
      entry["rdp_epsilon"] = last.privacy.eps;
      entry["rdp_order"] = last.privacy.optimal_order;
      entry["rdp_delta"] = last.privacy.delta;
      entry["epsilon"] = last.epsilon;  // by the accountant "accounting" names
      entry["run_seeds"] = m.training.run_seeds;
    }
    if (m.method == PrivateTrainingMethod::kFim) {
      entry["perturbation_cosine_with_mean_public_gradient"] = m.perturbation_cosine;
      entry["gradient_model_final_loss"] = m.gradient_model_loss;
      nlohmann::json norms = nlohmann::json::array();
      for (const std::vector<VectorNorms>& run : m.vector_norms) {
        const auto per_step = [&run](double VectorNorms::*norm) {
          nlohmann::json values = nlohmann::json::array();
          for (const VectorNorms& n : run) values.push_back(n.*norm);
          return values;
        };
        norms.push_back({{"base", per_step(&VectorNorms::base)},
                         {"perturbation", per_step(&VectorNorms::perturbation)},
                         {"released", per_step(&VectorNorms::released)}});
      }
      if (!m.vector_norms.empty()) entry["vector_norms_per_step"] = norms;
      if (!m.objective_terms.empty()) entry["gradient_model_objective_terms"] = m.objective_terms;
    }
    methods.push_back(entry);
  }
  json["methods"] = methods;
  json["seconds"] = seconds;
  return json;
}

NumericTable PublicTrainingJobResult::table() const {
  NumericTable table;
  table.header = {"method", "index", "label", "times_sampled", "dfil", "dfil_mse_bound", "fisher_trace"};
  for (const MethodResult& m : training.methods) {
    if (m.method == PrivateTrainingMethod::kSgd) continue;
    const DpSgdSnapshot& last = m.training.final_snapshot();
    const VectorXd dfil = last.dfil(m.training.private_dims);
    for (Index i = 0; i < dfil.size(); ++i)
      table.rows.push_back({static_cast<double>(static_cast<int>(m.method)),
                            static_cast<double>(split.private_rows[static_cast<std::size_t>(i)]),
                            split.private_part.y(i), last.times_sampled(i), dfil(i), 1.0 / (dfil(i) * dfil(i)),
                            last.fisher_trace(i)});
  }
  return table;
}

NumericTable PublicTrainingJobResult::extra_table(const std::string& name) const {
  if (name != "models_out") return JobResult::extra_table(name);
  NumericTable table = model_table({"method", "run"}, training.parameter_count);
  for (std::size_t run = 0; run < training.pretrain_parameters.size(); ++run)
    add_model_row(table, {-1.0, static_cast<double>(run)}, training.pretrain_parameters[run]);
  for (const MethodResult& m : training.methods)
    for (std::size_t run = 0; run < m.training.parameters.size(); ++run)
      add_model_row(table, {static_cast<double>(static_cast<int>(m.method)), static_cast<double>(run)},
                    m.training.parameters[run]);
  return table;
}

void PublicTrainingJobResult::print_summary(std::ostream& out) const {
  const DpSgdOptions& p = options.training.private_phase;
  if (!training.complete) {
    const DpSgdResult& stopped = training.methods.back().training;
    out << "filkit public-training: " << to_string(training.methods.back().method) << " stopped after step "
        << stopped.steps_done << " of " << static_cast<Index>(p.runs) * p.steps << " (all runs); the state is in "
        << p.checkpoint_path << ": run the same command again to resume\n";
    return;
  }
  out << "filkit public-training: " << options.data.data << ", " << training.n_public << " public + "
      << training.n_private << " private examples, d = " << data.train.d() << ", K = " << training.num_classes << ", "
      << training.parameter_count << " parameters; B = " << p.batch_size << ", T = " << p.steps
      << ", C = " << p.clip_norm << ", noise multiplier = " << p.noise_multiplier << ", " << p.runs << " run(s)\n";
  out << "  " << std::left << std::setw(10) << "method" << std::right << std::setw(20) << "test accuracy"
      << std::setw(22) << "max dFIL" << std::setw(22) << "mean dFIL" << std::setw(22) << "median dFIL" << std::setw(10)
      << "RDP eps"
      << "\n";
  const auto cell = [&](const std::vector<double>& v, int precision) {
    std::ostringstream s;
    // One run has no spread: "-", not a standard deviation of 0.
    s << std::fixed << std::setprecision(precision) << mean_of(v) << " (";
    if (v.size() < 2) s << "-)";
    else s << std_of(v) << ")";
    return s.str();
  };
  out << "  " << std::left << std::setw(10) << "pretrain" << std::right << std::setw(20)
      << cell(training.pretrain_test_accuracy, 4) << "\n";
  for (std::size_t k = 0; k < methods.size(); ++k) {
    const MethodSummary& s = methods[k];
    out << "  " << std::left << std::setw(10) << s.method << std::right << std::setw(20) << cell(s.test_accuracy, 4);
    if (!s.max_dfil.empty())
      out << std::setw(22) << cell(s.max_dfil, 4) << std::setw(22) << cell(s.mean_dfil, 4) << std::setw(22)
          << cell(s.median_dfil, 4) << std::setw(10) << std::setprecision(4)
          << training.methods[k].training.final_snapshot().privacy.eps;
    out << "\n";
    const auto differs = [](const std::vector<double>& a, const std::vector<double>& b) {
      return std::abs(mean_of(a) - mean_of(b)) > 5e-5 * std::abs(mean_of(a));
    };
    if (!s.fisher_term_max_dfil.empty() &&
        (differs(s.max_dfil, s.fisher_term_max_dfil) || differs(s.mean_dfil, s.fisher_term_mean_dfil) ||
         differs(s.median_dfil, s.fisher_term_median_dfil)))
      out << "  " << std::left << std::setw(10) << "  thesis'" << std::right << std::setw(20) << "" << std::setw(22)
          << cell(s.fisher_term_max_dfil, 4) << std::setw(22) << cell(s.fisher_term_mean_dfil, 4) << std::setw(22)
          << cell(s.fisher_term_median_dfil, 4) << "\n";
  }
  out << "  (mean (std) over runs; dFIL over the private examples";
  if (std::any_of(methods.begin(), methods.end(),
                  [](const MethodSummary& s) { return !s.fisher_term_max_dfil.empty(); }))
    out << "; a \"thesis'\" row, where it differs from filkit's in 4 digits, is the thesis' own accountant: 2 probes, "
           "sqrt(T + 1e-7), kappa with 1.115";
  out << ")\n  seconds:";
  for (const auto& [stage, value] : seconds) out << " " << stage << " " << std::setprecision(3) << value;
  out << "\n";
}

}  // namespace filkit
