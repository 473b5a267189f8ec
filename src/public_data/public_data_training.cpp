// Private training with public data (public_data_training.hpp; docs/mathematics.md, section 11):
// the data checked, the memory checked, every run pre-trained on the public part (pretraining.hpp),
// then the private phase of every method by its runner (method_runner.hpp).
#include "filkit/public_data/public_data_training.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/timing.hpp"

#include "dpsgd/trainable_models.hpp"
#include "public_data/method_runner.hpp"
#include "public_data/pretraining.hpp"
#include "public_data/public_data_model.hpp"
#include "public_data/trained_model.hpp"
#include "public_data/training_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace filkit {

const MethodResult* PublicDataTrainingResult::find(PrivateTrainingMethod method) const {
  for (const MethodResult& m : methods)
    if (m.method == method) return &m;
  return nullptr;
}

namespace {

/// The inputs checked (train_with_public_data's errors) and the private phase as run.
DpSgdOptions checked_phase(const Dataset& public_part, const Dataset& private_part, const Dataset& test,
                           const PublicDataTrainingOptions& options) {
  options.validate();
  public_part.validate();
  private_part.validate();
  if (public_part.n() == 0 || private_part.n() == 0)
    throw OptionError::with_text(
        "public_fraction", std::string("the ") + (public_part.n() == 0 ? "public" : "private") + " part is empty: " +
                               option_name("public_fraction") + " must leave examples on both sides");
  for (const Dataset* data : {&public_part, &test})
    if (data->n() > 0 && data->d() != private_part.d())
      throw DataError("the " + std::string(data == &test ? "test" : "public") + " data has " +
                      std::to_string(data->d()) + " features, the private part " + std::to_string(private_part.d()));
  if (options.gradient_model.batch_size > public_part.n() &&
      std::find(options.methods.begin(), options.methods.end(), PrivateTrainingMethod::kFim) != options.methods.end())
    option_error("gradient_batch_size", std::to_string(options.gradient_model.batch_size),
                 "must be <= the public part's " + std::to_string(public_part.n()) + " examples");
  return resolved_private_phase(options, private_part.n());
}

/// The model the runs train, its fixed coordinates and whether fim keeps the public records
/// (check_training_memory), for `K` classes.
struct RunModel {
  RunModel(const Dataset& public_part, const Dataset& private_part, const PublicDataTrainingOptions& options,
           const DpSgdOptions& phase, Index K)
      : trained(private_part, phase, K),
        fixed(trained.fixed_coordinates(options.reference_logit)),
        trainable(trained.parameter_count() - static_cast<Index>(std::count(fixed.begin(), fixed.end(), true))),
        keep_public_records(check_training_memory(trained, options, phase, private_part, public_part.n(), trainable)) {}
  const TrainedModel trained;
  const std::vector<bool> fixed;
  const Index trainable;
  const bool keep_public_records;
};

/// train_with_public_data, its runs from `given` (one run) where given, else pre-trained each.
PublicDataTrainingResult train_runs(const Dataset& public_part, const Dataset& private_part, const Dataset& test,
                                    const PublicDataTrainingOptions& options, bool progress,
                                    CheckpointWhenDone when_done, const Communicator& ranks, const RunStart* given) {
  const DpSgdOptions phase = checked_phase(public_part, private_part, test, options);
  PublicDataTrainingResult result;
  result.n_public = public_part.n();
  result.n_private = private_part.n();
  result.num_classes = class_count({{public_part, "public"}, {private_part, "private"}, {test, "test"}});
  const RunModel model(public_part, private_part, options, phase, result.num_classes);
  const TrainedModel& trained = model.trained;
  const std::vector<bool>& fixed = model.fixed;
  const Index p = trained.parameter_count();
  result.parameter_count = p;
  if (given &&
      (phase.runs != 1 || given->parameters.size() != p || given->frozen.size() != static_cast<std::size_t>(p)))
    throw std::logic_error("train_with_public_data: a given start is for one run of this model");

  const auto pretrain_begin = std::chrono::steady_clock::now();
  std::vector<RunStart> starts;
  for (int run = 0; run < phase.runs; ++run) {
    starts.push_back(given ? *given
                           : pretrained_start(trained, public_part, options, fixed, dpsgd_run_seed(phase, run)));
    const VectorXd& w = starts.back().parameters;
    result.pretrain_train_accuracy.push_back(trained.accuracy(w, private_part));
    result.pretrain_test_accuracy.push_back(test.n() > 0 ? trained.accuracy(w, test) : std::nan(""));
    result.pretrain_parameters.push_back(w);
  }
  result.seconds["pretrain"] = seconds_since(pretrain_begin);

  // Only rank 0 shows the progress: the ranks train the private phase together.
  const PrivatePhase private_phase{public_part,
                                   private_part,
                                   test,
                                   options,
                                   phase,
                                   trained,
                                   starts,
                                   fixed,
                                   model.trainable,
                                   model.keep_public_records,
                                   progress && ranks.is_root(),
                                   when_done,
                                   ranks};
  for (PrivateTrainingMethod method : options.methods) {
    const auto begin = std::chrono::steady_clock::now();
    MethodResult m = MethodRunner::create(method)->run(private_phase);
    if (!m.training.complete) {  // stopped (stop_after): the state is in the checkpoint
      result.complete = false;
      result.methods.push_back(std::move(m));
      return result;
    }
    result.seconds[to_string(method)] = seconds_since(begin);
    result.methods.push_back(std::move(m));
  }
  return result;
}

}  // namespace

