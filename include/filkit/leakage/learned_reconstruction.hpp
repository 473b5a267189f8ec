// The learned reconstruction attack (Balle, Cherubin and Hayes 2022, "Reconstructing training data
// with informed adversaries", as used in Edmunds 2024, section 3.2): an informed adversary knows
// every training example but one, D_fixed, and the training procedure (initialisation included).
// It trains shadow models on D_fixed + {z_i} for many candidates z_i from the same distribution,
// and learns a map from a released model (with the target's label, which is public) back to the
// target's image. The attack is then run on held-out shadow models whose z it has not seen.
//
//   input  = standardised parameters (mean and standard deviation per coordinate, fitted on the
//            training shadow models only; a held-out target's clipped to their range) concatenated
//            with the one-hot label;
//   output = the example's features (pixels);
//   attacker = an MLP (ReLU hidden layers, squared error, Adam with L2 weight decay as PyTorch's
//            Adam), or, with no hidden layer, least squares solved in closed form, one linear map
//            per label (the one-hot label chooses the map: one gradient step of softmax
//            regression moves the parameters by +-x depending on the label, so a single map
//            over all labels could not invert even that).
//
// Reported per held-out target: MSE (mean over pixels of the squared error) and SSIM (Wang et al.
// 2004, 7x7 uniform window, sample covariances, K1 = 0.01, K2 = 0.03, data range 1, mean over the
// windows that lie inside the image and over channels), beside the "perfect privacy" baseline,
// the mean image of the training candidates with the target's label (what the label alone gives).
// LPIPS needs a pretrained network that cannot be installed here, so it is not computed.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/initialisers.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/data/dataset.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

struct LearnedReconstructionOptions {
  /// Shadow models the attacker is trained on (thesis: 9500) and held-out targets (thesis: 500).
  Index train_shadow_models = 9500;
  Index target_shadow_models = 500;
  /// Examples in D_fixed, the data every shadow model shares (thesis: 1000 private samples in all,
  /// so 999 fixed and the target).
  Index fixed_size = 999;
  /// Widths of the attacker's ReLU hidden layers (thesis, table B.8: 512, 256); empty: the linear
  /// least-squares attacker in closed form.
  std::vector<Index> attacker_hidden = {512, 256};
  /// Clip each standardised input of a held-out target to the range it takes over the training
  /// shadow models. A coordinate almost constant on them (binary MNIST, sgd: the weight of a pixel
  /// that is dark in nearly every image, which Adam's normalised steps move by about the step size
  /// only for the few targets that light it) divides a held-out value by a tiny deviation, and
  /// the attacker extrapolates linearly (500 sgd shadow models: one target's MSE 3.8e4 unclipped).
  bool clip_inputs = true;
  /// Linear attacker: ridge added to the diagonal of X^T X / m (inputs standardised; intercept not
  /// penalised), >= 0. With fewer shadow models per label than parameters the map is
  /// underdetermined and a small ridge lets a few targets' errors explode (binary MNIST, sgd, 1000
  /// models: mean MSE 6.1 at 1e-4, 0.14 at 1e-2, 0.017 at 1).
  double ridge = 1.0;
  /// MLP attacker: epochs, minibatch size, Adam step size and L2 weight decay, as the thesis' code
  /// (configs/e2.yaml: 100, 64, 0.001, 0.1). Its tables B.3 and B.4 print per-method settings: decay
  /// 0.01 for sgd and dpsgd, 0.1 for prune (100 epochs at 0.001); fim 30 epochs at 0.01, decay 0.1.
  Index attacker_epochs = 100;
  Index attacker_batch_size = 64;
  double attacker_step_size = 1e-3;
  double attacker_weight_decay = 0.1;
  /// MLP attacker: how its layers draw their starting weights (base/initialisers.hpp): pytorch
  /// (filkit's default) or jax (stax's Dense, as the thesis' code's attacker).
  NetworkInitialisation attacker_initialisation = NetworkInitialisation::kPyTorch;
  /// Seeds the choice of D_fixed and the candidates, the attacker's initialisation and batches.
  std::uint64_t seed = 0;
  /// Memory budget of the attacker (estimate_attacker_memory), refused before it is fitted. The
  /// learned-attack job sets it from --max-memory; not an option of its own.
  ByteSize max_memory = default_memory_budget();
  /// Throws std::invalid_argument naming the field, its value and the rule.
  void validate() const;
};

