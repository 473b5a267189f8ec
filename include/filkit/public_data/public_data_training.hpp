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

#include "filkit/base/enum_names.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/dpsgd/training.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// A data set cut into a public and a private part (disjoint, together every row once).
struct PublicPrivateSplit {
  Dataset public_part;
  Dataset private_part;
  std::vector<Index> public_rows;   ///< rows of the data set, in the order of public_part
  std::vector<Index> private_rows;  ///< rows of the data set, in the order of private_part
};

/// Which rows are public: a seeded random subset (filkit's default), or the first rows in the
/// data's order, as the thesis' code takes them (`get_dataset_splits`: the first
/// round(public_fraction * n) training images public, the rest private, the same for every run).
enum class PublicSplit { kRandom, kFirst };
template <>
struct EnumNames<PublicSplit> {
  static constexpr const char* what = "public split";
  static constexpr std::pair<PublicSplit, const char*> names[] = {{PublicSplit::kRandom, "random"},
                                                                  {PublicSplit::kFirst, "first"}};
};

/// round(public_fraction * n) rows are public, the rest private (both keep the data's row order):
/// chosen by a shuffle seeded with `seed`, or the first ones (PublicSplit::kFirst; `seed` unused).
/// Throws std::invalid_argument for a fraction outside (0, 1) or a part that would be empty.
PublicPrivateSplit split_public_private(const Dataset& data, double public_fraction, std::uint64_t seed,
                                        PublicSplit split = PublicSplit::kRandom);

/// Magnitude pruning: true for the round(freeze_fraction * p) coordinates of smallest |w| (ties
/// broken by index). freeze_fraction in [0, 1). With `fixed` (one flag per coordinate), the fixed
/// coordinates are frozen as well and the fraction applies to the others: p counts those only.
std::vector<bool> smallest_magnitude_mask(const VectorXd& w, double freeze_fraction,
                                          const std::vector<bool>& fixed = {});

/// What the private phase does (see above).
enum class PrivateTrainingMethod { kSgd, kDpSgd, kPrune, kFim };
template <>
struct EnumNames<PrivateTrainingMethod> {
  static constexpr const char* what = "private training method";
  static constexpr std::pair<PrivateTrainingMethod, const char*> names[] = {
      {PrivateTrainingMethod::kSgd, "sgd"},
      {PrivateTrainingMethod::kDpSgd, "dpsgd"},
      {PrivateTrainingMethod::kPrune, "prune"},
      {PrivateTrainingMethod::kFim, "fim"}};
};

/// Non-private minibatch training (pre-training, and the sgd method).
struct PlainTrainingOptions {
  Index steps = 1000;       ///< >= 0 (0: none)
  Index batch_size = 512;   ///< >= 1, at most the data's size
  double step_size = 0.01;  ///< Adam step size, > 0
  double weight_decay = 1e-4;  ///< added to the gradient times w, >= 0
  /// uniform: each batch an independent B-subset; shuffle: epochs of a permutation, every example
  /// once an epoch, the last batch short (the thesis' code). Poisson is not offered here.
  BatchSampling sampling = BatchSampling::kUniform;
  void validate(const std::string& name) const;
};

/// The pre-training options as the fim and learned-attack jobs declare them (pretrain_steps, ...).
template <class Visit>
void visit_pretrain_fields(PlainTrainingOptions& o, Visit&& visit) {
  visit("pretrain_steps", o.steps, "Pre-training steps (Adam, no privacy) on the public part; 0: none");
  visit("pretrain_batch_size", o.batch_size, "Pre-training batch size");
  visit("pretrain_step_size", o.step_size, "Pre-training Adam step size");
  visit("pretrain_weight_decay", o.weight_decay, "Pre-training weight decay");
  visit("pretrain_sampling", o.sampling,
        "Pre-training batches: uniform (independent B-subsets) or shuffle (epochs of a permutation, every public "
        "example once an epoch, as the thesis' code)");
}

struct PublicDataTrainingOptions {
  /// Fraction of the training rows that are public, in (0, 1). Thesis: 0.5 (table 3.1), 0.05 (3.2).
  double public_fraction = 0.5;
  /// Which rows are public (split_public_private). Thesis: the first ones.
  PublicSplit public_split = PublicSplit::kRandom;
  /// Pre-training on the public part (T1, B1, eta1); steps 0 starts the private phase from
  /// private_phase.init_scale's initialisation.
  PlainTrainingOptions pretrain;
  /// Fraction of the pre-trained parameters frozen for prune and fim, in [0, 1). Thesis: 0.5.
  double freeze_fraction = 0.5;
  /// Softmax regression: hold the last class's logit at 0 (its weights zero, never trained nor
  /// released), so K classes have K - 1 trained logits. For 2 classes this is the thesis' binary
  /// model (its `predict_binary` appends a constant 0 logit to one): d + 1 parameters instead of
  /// 2 (d + 1), whose gradient is 1/sqrt(2) of the two-logit model's.
  bool reference_logit = false;
  /// The methods compared, each from the same pre-trained model and the same seeds.
  std::vector<PrivateTrainingMethod> methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd,
                                                PrivateTrainingMethod::kPrune, PrivateTrainingMethod::kFim};
  /// The private phase (T2 steps, B2, eta2, C, sigma, optimiser, runs, seed, accounting). Its
  /// kind must be softmax, or network set; trace gaussian or exact (auto: gaussian, probes auto 2);
  /// spectral none.
  DpSgdOptions private_phase;
  GradientModelOptions gradient_model;
  /// Whether dpsgd, prune and fim account each private example's FIL (not an option of the
  /// commands: train_one_model turns it off, since a shadow model's release needs none; the
  /// traces are then zero).
  bool account_fil = true;
  /// Throws std::invalid_argument naming the field.
  void validate() const;
};

/// The private phase's options as run, autos resolved (trace, probes, spectral).
DpSgdOptions resolved_private_phase(const PublicDataTrainingOptions& options, Index n_private);

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
  std::vector<VectorXd> thesis_trace_sum;
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
/// plugin (so do dpsgd and prune, which share its accounting code). Throws std::invalid_argument
/// for bad options, labels that are not class indices, feature counts that differ, and
/// std::runtime_error when the plugin does not load. With private_phase.checkpoint_path (one
/// method, not the conditional gradient model) the private phase saves its state there and
/// resumes from it, the gradient model's included; pre-training is repeated (it is seeded).
PublicDataTrainingResult train_with_public_data(const Dataset& public_part, const Dataset& private_part,
                                                const Dataset& test, const PublicDataTrainingOptions& options,
                                                bool progress = false,
                                                CheckpointWhenDone when_done = CheckpointWhenDone::kRemove);

/// The final parameters of one run of one method trained on `private_part` (the learned attack's
/// shadow models: same initialisation and procedure for every shadow data set). runs must be 1.
VectorXd train_one_model(const Dataset& public_part, const Dataset& private_part,
                         const PublicDataTrainingOptions& options, PrivateTrainingMethod method);

nlohmann::json to_json(const PublicDataTrainingOptions& options);

}  // namespace filkit