PublicDataTrainingResult train_with_public_data(const Dataset& public_part, const Dataset& private_part,
                                                const Dataset& test, const PublicDataTrainingOptions& options,
                                                bool progress, CheckpointWhenDone when_done,
                                                const Communicator& ranks) {
  return train_runs(public_part, private_part, test, options, progress, when_done, ranks, nullptr);
}

PublicDataTrainingResult combine_runs(const std::vector<PublicDataTrainingResult>& runs,
                                      const PublicDataTrainingOptions& options) {
  if (runs.size() != static_cast<std::size_t>(options.private_phase.runs))
    throw std::logic_error("combine_runs: " + std::to_string(runs.size()) + " results for " +
                           std::to_string(options.private_phase.runs) + " runs");
  for (const PublicDataTrainingResult& run : runs)
    if (!run.complete || run.pretrain_parameters.size() != 1 || run.methods.size() != options.methods.size())
      throw std::logic_error("combine_runs: every result must be one complete run of every method");
  const PublicDataTrainingResult& first = runs.front();
  PublicDataTrainingResult result;
  result.n_public = first.n_public;
  result.n_private = first.n_private;
  result.num_classes = first.num_classes;
  result.parameter_count = first.parameter_count;
  for (const PublicDataTrainingResult& run : runs) {
    result.pretrain_test_accuracy.push_back(run.pretrain_test_accuracy.front());
    result.pretrain_train_accuracy.push_back(run.pretrain_train_accuracy.front());
    result.pretrain_parameters.push_back(run.pretrain_parameters.front());
    for (const auto& [name, seconds] : run.seconds) result.seconds[name] += seconds;
  }
  const DpSgdOptions phase = resolved_private_phase(options, first.n_private);
  for (std::size_t k = 0; k < options.methods.size(); ++k) {
    MethodResult m = first.methods[k];  // frozen and objective_terms: run 0's, as one call reports them
    std::vector<DpSgdResult> trainings;
    m.perturbation_cosine.clear();
    m.gradient_model_loss.clear();
    m.vector_norms.clear();
    m.fisher_term_sum.clear();
    for (const PublicDataTrainingResult& run : runs) {
      const MethodResult& alone = run.methods[k];
      if (alone.method != m.method) throw std::logic_error("combine_runs: the runs' methods differ in order");
      trainings.push_back(alone.training);
      const auto append = [](auto& all, const auto& one) { all.insert(all.end(), one.begin(), one.end()); };
      append(m.perturbation_cosine, alone.perturbation_cosine);
      append(m.gradient_model_loss, alone.gradient_model_loss);
      append(m.vector_norms, alone.vector_norms);
      append(m.fisher_term_sum, alone.fisher_term_sum);
    }
    if (m.method != PrivateTrainingMethod::kSgd) {
      m.training = combine_runs(trainings, phase);
    } else {  // sgd: each run's parameters and accuracies (its one snapshot), no accounting
      DpSgdSnapshot& snapshot = m.training.snapshots.front();
      snapshot.train_accuracy.clear();
      snapshot.test_accuracy.clear();
      m.training.parameters.clear();
      for (const DpSgdResult& alone : trainings) {
        snapshot.train_accuracy.push_back(alone.snapshots.front().train_accuracy.front());
        snapshot.test_accuracy.push_back(alone.snapshots.front().test_accuracy.front());
        m.training.parameters.push_back(alone.parameters.front());
      }
    }
    result.methods.push_back(std::move(m));
  }
  return result;
}

RunStart shared_run_start(const Dataset& public_part, const Dataset& private_part,
                          const PublicDataTrainingOptions& options, PrivateTrainingMethod method) {
  PublicDataTrainingOptions one = options;
  one.methods = {method};
  one.private_phase.runs = 1;
  one.account_fil = false;
  const DpSgdOptions phase = checked_phase(public_part, private_part, Dataset{}, one);
  const RunModel model(public_part, private_part, one, phase,
                       class_count({{public_part, "public"}, {private_part, "private"}}));
  const std::uint64_t run_seed = dpsgd_run_seed(phase, 0);
  RunStart start = pretrained_start(model.trained, public_part, one, model.fixed, run_seed);
  if (method == PrivateTrainingMethod::kFim && one.gradient_model.is_constant())
    start.first_gradient_model = first_gradient_model(model.trained, public_part, private_part, phase,
                                                      one.gradient_model, start, run_seed, model.keep_public_records);
  return start;
}

VectorXd train_one_model(const Dataset& public_part, const Dataset& private_part,
                         const PublicDataTrainingOptions& options, PrivateTrainingMethod method,
                         const RunStart* start) {
  if (options.private_phase.runs != 1)
    option_error("runs", std::to_string(options.private_phase.runs), "must be 1: train_one_model trains one model");
  PublicDataTrainingOptions one = options;
  one.methods = {method};
  one.account_fil = false;
  return train_runs(public_part, private_part, Dataset{}, one, false, CheckpointWhenDone::kRemove,
                    Communicator::local(), start)
      .methods.front()
      .training.parameters.front();
}

}  // namespace filkit