template <class Visit>
void visit_fields(LearnedReconstructionOptions& o, Visit&& visit) {
  visit("train_shadow_models", o.train_shadow_models, "Shadow models the attacker is trained on (thesis: 9500)");
  visit("target_shadow_models", o.target_shadow_models, "Held-out shadow models whose example is reconstructed");
  visit("fixed_size", o.fixed_size, "Examples in D_fixed, the training data every shadow model shares");
  visit("attacker_hidden", o.attacker_hidden,
        "Attacker MLP's ReLU hidden widths; empty: linear least squares in closed form (one map per label)");
  visit("clip_inputs", o.clip_inputs,
        "Clip held-out targets' standardised parameters to the range seen over the training shadow models");
  visit("ridge", o.ridge, "Linear attacker: ridge added to the diagonal of X^T X / m");
  visit("attacker_epochs", o.attacker_epochs, "MLP attacker: epochs over the training shadow models");
  visit("attacker_batch_size", o.attacker_batch_size, "MLP attacker: minibatch size");
  visit("attacker_step_size", o.attacker_step_size, "MLP attacker: Adam step size");
  visit("attacker_weight_decay", o.attacker_weight_decay, "MLP attacker: Adam's L2 weight decay");
  visit("attacker_init", o.attacker_initialisation,
        "MLP attacker: pytorch (every weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))) or jax (stax's Dense, as "
        "the thesis' code's attacker: glorot_normal weights, N(0, 1e-2^2) biases)");
  visit("seed", o.seed, "Seed of D_fixed and the candidates, and of the attacker's initialisation and batches");
}

/// The shared data and the candidates z_i, drawn from one data set.
struct AttackData {
  Dataset public_part;  ///< public_size rows for the trainer's public data (empty for 0)
  Dataset fixed;        ///< D_fixed
  Dataset candidates;   ///< train_shadow_models + target_shadow_models examples: training ones first
};

/// Draws a public part (public_size rows), D_fixed (fixed_size rows) and the candidates (train +
/// target shadow models) from `data` without overlap by a seeded shuffle. Throws
/// std::invalid_argument when `data` has too few rows.
AttackData draw_attack_data(const Dataset& data, const LearnedReconstructionOptions& options, Index public_size = 0);

/// Trains a model on `train` with the same initialisation and procedure for every shadow model and
/// returns the released parameters. `model` (0, 1, ...) is the shadow model's index, from which a
/// trainer may derive the seed of its noise (fresh for every release); nothing else may depend on
/// it. Called concurrently from several threads: it must be thread-safe.
using ShadowTrainer = std::function<VectorXd(const Dataset& train, Index model)>;

/// D_fixed followed by the one candidate row: the shadow model's training data.
Dataset with_candidate(const Dataset& fixed, const Dataset& candidates, Index candidate);

/// Mean SSIM of two images of `shape` (rows as in data/dataset.hpp): 7x7 uniform windows inside
/// the image, sample (co)variances, C1 = (0.01 L)^2, C2 = (0.03 L)^2 for data range L, averaged
/// over windows and channels. Throws std::invalid_argument when a side is below 7 or the sizes
/// differ from the shape's.
double ssim(const VectorXd& x, const VectorXd& y, const ImageShape& shape, double data_range = 1.0);

/// A regression map from attack inputs (rows) to features, fitted by fit_attacker.
struct Attacker {
  std::vector<MatrixXd> weights;  ///< MLP layer l: out x in; linear: one (inputs + 1) x out map per label
  std::vector<VectorXd> biases;   ///< MLP only
  /// MLP only: the one-hot label's columns are standardised as the parameters are (the thesis'
  /// utils.standardize_data over [parameters, one-hot label]), by these means and scales of the
  /// shadow models the attacker was fitted to.
  VectorXd label_mean, label_scale;
  bool linear = false;
  /// Predictions for standardised parameters (rows) with their labels, one row each.
  RowMatrix predict(const RowMatrix& standardised, const VectorXd& labels) const;
};

