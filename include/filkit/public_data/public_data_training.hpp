// Private training that uses public data to leak less Fisher information (docs/mathematics.md,
// section 11; Edmunds 2024, "Fisher information for private training of machine learning models",
// chapter 2 and Algorithm 1):
//
//   1. split the data into a public and a private part (split_public_private, seeded);
//   2. pre-train the model on the public part without privacy (T1 steps; Algorithm 1, lines 3-6);
//   3. optionally freeze the smallest-magnitude fraction of the pre-trained parameters (magnitude
//      pruning, thesis section 2.2): their gradient coordinates are never released, so they are not
//      in the clipped vector, not in its norm, get no noise, and contribute nothing to the FIL;
//   4. train on the private part by one of
//        sgd:    non-private minibatch training (the utility reference; no accounting);
//        dpsgd:  DP-SGD (GELU clipping, Gaussian noise) with per-example FIL accounting;
//        prune:  dpsgd with the frozen coordinates of step 3;
//        fim:    prune (or dpsgd, with freeze_fraction 0) releasing r = clip(M grad l + c), c a learned
//                constant (the thesis' gradient model as its code computes it: its batch
//                normalisation over a batch of one example outputs its shift; constant_gradient_model.hpp),
//                trained before each private step on public batches at the current parameters to
//                minimise the mean of ||c||^2 + lambda (T + 1e-7) / ||r||^2, T the mean of ||J v||^2
//                over input-space probes (or Tr(J^T J)); or, with gradient_model conditional (filkit's
//                own extension), an input-dependent g_phi(theta, x, M grad l) (thesis equations 2.4,
//                2.7-2.9, per-example layer normalisation, a third derivative through LibTorch).
//                The private step releases sum_b r_b + N(0, s^2 C^2 I) on the unfrozen coordinates,
//                and the accountant of training.hpp adds kappa Tr(J_b^T J_b) / (s C)^2 for each batch
//                member, J_b = d r_b / d x_b (labels public, as in the thesis).
// The gradient model is post-processing of public data and of the released parameters, so it
// changes nothing in the DP guarantee (the RDP accountant's eps is the same for dpsgd, prune and
// fim) while it changes the per-example FIL.
//
// The model trained is softmax regression (K >= 2 classes, optional intercept; the thesis' tables
// 3.1, 3.3 and 3.4), parameters in the GLM's order (W column by column), or a smooth network of
// networks.hpp (private_phase.network; the thesis' table 3.2 ConvNet), parameters in its order.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/public_data/constant_gradient_model.hpp"
#include "filkit/public_data/public_data_options.hpp"
#include "filkit/public_data/public_private_split.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// The thesis' figure A.1 at one private step: mean norms over the batch.
struct VectorNorms {
  double base = 0.0;          ///< ||M g_b||: the plain gradient on the released coordinates
  double perturbation = 0.0;  ///< ||c||
  double released = 0.0;      ///< ||r_b|| = ||clip(M g_b + c)||
};

/// One method's result over the runs.
struct MethodResult {
  PrivateTrainingMethod method = PrivateTrainingMethod::kDpSgd;
  /// dpsgd, prune, fim: the accountant's result (per-example traces of the private examples,
  /// accuracies, the RDP eps). sgd: only the accuracies (snapshots[0]), no traces.
  DpSgdResult training;
  /// Coordinates frozen (prune, fim; else 0).
  Index frozen = 0;
  /// fim: per run and private step, the mean over the private batch of the cosine similarity of the
  /// learned perturbation g_phi(theta_t, z_b) with the mean public gradient at theta_t (thesis
  /// figure 3.4), and the gradient model's objective after its last public step.
  std::vector<std::vector<double>> perturbation_cosine;
  std::vector<std::vector<double>> gradient_model_loss;
  /// fim with a constant model: per run and private step (empty for conditional).
  std::vector<std::vector<VectorNorms>> vector_norms;
  /// dpsgd, prune, fim (with accounting): per run, per private example, the sum over the steps that
  /// sampled it of T + 1e-7, T the trace estimated by 2 Gaussian probes (NaN as 0): the thesis'
  /// accountant (its accountant.py), before the factor kappa / (sigma C)^2. Empty without accounting.
  std::vector<VectorXd> fisher_term_sum;
  /// fim on a network with per-batch probes over epochs: how the objective's terms were computed,
  /// kPublicRecordsKept or kPublicRecordsPerBatch (the kept records would exceed max_memory); else
  /// empty. The same numbers either way, to rounding; the first is about twice as fast.
  std::string objective_terms;
};

/// MethodResult::objective_terms.
inline constexpr const char* kPublicRecordsKept = "every public example's records kept for each private step";
inline constexpr const char* kPublicRecordsPerBatch =
    "computed afresh for each public batch: keeping every public example's records would exceed max_memory";

