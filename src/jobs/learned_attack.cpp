#include "filkit/jobs/learned_attack.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/first_exception.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/base/timing.hpp"
#include "base/seeding.hpp"
#include "jobs/json_numbers.hpp"
#include "jobs/shadow_model_store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <mutex>
#include <ostream>
#include <stdexcept>

namespace filkit {

namespace {

constexpr Index kSavedTargets = 16;

double method_code(PrivateTrainingMethod method) { return static_cast<double>(static_cast<int>(method)); }

/// The seed of shadow model `model`'s private phase.
std::uint64_t shadow_seed(const LearnedAttackJobOptions& options, Index model) {
  if (options.same_seed) return options.attack.seed;
  return splitmix64(options.attack.seed ^ splitmix64(static_cast<std::uint64_t>(model) + 0x5bad0e1ULL));
}

/// Shadow model `model` of `method`: its private phase (its batches, its noise and fim's later
/// gradient-model trainings) from its own seed, from the start of `--seed` (shared_start: the
/// initialisation, pre-training and fim's first gradient model, none of which sees private data,
/// made by the first shadow model this process trains and shared by the others) or from its own.
ShadowTrainer shadow_trainer(const LearnedAttackJobOptions& options, const Dataset& public_part,
                             PrivateTrainingMethod method) {
  struct SharedStart {
    std::once_flag once;
    RunStart start;
  };
  auto shared = std::make_shared<SharedStart>();
  return [&options, &public_part, method, shared](const Dataset& train, Index model) {
    PublicDataTrainingOptions training = options.training;
    training.private_phase.seed = shadow_seed(options, model);
    if (!options.shared_start) return train_one_model(public_part, train, training, method);
    std::call_once(shared->once,
                   [&] { shared->start = shared_run_start(public_part, train, options.training, method); });
    return train_one_model(public_part, train, training, method, &shared->start);
  };
}

/// What decides method `method`'s shadow model i besides candidate i (jobs/shadow_model_store.hpp):
/// the training settings, the seeds, and D_fixed and the public part (by their rows' hashes, so
/// the data and every step of its preprocessing are covered). Not the attacker's settings, nor
/// how many shadow models there are.
nlohmann::json shadow_model_fingerprint(const LearnedAttackJobOptions& options, PrivateTrainingMethod method,
                                        const AttackData& data) {
  nlohmann::json training = nlohmann::json::object();
  visit_training_fields(
      const_cast<PublicDataTrainingOptions&>(options.training),
      [&](const char* name, const auto& field, const char*) { training[name] = option_to_json(field); });
  training.erase("methods");
  // Recorded only where it changes the models, so that stores made before it existed are taken.
  if (method != PrivateTrainingMethod::kSgd || !options.training.sgd_clip) training.erase("sgd_clip");
  if (!options.training.reference_logit) training.erase("reference_logit");
  if (options.training.private_phase.adam_bias_correction_offset == 0) training.erase("adam_bias_correction_offset");
  if (method != PrivateTrainingMethod::kFim) {  // the gradient model trains for fim alone
    GradientModelOptions gradient_model;
    visit_fields(gradient_model, [&](const char* name, const auto&, const char*) { training.erase(name); });
  }
  nlohmann::json fingerprint = {{"method", to_string(method)},
                                {"training", training},
                                {"seed", options.attack.seed},
                                {"same_seed", options.same_seed},
                                {"fixed_rows_hash", std::to_string(rows_hash(data.fixed))},
                                {"public_rows_hash", std::to_string(rows_hash(data.public_part))}};
  // With a shared start (shadow_trainer) the models differ from those that each made their own
  // where the start is drawn: fim's first gradient model, and a start initialised at random or
  // pre-trained. Only then is it recorded, so that a store made before --shared-start existed (each
  // model its own start) is refused there and taken where the two are the same models (sgd, dpsgd
  // and prune at the default zero start, never pre-trained).
  const PublicDataTrainingOptions& t = options.training;
  if (options.shared_start &&
      (method == PrivateTrainingMethod::kFim || t.pretrain.steps > 0 || t.private_phase.init_scale > 0.0))
    fingerprint["start"] = "shared by every shadow model";
  return fingerprint;
}

/// Rank 0's shadow models of `store`: those it holds are taken from it, those trained are added.
KeptShadowModels kept_in(ShadowModelStore& store) {
  return {[&store](Index model) { return store.find(model); },
          [&store](Index model, const VectorXd& w) { store.add(model, w); }, [&store] { store.save(); }};
}

VectorXd column(const std::vector<TargetReconstruction>& targets, double TargetReconstruction::*field) {
  VectorXd values(static_cast<Index>(targets.size()));
  for (std::size_t t = 0; t < targets.size(); ++t) values(static_cast<Index>(t)) = targets[t].*field;
  return values;
}

/// Softmax regression's parameter count and classes for the attack's data (labels are class
/// indices; run_learned_reconstruction checks them).
struct ShadowModelShape {
  Index classes = 2, parameters = 0;
};

ShadowModelShape shadow_model_shape(const LearnedAttackJobOptions& options, const AttackData& data) {
  ShadowModelShape shape;
  for (const Dataset* part : {&data.fixed, &data.candidates, &data.public_part})
    if (part->n() > 0) shape.classes = std::max(shape.classes, static_cast<Index>(part->y.maxCoeff()) + 1);
  shape.parameters = (data.fixed.d() + (options.training.private_phase.intercept ? 1 : 0)) * shape.classes;
  return shape;
}

/// What training one shadow model holds (train_one_model on D_fixed and one candidate): its
/// training set and a batch copied from it, the private batch's per-example gradients, the
/// parameters with the optimiser's and the trainer's vectors, and for fim the gradient model
/// (estimate_gradient_model_memory).
std::uint64_t shadow_model_memory(const LearnedAttackJobOptions& options, const AttackData& data,
                                  const ShadowModelShape& shape, PrivateTrainingMethod method) {
  const auto u = [](Index value) { return static_cast<std::uint64_t>(value); };
  const auto doubles = [](std::uint64_t values, std::uint64_t copies) {
    return saturating_product(values, copies * sizeof(double));
  };
  const std::uint64_t rows = u(options.attack.fixed_size + 1), columns = u(data.fixed.d() + 1);
  const std::uint64_t batch = u(std::min(options.training.private_phase.batch_size, options.attack.fixed_size + 1));
  std::uint64_t bytes = doubles(saturating_product(rows, columns), 1);
  bytes = saturating_sum(bytes, doubles(saturating_product(batch, columns), 1));
  bytes = saturating_sum(bytes, doubles(saturating_product(batch, u(shape.parameters)), 2));
  bytes = saturating_sum(bytes, doubles(u(shape.parameters), 16));
  if (method == PrivateTrainingMethod::kFim) {
    const PublicDataTrainingOptions& t = options.training;
    const Index trainable = shape.parameters - (t.reference_logit ? shape.parameters / shape.classes : 0);
    const Index released = trainable - std::llround(t.freeze_fraction * static_cast<double>(trainable));
    bytes = saturating_sum(bytes, estimate_gradient_model_memory(t.gradient_model, released, data.fixed.d(),
                                                                 data.fixed.image, data.public_part.n(), false)
                                      .total());
  }
  return bytes;
}

nlohmann::json mean_and_std(const VectorXd& values) {
  const VectorXd finite = detail::finite_values(values);
  if (finite.size() == 0) return {{"mean", nullptr}, {"std", nullptr}, {"count", 0}};
  const Summary summary = summarize(finite);
  return {{"mean", summary.mean}, {"std", summary.std}, {"median", summary.median}, {"count", summary.count}};
}

/// A method's attack as doubles, to gather it at rank 0 (unpack_attack reads it back).
void pack_attack(const LearnedReconstructionResult& a, std::vector<double>& out) {
  const auto d = [](auto value) { return static_cast<double>(value); };
  out.insert(out.end(), {d(a.parameter_count), d(a.num_classes), d(a.features), d(a.has_ssim), a.attacker_seconds,
                         d(a.class_means.size()), d(a.targets.size())});
  for (const VectorXd& mean : a.class_means) out.insert(out.end(), mean.data(), mean.data() + mean.size());
  for (const TargetReconstruction& t : a.targets) {
    out.insert(out.end(), {d(t.candidate), t.label, t.mse, t.ssim, t.baseline_mse, t.baseline_ssim});
    out.insert(out.end(), t.reconstruction.data(), t.reconstruction.data() + t.reconstruction.size());
  }
}

/// pack_attack's attack from `packed` at `at`, which it moves past it.
LearnedReconstructionResult unpack_attack(const VectorXd& packed, Index& at) {
  const auto next = [&] { return packed(at++); };
  const auto index = [&] { return static_cast<Index>(next()); };
  const auto vector = [&](Index size) {
    VectorXd values = packed.segment(at, size);
    at += size;
    return values;
  };
  LearnedReconstructionResult a;
  a.parameter_count = index();
  a.num_classes = index();
  a.features = index();
  a.has_ssim = next() != 0.0;
  a.attacker_seconds = next();
  const Index means = index(), targets = index();
  for (Index k = 0; k < means; ++k) a.class_means.push_back(vector(a.features));
  for (Index k = 0; k < targets; ++k) {
    TargetReconstruction t;
    t.candidate = index();
    t.label = next();
    t.mse = next();
    t.ssim = next();
    t.baseline_mse = next();
    t.baseline_ssim = next();
    t.reconstruction = vector(a.features);
    a.targets.push_back(std::move(t));
  }
  return a;
}

/// Each method's attack (attack_shadow_models) from its shadow models, `parameters` (rank 0's, in
/// the order of the methods), at rank 0. On the ranks of an MPI job method k's attacker is fitted
/// on rank k mod K: rank 0 broadcasts each method's parameters (its rank keeps them), every rank
/// fits its methods' attackers, one after another, and rank 0 gathers the attacks. So up to K
/// attackers are fitted at once, and each is what one process fits (its seed and data are the
/// method's alone). An error on any rank ends every rank. Collective; the other ranks return none.
std::vector<LearnedReconstructionResult> fit_attackers_on_ranks(const std::vector<RowMatrix>& parameters,
                                                                const AttackData& data,
                                                                const LearnedReconstructionOptions& options,
                                                                bool progress, const Communicator& comm) {
  const auto count = static_cast<Index>(comm.is_root() ? parameters.size() : 0);
  const auto methods = static_cast<std::size_t>(comm.max(count));
  const auto own = [&](std::size_t k) {
    return static_cast<int>(k % static_cast<std::size_t>(comm.size())) == comm.rank();
  };
  std::vector<RowMatrix> received(methods);
  for (std::size_t k = 0; comm.distributed() && k < methods; ++k) {
    if (k % static_cast<std::size_t>(comm.size()) == 0) continue;  // rank 0's own: nothing to send
    VectorXd shape(2);
    if (comm.is_root()) shape << static_cast<double>(parameters[k].rows()), static_cast<double>(parameters[k].cols());
    comm.broadcast(shape);
    if (comm.is_root()) {  // a broadcast only reads rank 0's values
      comm.broadcast(const_cast<double*>(parameters[k].data()), static_cast<std::size_t>(parameters[k].size()));
      continue;
    }
    RowMatrix rows(static_cast<Index>(shape(0)), static_cast<Index>(shape(1)));
    comm.broadcast(rows.data(), static_cast<std::size_t>(rows.size()));
    if (own(k)) received[k] = std::move(rows);
  }
  std::vector<double> packed;
  std::vector<LearnedReconstructionResult> attacks;
  FirstException failure;
  for (std::size_t k = 0; k < methods; ++k) {
    if (!own(k)) continue;
    try {
      const RowMatrix& rows = comm.is_root() ? parameters[k] : received[k];
      attacks.push_back(attack_shadow_models(rows, data.fixed, data.candidates, options, progress && comm.is_root()));
      pack_attack(attacks.back(), packed);
    } catch (...) {
      failure.capture();
      break;
    }
  }
  stop_all_if_any_failed(failure.first(), comm, {}, [](const std::string& messages) {
    return "learned attack: fitting an attacker failed on another rank (" + messages + ")";
  });
  if (!comm.distributed()) return attacks;
  const VectorXd gathered = comm.gather(Eigen::Map<const VectorXd>(packed.data(), static_cast<Index>(packed.size())));
  if (!comm.is_root()) return {};
  // In rank order, each rank's methods in order: method k is rank (k mod K)'s (k / K)-th.
  std::vector<LearnedReconstructionResult> in_order(methods);
  Index at = 0;
  for (int rank = 0; rank < comm.size(); ++rank)
    for (std::size_t k = static_cast<std::size_t>(rank); k < methods; k += static_cast<std::size_t>(comm.size()))
      in_order[k] = unpack_attack(gathered, at);
  return in_order;
}

}  // namespace

void LearnedAttackJobOptions::resolve() {
  data.resolve();
  training.private_phase.seed = attack.seed;
  training.private_phase.runs = 1;
  training.private_phase.max_memory = data.max_memory;  // the gradient model's budget
  attack.max_memory = data.max_memory;                  // the attacker's
  const DpSgdOptions resolved = resolved_private_phase(training, attack.fixed_size + 1);
  training.private_phase.trace = resolved.trace;
  training.private_phase.probes = resolved.probes;
  training.private_phase.spectral = resolved.spectral;
}

void LearnedAttackJobOptions::validate() const {
  data.validate();
  attack.validate();  // bounds fixed_size and the shadow models, so the sums below fit
  require_positive("public_size", public_size);
  bounded_iterations({{"public_size", public_size}}, "public examples");
  // Every method trains every shadow model for `steps` steps.
  bounded_iterations({{option_name("train_shadow_models") + " + " + option_name("target_shadow_models"),
                       attack.train_shadow_models + attack.target_shadow_models},
                      {"steps", training.private_phase.steps},
                      {"methods", static_cast<long long>(training.methods.size())}},
                     "private steps of the shadow models");
  if (training.methods.empty()) option_error("methods", "name at least one of sgd, dpsgd, prune, fim");
  refuse_repeats("methods", training.methods);
  if (training.private_phase.batch_size > attack.fixed_size + 1)
    option_error("batch_size", std::to_string(training.private_phase.batch_size),
                 "at most the shadow models' training set, " + option_name("fixed_size") +
                     " + 1 = " + std::to_string(attack.fixed_size + 1));
  if (training.gradient_model.batch_size > public_size)
    option_error("gradient_batch_size", std::to_string(training.gradient_model.batch_size),
                 "at most " + option_name("public_size") + " = " + std::to_string(public_size));
  if (training.private_phase.runs != 1)
    option_error("runs", std::to_string(training.private_phase.runs), "the attack trains one run per shadow model");
  if (!shadow_models.empty()) check_output_directory("shadow_models", shadow_models);
  PublicDataTrainingOptions checked = training;
  checked.private_phase.seed = attack.seed;
  checked.validate();
}

LearnedAttackJobResult run_learned_attack(const LearnedAttackJobOptions& requested, bool progress) {
  requested.validate();
  LearnedAttackJobResult result;
  result.options = requested;
  result.options.resolve();
  const LearnedAttackJobOptions& options = result.options;
  PreparedData prepared = load_and_preprocess(options.data, options.attack.seed);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
  result.data = draw_attack_data(prepared.data.train, options.attack, options.public_size);
  // Everything the attack will hold, refused before any shadow model is trained.
  const ShadowModelShape shape = shadow_model_shape(options, result.data);
  std::uint64_t shadow_model = 0;
  for (PrivateTrainingMethod method : options.training.methods)
    shadow_model = std::max(shadow_model, shadow_model_memory(options, result.data, shape, method));
  // A store (--shadow-models) keeps one copy of the shadow models' parameters, and a save two more
  // (the matrix and the file's bytes).
  const std::uint64_t kept =
      options.shadow_models.empty()
          ? 0
          : saturating_product(saturating_product(static_cast<std::uint64_t>(options.attack.train_shadow_models +
                                                                             options.attack.target_shadow_models),
                                                  static_cast<std::uint64_t>(shape.parameters)),
                               3 * sizeof(double));
  // Rank 0 holds every method's shadow models until the attackers (one method's are in the
  // attacker's estimate).
  const std::uint64_t other_methods = saturating_product(
      saturating_product(
          static_cast<std::uint64_t>(options.attack.train_shadow_models + options.attack.target_shadow_models),
          static_cast<std::uint64_t>(shape.parameters)),
      (options.training.methods.size() - 1) * sizeof(double));
  check_learned_attack_memory(options.attack, shape.parameters, shape.classes, result.data.fixed.d(), shadow_model,
                              saturating_sum(kept, other_methods));
  check_attack_inputs(result.data.fixed, result.data.candidates, options.attack);
  // Every method's shadow models first, spread over the ranks of an MPI job (rank 0 alone keeps the
  // store and gathers their parameters), then the attackers, each on its own rank
  // (fit_attackers_on_ranks; docs/distributed.md).
  const Communicator& comm = Communicator::world();
  const bool keep = !options.shadow_models.empty() && comm.is_root();
  if (keep) create_output_directory("shadow_models", options.shadow_models);
  std::vector<RowMatrix> parameters;  // rank 0's: each method's shadow models
  for (PrivateTrainingMethod method : options.training.methods) {
    const StageScope stage("learned attack (shadow models)");
    const ShadowTrainer train = shadow_trainer(options, result.data.public_part, method);
    std::unique_ptr<ShadowModelStore> store;
    if (keep)
      store = std::make_unique<ShadowModelStore>(options.shadow_models, to_string(method),
                                                 shadow_model_fingerprint(options, method, result.data),
                                                 result.data.candidates, options.data.max_memory);
    const auto start = std::chrono::steady_clock::now();
    try {
      parameters.push_back(train_shadow_models(result.data.fixed, result.data.candidates,
                                               options.attack.train_shadow_models + options.attack.target_shadow_models,
                                               train, progress, store ? kept_in(*store) : KeptShadowModels{}, comm));
    } catch (...) {
      if (store) store->save();  // what was trained before the failure is kept
      throw;
    }
    if (store) store->save();
    result.seconds[to_string(method) + " shadow models"] = seconds_since(start);
    result.methods.push_back({method, {}, store ? store->loaded() : 0});
  }
  const StageScope stage("learned attack (attackers)");
  const std::vector<LearnedReconstructionResult> attacks =
      fit_attackers_on_ranks(parameters, result.data, options.attack, progress, comm);
  for (std::size_t k = 0; k < attacks.size(); ++k) {  // rank 0's (the others' is empty)
    result.methods[k].attack = attacks[k];
    result.methods[k].attack.shadow_seconds = result.seconds[to_string(result.methods[k].method) + " shadow models"];
    result.seconds[to_string(result.methods[k].method) + " attacker"] = attacks[k].attacker_seconds;
  }
  return result;
}

nlohmann::json LearnedAttackJobResult::to_json() const {
  nlohmann::json json = job_summary_header(LearnedAttackJob::name, options.attack.seed);
  json["settings"] = settings_json(options);
  json["source"] = data.fixed.source;
  json["preprocessing"] = preprocessor.to_json();
  json["counts"] = {{"public", data.public_part.n()},
                    {"fixed", data.fixed.n()},
                    {"train_shadow_models", options.attack.train_shadow_models},
                    {"target_shadow_models", options.attack.target_shadow_models},
                    {"features", data.fixed.d()}};
  json["attacker"] =
      options.attack.attacker_hidden.empty() ? "linear least squares per label (closed form)" : "mlp (relu)";
  json["ssim"] =
      "Wang et al. 2004: 7x7 uniform window inside the image, sample covariances, K1 0.01, K2 0.03, data "
      "range 1, mean over windows and channels";
  json["lpips"] = kLpipsNote;
  nlohmann::json codes = nlohmann::json::object();
  for (const auto& [method, spelling] : EnumNames<PrivateTrainingMethod>::names) codes[spelling] = method_code(method);
  json["method_codes"] = codes;
  nlohmann::json methods = nlohmann::json::object();
  for (const LearnedAttackMethodResult& m : this->methods) {
    const auto& targets = m.attack.targets;
    // The rate of the shadow models this run trained (those loaded from --shadow-models took no time).
    const Index used = options.attack.train_shadow_models + options.attack.target_shadow_models;
    const Index loaded = std::min(m.loaded_shadow_models, used);
    const double shadow_count = static_cast<double>(used - loaded);
    methods[to_string(m.method)] = {
        {"mse", mean_and_std(column(targets, &TargetReconstruction::mse))},
        {"ssim", mean_and_std(column(targets, &TargetReconstruction::ssim))},
        {"perfect_privacy",
         {{"mse", mean_and_std(column(targets, &TargetReconstruction::baseline_mse))},
          {"ssim", mean_and_std(column(targets, &TargetReconstruction::baseline_ssim))}}},
        {"parameter_count", m.attack.parameter_count},
        {"shadow_models_loaded", loaded},
        {"seconds",
         {{"shadow_models", m.attack.shadow_seconds},
          {"attacker", m.attack.attacker_seconds},
          {"shadow_models_per_second", shadow_count > 0.0
                                           ? nlohmann::json(shadow_count / std::max(m.attack.shadow_seconds, 1e-9))
                                           : nlohmann::json(nullptr)}}},
    };
  }
  json["methods"] = methods;
  json["reconstructions"] = reconstructions_json();
  json["seconds"] = seconds;
  return json;
}

nlohmann::json LearnedAttackJobResult::reconstructions_json() const {
  // The first kReportedTargets rows of each kind of reconstructions_out, for the report's figure
  // (the thesis' figure 3.3); pixels as floats, which a figure cannot tell from doubles.
  constexpr std::size_t kReportedTargets = 8;
  nlohmann::json rows = nlohmann::json::array();
  const NumericTable table = extra_table("reconstructions_out");
  std::map<double, std::size_t> per_kind;
  for (const std::vector<double>& row : table.rows) {
    if (per_kind[row[0]]++ >= kReportedTargets) continue;
    std::vector<float> pixels(row.begin() + 3, row.end());
    rows.push_back({{"method", row[0]}, {"target", row[1]}, {"label", row[2]}, {"pixels", pixels}});
  }
  nlohmann::json out = {{"rows", rows}, {"method", "-2 the target, -1 the class-mean baseline, else method_codes"}};
  if (data.fixed.image) out["image"] = {data.fixed.image->channels, data.fixed.image->height, data.fixed.image->width};
  return out;
}

NumericTable LearnedAttackJobResult::table() const {
  NumericTable table{{"method", "target", "label", "mse", "ssim", "baseline_mse", "baseline_ssim"}, {}};
  for (const LearnedAttackMethodResult& m : methods)
    for (const TargetReconstruction& t : m.attack.targets)
      table.rows.push_back({method_code(m.method), static_cast<double>(t.candidate), t.label, t.mse, t.ssim,
                            t.baseline_mse, t.baseline_ssim});
  return table;
}

NumericTable LearnedAttackJobResult::extra_table(const std::string& name) const {
  if (name != "reconstructions_out") return JobResult::extra_table(name);
  NumericTable table{{"method", "target", "label"}, {}};
  for (Index j = 0; j < data.fixed.d(); ++j) table.header.push_back(std::string(1, 'x').append(std::to_string(j)));
  if (methods.empty()) return table;
  const auto add = [&](double code, const TargetReconstruction& t, const VectorXd& pixels) {
    std::vector<double> row = {code, static_cast<double>(t.candidate), t.label};
    row.insert(row.end(), pixels.data(), pixels.data() + pixels.size());
    table.rows.push_back(std::move(row));
  };
  const LearnedReconstructionResult& first = methods.front().attack;
  const auto saved = std::min<std::size_t>(kSavedTargets, first.targets.size());
  for (std::size_t k = 0; k < saved; ++k) {
    const TargetReconstruction& t = first.targets[k];
    add(-2, t, data.candidates.X.row(t.candidate).transpose());
    add(-1, t, first.class_means[static_cast<std::size_t>(t.label)]);
  }
  for (const LearnedAttackMethodResult& m : methods)
    for (std::size_t k = 0; k < saved; ++k)
      add(method_code(m.method), m.attack.targets[k], m.attack.targets[k].reconstruction);
  return table;
}

void LearnedAttackJobResult::print_summary(std::ostream& out) const {
  const LearnedReconstructionOptions& a = options.attack;
  out << "filkit learned-attack: " << options.data.data << ", " << data.public_part.n()
      << " public, |D_fixed| = " << data.fixed.n() << ", " << a.train_shadow_models << " + " << a.target_shadow_models
      << " shadow models, attacker " << (a.attacker_hidden.empty() ? "linear" : "mlp") << "\n";
  out << "  " << std::setw(8) << "method" << std::setw(12) << "mse" << std::setw(12) << "ssim" << std::setw(17)
      << "class-mean mse" << std::setw(17) << "class-mean ssim" << std::setw(13) << "shadow/s"
      << "\n";
  const nlohmann::json json = to_json();
  const auto number = [](const nlohmann::json& value) { return value.is_null() ? std::nan("") : value.get<double>(); };
  for (const LearnedAttackMethodResult& m : methods) {
    const nlohmann::json& j = json["methods"][to_string(m.method)];
    out << "  " << std::setw(8) << to_string(m.method) << std::scientific << std::setprecision(3) << std::setw(12)
        << number(j["mse"]["mean"]) << std::setw(12) << number(j["ssim"]["mean"]) << std::setw(17)
        << number(j["perfect_privacy"]["mse"]["mean"]) << std::setw(17) << number(j["perfect_privacy"]["ssim"]["mean"])
        << std::setw(13) << number(j["seconds"]["shadow_models_per_second"]) << std::defaultfloat << "\n";
  }
  out << "  note: " << kLpipsNote << "\n";
}

}  // namespace filkit
