// One run of dpsgd, prune or fim in private training with public data (public_data_training.hpp):
// the model train_dpsgd_with_models trains, whose released vectors come from the LibTorch plugin's
// backend (networks/network_backend.hpp). Its pre-trained start, its frozen coordinates and, for
// fim, its gradient model, trained on public batches before each private step
// (public_data_model.cpp, constant_model_training.cpp); its state in the resume file
// (public_data_model_state.cpp).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/public_data/constant_gradient_model.hpp"
#include "filkit/public_data/constant_perturbation.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "base/seeding.hpp"
#include "dpsgd/trainable_models.hpp"
#include "networks/network_backend.hpp"
#include "networks/network_plugin.hpp"
#include "public_data/trained_model.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace filkit {

/// The constant gradient model's objective on a public batch of `batch_rows` examples from this
/// rank's part of it: `part`, the objective (a mean, constant_perturbation.hpp) over this rank's
/// `members` of the batch (0: none; `part` is then not read), and its gradient (`released`
/// entries). Each rank's mean times its members is their sum; the sums are added over `ranks` and
/// divided by batch_rows, the same bits on every rank. On one process, `part` itself. Collective.
PerturbationObjectiveValue objective_over_ranks(const PerturbationObjectiveValue& part, Index members, Index batch_rows,
                                                Index released, const Communicator& ranks);

/// One run of dpsgd, prune or fim: the released vectors come from the plugin's backend.
class PublicDataModel final : public TrainableModel {
 public:
  PublicDataModel(const TrainedModel& model, const Dataset& public_part, const Dataset& private_part,
                  const DpSgdOptions& phase, const GradientModelOptions& gradient_model, PrivateTrainingMethod method,
                  VectorXd start, std::vector<bool> frozen, Index K, std::uint64_t run_seed, bool account_fil,
                  bool keep_public_records, const Communicator& ranks = Communicator::local(),
                  std::optional<TrainedGradientModel> first_gradient_model = std::nullopt);

  Index parameter_count() const override { return model_.parameter_count(); }
  VectorXd initial_parameters(std::mt19937_64&) const override { return start_; }
  bool is_glm() const override { return model_.is_glm(); }
  Model glm(const VectorXd& w) const override { return model_.glm(w); }
  double accuracy(const VectorXd& w, const Dataset& data) const override { return model_.accuracy(w, data); }
  std::string describe() const override { return model_.is_glm() ? std::string() : model_.plan().describe(); }
  const std::vector<bool>* frozen() const override { return &frozen_; }

  /// Before a fim step, its gradient model trained on public batches at w; then the release of
  /// the members (on the ranks of one run, those among this rank's shard of the private rows).
  StepAccounting step(const VectorXd& w, const LocalBatch& local, std::uint64_t run_seed, Index t) override;
  /// On the ranks of one run, every rank steps: the gradient model trains on all of them together.
  bool steps_on_every_rank() const override { return ranks_.distributed(); }

  /// The method, the gradient model's settings, the pre-trained start and frozen coordinates and
  /// the public part: a resume file made with any of them different is refused.
  nlohmann::json resume_fingerprint() const override;
  /// fim's constant model (phi and Adam's moments), the diagnostics of the steps done and the
  /// thesis' trace sums: with the trainer's state, all that step t + 1 depends on. On the ranks of
  /// one run the trace sums are gathered over all private rows at rank 0 (the others' are empty),
  /// and restore() keeps the rank's own rows. Collective.
  nlohmann::json resume_state() const override;
  void restore(const nlohmann::json& state, Index steps_done) override;

  /// fim's constant gradient model trained before private step 1 at the start (what step(.., 1)
  /// trains first, from run_seed's streams), for runs that share it (RunStart::first_gradient_model).
  TrainedGradientModel train_first_gradient_model(std::uint64_t run_seed);

  const std::vector<double>& perturbation_cosine() const { return cosine_; }
  /// The thesis' accumulation, per private example (MethodResult::fisher_term_sum): over every
  /// private row at rank 0, empty on the other ranks. Collective.
  VectorXd fisher_term_sum_over_ranks() const;
  const std::vector<double>& gradient_model_loss() const { return loss_; }
  const std::vector<VectorNorms>& vector_norms() const { return norms_; }

 private:
  static std::uint64_t derive_seed(std::uint64_t run_seed, Index t, std::uint64_t purpose) {
    return splitmix64(run_seed ^ splitmix64(static_cast<std::uint64_t>(t) * 4 + purpose));
  }