struct PublicDataTrainingResult {
  Index n_public = 0, n_private = 0, num_classes = 0, parameter_count = 0;
  /// Test (and train = private part) accuracy of the pre-trained model, one per run.
  std::vector<double> pretrain_test_accuracy, pretrain_train_accuracy;
  /// The pre-trained model of each run, where every method of the run starts.
  std::vector<VectorXd> pretrain_parameters;
  std::vector<MethodResult> methods;
  std::map<std::string, double> seconds;
  /// false: stopped by private_phase.stop_after, the state in private_phase.checkpoint_path (run
  /// again to resume); the method's training is then incomplete too.
  bool complete = true;
  const MethodResult* find(PrivateTrainingMethod method) const;
};

/// Pre-trains on `public_part`, then trains on `private_part` by every method of
/// options.methods, `private_phase.runs` runs each (run r of every method starts from the same
/// pre-trained model and uses the same batches and noise seeds). The fim method needs the LibTorch
/// plugin (so do dpsgd and prune, which share its accounting code). Throws an OptionError for bad
/// options, a DataError for labels that are not class indices or feature counts that differ, a
/// NumericalError when training diverges, and std::runtime_error when the plugin does not load.
/// With private_phase.checkpoint_path (one method, not the conditional gradient model) the private
/// phase saves its state there and resumes from it, the gradient model's included; pre-training is
/// repeated (it is seeded).
///
/// `ranks`: the MPI ranks that train these runs together (docs/distributed.md), each called with
/// the whole data and the same options: pre-training and sgd run on every rank alike (the same
/// numbers everywhere); fim's constant gradient model trains on public batches whose members are
/// split over the ranks (the objective added over them before each update); and dpsgd, prune and
/// fim release and account the members of each private batch among the rank's shard of the private
/// rows, the released sums added over the ranks, so the results agree with one process's to
/// rounding. Rank 0 returns the whole result; the others' lack the snapshots and the per-example
/// accounting. A resume file (private_phase.checkpoint_path) is written by rank 0 over all rows
/// and read by every rank.
PublicDataTrainingResult train_with_public_data(const Dataset& public_part, const Dataset& private_part,
                                                const Dataset& test, const PublicDataTrainingOptions& options,
                                                bool progress = false,
                                                CheckpointWhenDone when_done = CheckpointWhenDone::kRemove,
                                                const Communicator& ranks = Communicator::local());

/// The result of one train_with_public_data call with `options` (private_phase.runs = R) from its
/// runs trained apart: `runs[r]` from a call of one run with private_phase.seed =
/// seed_of_run_alone(private_phase, r) and the same methods, the same data (each of them on an
/// MPI rank, say; docs/distributed.md). Bit for bit that call's result but for the timings
/// (summed), frozen and objective_terms taken from run 0, as that call takes them. Throws
/// std::logic_error for results that are not such runs.
PublicDataTrainingResult combine_runs(const std::vector<PublicDataTrainingResult>& runs,
                                      const PublicDataTrainingOptions& options);

/// fim's constant gradient model after its training before private step 1: its parameters and
/// Adam's moments, and the objective after its last public batch (MethodResult::gradient_model_loss).
struct TrainedGradientModel {
  ConstantGradientModel::State state;
  double loss = 0.0;
};

/// What every method of a run starts from: the pre-trained parameters, their frozen coordinates
/// and, where given, fim's first gradient model. None of it depends on the private data (only on
/// the public part, the options and the seed), so the learned attack's shadow models share one
/// (shared_run_start).
struct RunStart {
  VectorXd parameters;       ///< pre-trained (or initialised) on the public part
  std::vector<bool> frozen;  ///< the smallest-magnitude coordinates of `parameters`, and the fixed ones
  /// fim with a constant gradient model: that model trained before private step 1 at `parameters`
  /// (the first and longest of its trainings: gradient_steps, then gradient_decay fewer each step).
  /// Empty: each run trains its own.
  std::optional<TrainedGradientModel> first_gradient_model;
};

/// The start of run 0 of `options` (options.private_phase.seed) for `method`, its first gradient
/// model trained for fim with a constant model, as train_with_public_data computes them; of
/// private_part only its shape (features, classes) is used. Throws as train_with_public_data.
RunStart shared_run_start(const Dataset& public_part, const Dataset& private_part,
                          const PublicDataTrainingOptions& options, PrivateTrainingMethod method);

/// The final parameters of one run of one method trained on `private_part` from `start` (the
/// learned attack's shadow models: the same start, shared_run_start's, and the same procedure for
/// every shadow data set; the private phase's batches and noise from options.private_phase.seed),
/// or from the run's own start where `start` is null: run 0 of train_with_public_data, which
/// `start` = shared_run_start(public_part, private_part, options, method) gives bit for bit too (a
/// test checks). runs must be 1.
VectorXd train_one_model(const Dataset& public_part, const Dataset& private_part,
                         const PublicDataTrainingOptions& options, PrivateTrainingMethod method,
                         const RunStart* start = nullptr);

}  // namespace filkit
