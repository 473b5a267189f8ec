// The runners of the private phase's methods (method_runner.hpp).
#include "public_data/method_runner.hpp"

#include "dpsgd/trainable_models.hpp"
#include "public_data/public_data_model.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

namespace filkit {

namespace {

/// sgd: minibatch training without privacy from each run's start (the utility reference; no
/// accounting), by the private phase's optimizer; with sgd_clip each example's gradient smoothly
/// clipped at clip_norm first, as the thesis' code's SGD.
class SgdRunner final : public MethodRunner {
 public:
  MethodResult run(const PrivatePhase& r) override {
    const DpSgdOptions& phase = r.phase;
    MethodResult m;
    m.method = PrivateTrainingMethod::kSgd;
    DpSgdSnapshot snapshot;
    snapshot.step = phase.steps;
    // Shuffled epochs as the private phase samples them; else independent uniform batches, as before.
    const PlainTrainingOptions plain{
        phase.steps,
        phase.batch_size,
        phase.step_size,
        phase.weight_decay,
        phase.sampling == BatchSampling::kShuffle ? BatchSampling::kShuffle : BatchSampling::kUniform,
        r.options.sgd_clip ? phase.clip_norm : 0.0};
    for (int run = 0; run < phase.runs; ++run) {
      // The private phase's optimizer (sgd with momentum or Adam, its settings), as dpsgd's.
      const VectorXd w =
          train_without_privacy(r.model, r.private_part, r.starts[static_cast<std::size_t>(run)].parameters, plain,
                                phase, dpsgd_run_seed(phase, run), r.fixed);
      snapshot.train_accuracy.push_back(r.model.accuracy(w, r.private_part));
      snapshot.test_accuracy.push_back(r.test.n() > 0 ? r.model.accuracy(w, r.test) : std::nan(""));
      m.training.parameters.push_back(w);
    }
    m.training.n = r.private_part.n();
    m.training.num_classes = r.model.num_classes();
    m.training.private_dims = r.private_part.d();
    m.training.parameter_count = r.model.parameter_count();
    snapshot.private_dims = r.private_part.d();
    m.training.snapshots.push_back(snapshot);
    return m;
  }
};

/// This rank's shard of `data`'s rows (in `shard`) on the ranks of one run; `data` itself on one process.
const Dataset& own_rows(const Dataset& data, const Communicator& ranks, Dataset& shard) {
  if (!ranks.distributed()) return data;
  const RowShard rows = ranks.shard(data.n());
  std::vector<Index> kept(static_cast<std::size_t>(rows.size()));
  std::iota(kept.begin(), kept.end(), rows.begin);
  shard = data.select_rows(kept);
  return shard;
}

/// dpsgd, prune and fim: train_dpsgd_with_models with a PublicDataModel a run, built on the run's
/// first use from its start and the coordinates the method freezes. On the ranks of one run each
/// holds its shard of the private and test rows, releases and accounts the batch members among
/// them, and rank 0 gathers the accounting (docs/distributed.md).
class PrivateRunner : public MethodRunner {
 public:
  explicit PrivateRunner(PrivateTrainingMethod method) : method_(method) {}

  MethodResult run(const PrivatePhase& r) override {
    MethodResult m;
    m.method = method_;
    Dataset private_shard, test_shard;
    const Dataset& private_rows = own_rows(r.private_part, r.ranks, private_shard);
    const Dataset& test_rows = own_rows(r.test, r.ranks, test_shard);
    std::vector<std::unique_ptr<PublicDataModel>> models(static_cast<std::size_t>(r.phase.runs));
    const TrainableModelOfRun model_of_run = [&](int run, std::uint64_t seed) -> TrainableModel& {
      auto& slot = models[static_cast<std::size_t>(run)];
      const RunStart& start = r.starts[static_cast<std::size_t>(run)];
      if (!slot)
        slot = std::make_unique<PublicDataModel>(
            r.model, r.public_part, private_rows, r.phase, r.options.gradient_model, method_, start.parameters,
            frozen(r, start), r.model.num_classes(), seed, r.options.account_fil, r.keep_public_records, r.ranks,
            method_ == PrivateTrainingMethod::kFim ? start.first_gradient_model : std::nullopt);
      return *slot;
    };
    m.training = train_dpsgd_with_models(private_rows, test_rows, r.phase, model_of_run, r.progress, to_string(method_),
                                         r.when_done, r.ranks);
    if (!m.training.complete) return m;  // stopped (stop_after): the state is in the checkpoint
    report(r, models, m);
    for (const auto& model : models) m.fisher_term_sum.push_back(model->fisher_term_sum_over_ranks());
    return m;
  }