/// Fits the attacker of `options` (MLP or the linear map per label) to standardised parameters and
/// labels (0..num_classes-1) -> outputs.
Attacker fit_attacker(const RowMatrix& standardised, const VectorXd& labels, const RowMatrix& outputs,
                      Index num_classes, const LearnedReconstructionOptions& options, bool progress = false);

/// The MLP's loss for `inputs` (standardised parameters, then the standardised one-hot label): the
/// squared error summed over the outputs, averaged over the rows, as the thesis' 'mse' loss (so its
/// L2 weight decay weighs against the whole image's error, not one pixel's); and its gradient into
/// `gradient` (shaped like `attacker`) unless null.
double mlp_loss_and_gradient(const Attacker& attacker, const RowMatrix& inputs, const RowMatrix& outputs,
                             Attacker* gradient);

/// What fitting the attacker holds, estimated before it is allocated (bytes, saturating).
struct AttackerMemoryEstimate {
  Index parameter_count = 0;      ///< the MLP's weights and biases, or the linear maps' coefficients
  std::uint64_t parameters = 0;   ///< MLP: with its gradient and Adam's two moments; linear: the maps
  std::uint64_t activations = 0;  ///< MLP: a minibatch's layer outputs and their gradients; linear: X^T X, its factors
  std::uint64_t inputs = 0;       ///< the shadow models' parameters, standardised, and the MLP's input copy
  std::uint64_t total() const;
  std::string describe() const;
};

/// The attacker of `options` for shadow models of `parameter_count` parameters, `num_classes`
/// labels and `features` outputs (the MLP takes parameter_count + num_classes inputs).
AttackerMemoryEstimate estimate_attacker_memory(const LearnedReconstructionOptions& options, Index parameter_count,
                                                Index num_classes, Index features);

/// Refuses (check_memory's message, naming attacker_hidden, attacker_batch_size and the shadow
/// models) an attacker whose estimate is beyond options.max_memory.
void check_attacker_memory(const LearnedReconstructionOptions& options, Index parameter_count, Index num_classes,
                           Index features);

/// What the whole attack holds at its peak, estimated before any shadow model is trained: the
/// shadow models trained at once (one a thread, `shadow_model` bytes each), then the attacker with
/// every shadow model's parameters (estimate_attacker_memory), whichever is larger.
struct LearnedAttackMemoryEstimate {
  AttackerMemoryEstimate attacker;
  std::uint64_t shadow_model = 0;  ///< training one shadow model (its data, parameters, gradient model)
  Index threads = 1;               ///< shadow models trained at once
  std::uint64_t kept = 0;          ///< what the caller keeps beside them (learned-attack's --shadow-models store)
  std::uint64_t shadow_training() const;  ///< threads x shadow_model and `kept`, beside the parameters kept so far
  std::uint64_t total() const;
  std::string describe() const;
};

/// Refuses (check_memory's message, naming the options that shrink it) an attack on shadow models
/// of `parameter_count` parameters, each needing `shadow_model` bytes to train, whose estimate is
/// beyond options.max_memory. Call it before training: run_learned_reconstruction checks the
/// attacker again once the shadow models' parameters are counted.
void check_learned_attack_memory(const LearnedReconstructionOptions& options, Index parameter_count, Index num_classes,
                                 Index features, std::uint64_t shadow_model, std::uint64_t kept = 0);

/// A new MLP of these widths, its layers drawn as `initialisation` says (base/initialisers.hpp).
Attacker initial_mlp(Index inputs, const std::vector<Index>& hidden, Index outputs, std::uint64_t seed,
                     NetworkInitialisation initialisation = NetworkInitialisation::kPyTorch);

/// One held-out target's reconstruction and its scores.
struct TargetReconstruction {
  Index candidate = 0;  ///< row of the candidates
  double label = 0;
  double mse = 0, ssim = 0;                    ///< of the attack
  double baseline_mse = 0, baseline_ssim = 0;  ///< of the class-mean image
  VectorXd reconstruction;
};

