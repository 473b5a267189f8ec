// Private training with public data (public_data_training.hpp; docs/mathematics.md, section 11):
// the split, magnitude freezing, non-private pre-training, and the private phase of every method,
// whose dpsgd, prune and fim runs go through train_dpsgd's trainer and accountant with a model
// (PublicDataModel) built per run: its pre-trained start, its frozen coordinates and, for fim, its
// gradient model, trained on public batches before each private step.
#include "filkit/public_data/public_data_training.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/timing.hpp"

#include "dpsgd/trainable_models.hpp"
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

PublicDataTrainingResult train_with_public_data(const Dataset& public_part, const Dataset& private_part,
                                                const Dataset& test, const PublicDataTrainingOptions& options,
                                                bool progress, CheckpointWhenDone when_done) {
  options.validate();
  public_part.validate();
  private_part.validate();
  if (public_part.n() == 0 || private_part.n() == 0)
    throw std::invalid_argument(std::string("the ") + (public_part.n() == 0 ? "public" : "private") +
                                " part is empty: public_fraction must leave examples on both sides");
  for (const Dataset* data : {&public_part, &test})
    if (data->n() > 0 && data->d() != private_part.d())
      throw std::invalid_argument("the " + std::string(data == &test ? "test" : "public") + " data has " +
                                  std::to_string(data->d()) + " features, the private part " +
                                  std::to_string(private_part.d()));
  if (options.gradient_model.batch_size > public_part.n() &&
      std::find(options.methods.begin(), options.methods.end(), PrivateTrainingMethod::kFim) != options.methods.end())
    option_error("gradient_batch_size", std::to_string(options.gradient_model.batch_size),
                 "must be <= the public part's " + std::to_string(public_part.n()) + " examples");
  const DpSgdOptions phase = resolved_private_phase(options, private_part.n());
  PublicDataTrainingResult result;
  result.n_public = public_part.n();
  result.n_private = private_part.n();
  result.num_classes = class_count({{public_part, "public"}, {private_part, "private"}, {test, "test"}});
  const Index K = result.num_classes;
  const TrainedModel trained(private_part, phase, K);
  const Index p = trained.parameter_count();
  result.parameter_count = p;
  const std::vector<bool> fixed = trained.fixed_coordinates(options.reference_logit);
  const Index trainable = p - static_cast<Index>(std::count(fixed.begin(), fixed.end(), true));
  const bool keep_public_records = check_training_memory(trained, options, phase, private_part, public_part.n(), trainable);

  const auto pretrain_begin = std::chrono::steady_clock::now();
  std::vector<RunStart> starts;
  for (int run = 0; run < phase.runs; ++run) {
    starts.push_back(pretrained_start(trained, public_part, options, fixed, dpsgd_run_seed(phase, run)));
    const VectorXd& w = starts.back().parameters;
    result.pretrain_train_accuracy.push_back(trained.accuracy(w, private_part));
    result.pretrain_test_accuracy.push_back(test.n() > 0 ? trained.accuracy(w, test) : std::nan(""));
    result.pretrain_parameters.push_back(w);
  }
  result.seconds["pretrain"] = seconds_since(pretrain_begin);

  for (PrivateTrainingMethod method : options.methods) {
    const auto begin = std::chrono::steady_clock::now();
    MethodResult m;
    m.method = method;
    if (method == PrivateTrainingMethod::kSgd) {
      DpSgdSnapshot snapshot;
      snapshot.step = phase.steps;
      // Shuffled epochs as the private phase samples them; else independent uniform batches, as before.
      const PlainTrainingOptions plain{phase.steps, phase.batch_size, phase.step_size, phase.weight_decay,
                                       phase.sampling == BatchSampling::kShuffle ? BatchSampling::kShuffle
                                                                                 : BatchSampling::kUniform};
      for (int run = 0; run < phase.runs; ++run) {
        // The private phase's optimizer (sgd with momentum or Adam, its settings), as dpsgd's.
        const VectorXd w = train_without_privacy(trained, private_part, starts[static_cast<std::size_t>(run)].parameters,
                                                 plain, phase, dpsgd_run_seed(phase, run), fixed);
        snapshot.train_accuracy.push_back(trained.accuracy(w, private_part));
        snapshot.test_accuracy.push_back(test.n() > 0 ? trained.accuracy(w, test) : std::nan(""));
        m.training.parameters.push_back(w);
      }
      m.training.n = private_part.n();
      m.training.num_classes = K;
      m.training.private_dims = private_part.d();
      m.training.parameter_count = p;
      snapshot.private_dims = private_part.d();
      m.training.snapshots.push_back(snapshot);
    } else {
      std::vector<std::unique_ptr<PublicDataModel>> models(static_cast<std::size_t>(phase.runs));
      const TrainableModelOfRun model_of_run = [&](int run, std::uint64_t seed) -> const TrainableModel& {
        auto& slot = models[static_cast<std::size_t>(run)];
        if (!slot) {
          const RunStart& start = starts[static_cast<std::size_t>(run)];
          std::vector<bool> frozen = method != PrivateTrainingMethod::kDpSgd ? start.frozen
                                     : fixed.empty() ? std::vector<bool>(static_cast<std::size_t>(p), false)
                                                     : fixed;
          slot = std::make_unique<PublicDataModel>(trained, public_part, private_part, phase, options.gradient_model,
                                                   method, start.parameters, std::move(frozen), K, seed,
                                                   options.account_fil, keep_public_records);
        }
        return *slot;
      };
      m.training = train_dpsgd_with_models(private_part, test, phase, model_of_run, progress, to_string(method),
                                           when_done);
      if (!m.training.complete) {  // stopped (stop_after): the state is in the checkpoint
        result.complete = false;
        result.methods.push_back(std::move(m));
        return result;
      }
      if (method != PrivateTrainingMethod::kDpSgd)  // pruned: the fixed coordinates are not counted
        m.frozen = std::count(starts[0].frozen.begin(), starts[0].frozen.end(), true) - (p - trainable);
      if (method == PrivateTrainingMethod::kFim) {
        for (const auto& model : models) {
          m.perturbation_cosine.push_back(model->perturbation_cosine());
          m.gradient_model_loss.push_back(model->gradient_model_loss());
          m.vector_norms.push_back(model->vector_norms());
        }
        const GradientModelOptions& g = options.gradient_model;
        if (phase.network && g.is_constant() && g.trace == GradientTrace::kProbes &&
            g.probe_draws == ProbeDraws::kBatch && g.unit == ScheduleUnit::kEpochs)
          m.objective_terms = keep_public_records ? kPublicRecordsKept : kPublicRecordsPerBatch;
      }
      for (const auto& model : models) m.thesis_trace_sum.push_back(model->thesis_trace_sum());
    }
    result.seconds[to_string(method)] = seconds_since(begin);
    result.methods.push_back(std::move(m));
  }
  return result;
}

VectorXd train_one_model(const Dataset& public_part, const Dataset& private_part,
                         const PublicDataTrainingOptions& options, PrivateTrainingMethod method) {
  if (options.private_phase.runs != 1)
    throw std::invalid_argument("train_one_model: runs = " + std::to_string(options.private_phase.runs) +
                                ": one model is trained (runs must be 1)");
  PublicDataTrainingOptions one = options;
  one.methods = {method};
  one.account_fil = false;
  return train_with_public_data(public_part, private_part, Dataset{}, one, false).methods.front().training.parameters.front();
}

}  // namespace filkit