 protected:
  /// The coordinates the method never releases.
  virtual std::vector<bool> frozen(const PrivatePhase& r, const RunStart& start) const = 0;
  /// What the method adds to its result once every run is done.
  virtual void report(const PrivatePhase&, const std::vector<std::unique_ptr<PublicDataModel>>&, MethodResult&) const {}

  PrivateTrainingMethod method_;
};

/// dpsgd: every coordinate released but the fixed ones.
class DpSgdRunner final : public PrivateRunner {
 public:
  DpSgdRunner() : PrivateRunner(PrivateTrainingMethod::kDpSgd) {}

 protected:
  std::vector<bool> frozen(const PrivatePhase& r, const RunStart&) const override {
    return r.fixed.empty() ? std::vector<bool>(static_cast<std::size_t>(r.model.parameter_count()), false) : r.fixed;
  }
};

/// prune: the start's smallest-magnitude coordinates frozen as well.
class PruneRunner : public PrivateRunner {
 public:
  explicit PruneRunner(PrivateTrainingMethod method = PrivateTrainingMethod::kPrune) : PrivateRunner(method) {}

 protected:
  std::vector<bool> frozen(const PrivatePhase&, const RunStart& start) const override { return start.frozen; }
  void report(const PrivatePhase& r, const std::vector<std::unique_ptr<PublicDataModel>>&,
              MethodResult& m) const override {
    const std::vector<bool>& first = r.starts.front().frozen;  // pruned: the fixed coordinates are not counted
    m.frozen = std::count(first.begin(), first.end(), true) - (r.model.parameter_count() - r.trainable);
  }
};

/// fim: prune's coordinates, the released gradient shifted by the gradient model, and that
/// model's diagnostics.
class FimRunner final : public PruneRunner {
 public:
  FimRunner() : PruneRunner(PrivateTrainingMethod::kFim) {}

 protected:
  void report(const PrivatePhase& r, const std::vector<std::unique_ptr<PublicDataModel>>& models,
              MethodResult& m) const override {
    PruneRunner::report(r, models, m);
    for (const auto& model : models) {
      m.perturbation_cosine.push_back(model->perturbation_cosine());
      m.gradient_model_loss.push_back(model->gradient_model_loss());
      m.vector_norms.push_back(model->vector_norms());
    }
    const GradientModelOptions& g = r.options.gradient_model;
    if (r.phase.network && g.is_constant() && g.trace == GradientTrace::kProbes &&
        g.probe_draws == ProbeDraws::kBatch && g.unit == ScheduleUnit::kEpochs)
      m.objective_terms = r.keep_public_records ? kPublicRecordsKept : kPublicRecordsPerBatch;
  }
};

}  // namespace

std::unique_ptr<MethodRunner> MethodRunner::create(PrivateTrainingMethod method) {
  switch (method) {
    case PrivateTrainingMethod::kSgd: return std::make_unique<SgdRunner>();
    case PrivateTrainingMethod::kDpSgd: return std::make_unique<DpSgdRunner>();
    case PrivateTrainingMethod::kPrune: return std::make_unique<PruneRunner>();
    case PrivateTrainingMethod::kFim: break;
  }
  return std::make_unique<FimRunner>();
}

}  // namespace filkit