struct LearnedReconstructionResult {
  Index parameter_count = 0, num_classes = 0, features = 0;
  std::vector<TargetReconstruction> targets;
  /// Per label: the mean image of the training candidates (the perfect-privacy reconstruction).
  std::vector<VectorXd> class_means;
  bool has_ssim = false;  ///< false for rows without an image shape (then every ssim is NaN)
  double shadow_seconds = 0, attacker_seconds = 0;
};

/// Shadow models kept from an earlier run (learned-attack's --shadow-models store), and where the
/// ones trained now go. Rank 0's alone: the other ranks of an MPI job pass none.
struct KeptShadowModels {
  /// Shadow model i's parameters when kept, else nullopt; asked once per model before any is trained.
  std::function<std::optional<VectorXd>(Index)> find;
  /// Each newly trained model (trained on any rank), as it reaches rank 0.
  std::function<void(Index, const VectorXd&)> add;
  /// Called before the ranks stop on an error in a shadow model's training: keep what was added.
  std::function<void()> save;
};

/// The parameters of shadow models 0 .. count - 1, one row each (model i trained on D_fixed +
/// candidate i by `train`), at rank 0; an empty matrix on the other ranks. The models `kept` does
/// not hold are spread over the ranks of `comm` in waves (each rank trains a contiguous share of a
/// wave, one model a thread, then rank 0 gathers the wave and hands it to kept.add); since model i
/// depends on i alone, the rows are the same for any number of ranks and threads. A progress line
/// on stderr at rank 0 when `progress` (kept models count as done before it started). An error on
/// one rank ends every rank at the end of its wave: rank 0 first gathers nothing more of it, calls
/// kept.save, then a failing rank rethrows its error, rank 0 (when it did not fail) throws a
/// ResourceError naming the failing ranks and their errors, and the others StoppedWithRankZero.
/// Collective.
RowMatrix train_shadow_models(const Dataset& fixed, const Dataset& candidates, Index count, const ShadowTrainer& train,
                              bool progress = false, const KeptShadowModels& kept = {},
                              const Communicator& comm = Communicator::local());

/// The attack end to end: trains one shadow model per candidate (train_shadow_models: in parallel
/// over the OpenMP threads and the ranks of `comm`; model i depends only on candidate i, so the
/// results depend on neither count), a progress line on stderr when `progress`, then, at rank 0,
/// the attacker on the first train_shadow_models and the reconstructions of the rest. The other
/// ranks return a result with only the counts. Throws std::invalid_argument for bad options, an
/// empty D_fixed, too few candidates, features or image shapes that differ, labels that are not
/// class indices, a candidate label D_fixed does not have, or parameter vectors that differ in size.
LearnedReconstructionResult run_learned_reconstruction(const Dataset& fixed, const Dataset& candidates,
                                                       const ShadowTrainer& train,
                                                       const LearnedReconstructionOptions& options,
                                                       bool progress = false, const KeptShadowModels& kept = {},
                                                       const Communicator& comm = Communicator::local());

/// Throws std::invalid_argument for inputs the attack cannot use (run_learned_reconstruction's
/// list); returns the number of classes.
Index check_attack_inputs(const Dataset& fixed, const Dataset& candidates, const LearnedReconstructionOptions& options);

/// run_learned_reconstruction's attack on one process, from the shadow models' parameters
/// (train_shadow_models' rows: the options' train_shadow_models, then its target_shadow_models):
/// the attacker fitted to the first, the others' targets reconstructed and scored beside the
/// class-mean baseline (shadow_seconds left 0). Throws as run_learned_reconstruction.
LearnedReconstructionResult attack_shadow_models(const RowMatrix& parameters, const Dataset& fixed,
                                                 const Dataset& candidates, const LearnedReconstructionOptions& options,
                                                 bool progress = false);

/// The note recorded in summaries in place of LPIPS.
inline constexpr const char* kLpipsNote =
    "LPIPS (Zhang et al. 2018, used by the thesis' table 3.5) is not computed: it needs pretrained network weights "
    "(AlexNet/VGG) that cannot be installed here, and no substitute is reported";

}  // namespace filkit