  /// The thesis' accountant (its accountant.py): each batch member's trace estimated with 2 Gaussian
  /// input-space probes, then sqrt(T + 1e-7) squared, NaN taken as 0. Equal to filkit's accounting
  /// when that uses 2 probes (the default here); otherwise its own 2 probes are drawn.
  void add_fisher_terms(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb, const LocalBatch& local,
                        const VectorXd& accounted, std::uint64_t seed);

  /// Before private step t, for the constant models: the thesis' training of c on public batches at
  /// w (epochs of a fresh permutation with a short last batch, or uniform batches), warm-started
  /// from the previous step's c, Adam's count restarted; then c is what the backend adds.
  void train_constant_model(const VectorXd& w, std::uint64_t run_seed, Index t);

  /// S standard normal probes of dimension d for each of examples first, ..., first + rows - 1 (its
  /// row (r - first) S + s), example r's from its own stream seeded by key + r: the same whatever
  /// the thread count, and a rank's part of a batch draws the whole batch's probes of its members.
  static RowMatrix gaussian_probes(Index rows, Index S, Index d, std::uint64_t key, Index first = 0);

  /// gaussian_probes' rows of examples first, ..., first + count - 1 (count S x d) into `out`.
  static void fill_gaussian_probes(std::uint64_t key, Index first, Index count, Index S, Index d, double* out);

  /// One Adam update of the constant model from the objective's value and gradient on a batch.
  void apply_constant_update(const PerturbationObjectiveValue& value, Index t);

  PerturbationObjectiveValue closed_form_objective(const SoftmaxRelease& release, const RowMatrix& X, const VectorXd& y,
                                                   const RowMatrix& probes,
                                                   const PerturbationObjectiveRequest& request) const;

  /// The mean gradient over the public part at w, its released coordinates (on the ranks of a run,
  /// each rank's shard of the public rows summed over the ranks). Collective.
  VectorXd released_mean_public_gradient(const VectorXd& w) const;

  /// Figures 3.4 and A.1 of the thesis for the constant models: the cosine of c with the mean public
  /// gradient, and the mean norms over the private batch (of batch_size members, `batch` this
  /// rank's) of M g_b, c and r_b. Collective.
  void record_constant_diagnostics(const VectorXd& w, const std::vector<Index>& batch, Index batch_size);

  /// Before private step t: the gradient model's public steps at w, and the figure 3.4 diagnostic
  /// (the mean over the batch of batch_size members, Xb this rank's). Collective.
  void train_gradient_model(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb, std::uint64_t run_seed, Index t,
                            Index batch_size);

  bool account_fil_;
  bool keep_public_records_;
  /// The ranks that train this run together (docs/distributed.md): fim's constant gradient model
  /// trains on public batches whose members are split over them (each rank the members among its
  /// shard of the public rows), the objective's value and gradient added over the ranks before each
  /// update, so every rank holds the same c. Communicator::local(): one process does it all.
  const Communicator& ranks_;  ///< PerturbationObjectiveTermCache within max_memory (check_training_memory)
  const TrainedModel& model_;
  const Dataset& public_;
  const Dataset& private_;
  const DpSgdOptions& phase_;
  const GradientModelOptions& gradient_model_;
  PrivateTrainingMethod method_;
  VectorXd start_;
  std::vector<bool> frozen_;
  Index private_first_row_;  ///< private_'s row 0 among every rank's private rows
  Index private_rows_;       ///< the private rows over all ranks
  std::vector<Index> released_;
  std::unique_ptr<ReleasedGradientBackend> backend_;
  /// Given: the constant model step 1 starts from, instead of its first training (shared by runs).
  std::optional<TrainedGradientModel> first_gradient_model_;
  // What changes as it trains: the gradient model and the diagnostics.
  std::optional<ConstantGradientModel> constant_;
  std::vector<double> cosine_, loss_;
  std::vector<VectorNorms> norms_;
  VectorXd fisher_term_sum_;
};

/// fim's constant gradient model as a run from `start` (its parameters and frozen coordinates)
/// with `run_seed` trains it before private step 1 (shared_run_start's first_gradient_model).
TrainedGradientModel first_gradient_model(const TrainedModel& model, const Dataset& public_part,
                                          const Dataset& private_part, const DpSgdOptions& phase,
                                          const GradientModelOptions& gradient_model, const RunStart& start,
                                          std::uint64_t run_seed, bool keep_public_records);

}  // namespace filkit
