// The job behind `filkit learned-attack`: the learned reconstruction attack
// (leakage/learned_reconstruction.hpp; Balle et al. 2022 as in Edmunds 2024, section 3.2) against
// softmax regression trained privately with public data (public_data/public_data_training.hpp) by each
// of sgd, dpsgd, prune and fim. Load -> draw the public part, D_fixed and the candidates -> per
// method: one shadow model per candidate (train_one_model on D_fixed + {z_i}), the attacker, the
// held-out targets' reconstructions with MSE and SSIM beside the class-mean baseline.
#pragma once

#include "filkit/data/pipeline.hpp"
#include "filkit/jobs/job.hpp"
#include "filkit/leakage/learned_reconstruction.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include <map>
#include <string>
#include <vector>

namespace filkit {

/// The thesis' table B.2 as the private phase: 1000 private samples (D_fixed and the target) in
/// full batches (B = 1024 > n), 5 epochs, Adam with step size 0.1, no weight decay, sigma 0.05,
/// clip 10, softmax from w = 0 with an intercept; no pre-training; half the parameters frozen for
/// prune and fim; the gradient model on 1000 public samples with its own table B.2 settings.
inline PublicDataTrainingOptions learned_attack_training_defaults() {
  PublicDataTrainingOptions o;
  o.pretrain.steps = 0;
  o.freeze_fraction = 0.5;
  o.private_phase.kind = ModelKind::kSoftmax;
  o.private_phase.intercept = true;
  o.private_phase.batch_size = 1000;
  o.private_phase.steps = 5;
  o.private_phase.optimizer = Optimizer::kAdam;
  o.private_phase.step_size = 0.1;
  o.private_phase.weight_decay = 0.0;
  o.private_phase.noise_multiplier = 0.05;
  o.private_phase.clip_norm = 10.0;
  o.gradient_model.batch_size = 1000;
  return o;
}

struct LearnedAttackJobOptions {
  /// MNIST 0 vs 1, pixels / 255, no PCA (the attack reconstructs images), no row scaling.
  DataPipelineOptions data{
      .data = "mnist", .classes = std::vector<int>{0, 1}, .pca = 0, .row_scaling = RowScaling::kNone};
  /// Rows of the training split given to train_one_model as public data (thesis: 1000).
  Index public_size = 1000;
  LearnedReconstructionOptions attack;
  PublicDataTrainingOptions training = learned_attack_training_defaults();
  /// false: shadow model i trains with the seed derived from (seed, i), so its noise, batches and
  /// gradient model are fresh draws, as for a real release (the initialisation, w = 0 with
  /// init_scale 0, is the same for all); true: every shadow model uses `seed` itself.
  bool same_seed = false;
  /// true: every shadow model of a method starts from one start drawn from `seed`
  /// (shared_run_start: the initialisation and pre-training, and fim's first gradient-model
  /// training, none of which sees private data), made once: the attacker knows the release's start
  /// as it knows D_fixed and w_0. false: each shadow model draws its own from its own seed, so
  /// fim's first gradient model is a fresh draw in each (a weaker attacker; 1.5x the time of a fim
  /// shadow model at the thesis' settings).
  bool shared_start = true;
  /// A directory (created if missing) keeping every method's shadow models as they are trained
  /// (jobs/shadow_model_store.hpp: <method>.npy and <method>.json); a later attack with the same
  /// training settings loads them and trains only the shadow models it lacks. Empty: none kept.
  /// Under mpirun rank 0 alone reads and writes it (the other ranks send it their models), so a
  /// store grown on some number of ranks is finished on any other.
  std::string shadow_models;
  void resolve();
  void validate() const;
};

/// The settings of public-data training the attack uses (its `seed` is the attack's).
template <class Visit>
void visit_training_fields(PublicDataTrainingOptions& o, Visit&& visit) {
  visit("methods", o.methods, "Private training methods attacked: sgd, dpsgd, prune, fim");
  visit_sgd_clip_field(o, visit);
  visit_pretrain_fields(o.pretrain, visit);  // the thesis pre-trains no shadow model (default 0 here)
  visit("freeze_fraction", o.freeze_fraction, "prune and fim: fraction of the parameters frozen (smallest magnitude)");
  DpSgdOptions& p = o.private_phase;
  visit("intercept", p.intercept, "Softmax regression with an intercept");
  visit("reference_logit", o.reference_logit,
        "Hold the last class's logit at 0: for 2 classes the thesis' one-logit binary model (its predict_binary), "
        "the other class's weights never trained nor attacked");
  visit("batch_size", p.batch_size, "Private phase: batch size B (at most fixed_size + 1)");
  visit("sampling", p.sampling, "Private phase: uniform (B without replacement) or poisson (rate B/n)");
  visit("steps", p.steps, "Private phase: steps T");
  visit("step_size", p.step_size, "Private phase: step size");
  visit("optimizer", p.optimizer, "Private phase: sgd (with momentum) or adam");
  visit_adam_bias_correction_offset_field(p, visit);
  visit("weight_decay", p.weight_decay, "Private phase: weight decay");
  visit("init_scale", p.init_scale, "w_0 ~ N(0, init_scale^2 I); 0 starts every shadow model at zero");
  visit("clip_norm", p.clip_norm, "dpsgd, prune, fim: clip norm C");
  visit("noise_multiplier", p.noise_multiplier, "dpsgd, prune, fim: noise multiplier sigma");
  visit("trace", p.trace, "dpsgd, prune, fim: Tr(G^T G) per step: exact or gaussian; auto = gaussian");
  visit("probes", p.probes, "dpsgd, prune, fim: probes of the estimated trace; auto = 2");
  visit_fields(o.gradient_model, visit);
}

template <class Visit>
void visit_fields(LearnedAttackJobOptions& o, Visit&& visit) {
  visit_fields(o.data, visit);
  visit("public_size", o.public_size, "Rows of the training split used as public data (the gradient model's)");
  visit_fields(o.attack, visit);
  visit("same_seed", o.same_seed,
        "Train every shadow model with the same seed (same noise too); default: seed of model i from (seed, i)");
  visit("shared_start", o.shared_start,
        "Every shadow model starts from one start drawn from --seed (initialisation, pre-training and fim's first "
        "gradient-model training, none of which sees private data), trained once; off: each model draws its own "
        "from its own seed");
  visit_training_fields(o.training, visit);
  visit("shadow_models", o.shadow_models,
        "Keep each method's shadow models in this directory (<method>.npy, a row of parameters per shadow model, "
        "and <method>.json, what trained them), saved as they are trained: a rerun with the same training settings "
        "loads them and trains only those it lacks (resume an attack, grow it, or fit another attacker)");
}

/// One method's attack.
struct LearnedAttackMethodResult {
  PrivateTrainingMethod method = PrivateTrainingMethod::kSgd;
  LearnedReconstructionResult attack;
  Index loaded_shadow_models = 0;  ///< of options.shadow_models' store, not trained by this run
};

struct LearnedAttackJobResult final : JobResult {
  LearnedAttackJobOptions options;  ///< as run, autos resolved
  AttackData data;                  ///< the public part, D_fixed and the candidates (after preprocessing)
  Preprocessor preprocessor;
  std::vector<LearnedAttackMethodResult> methods;
  std::map<std::string, double> seconds;  ///< "load", "preprocess", "<method> shadow models", "<method> attacker"
  nlohmann::json to_json() const override;
  /// One row per (method, target): method (code, see the summary's method_codes), target (row of
  /// the candidates), label, mse, ssim, baseline_mse, baseline_ssim.
  NumericTable table() const override;
  /// "reconstructions_out": the first 16 targets' images: method (-2 = the target, -1 = the
  /// class-mean baseline, else the method's code), target, label, x0..x{d-1}.
  NumericTable extra_table(const std::string& name) const override;
  /// The first 8 targets, their class-mean baselines and each method's reconstructions (the
  /// summary's "reconstructions", drawn by the report like the thesis' figure 3.3).
  nlohmann::json reconstructions_json() const;
  void print_summary(std::ostream& out) const override;
};

/// The attack of every method: every method's shadow models, then the attackers. Under mpirun
/// (Communicator::world()) the shadow models are trained on all ranks, rank 0 alone keeps the store,
/// method k's attacker is fitted on rank k mod K, and rank 0 holds the results: the other ranks'
/// result has no method's targets.
LearnedAttackJobResult run_learned_attack(const LearnedAttackJobOptions& options, bool progress = false);

struct LearnedAttackJob {
  using Options = LearnedAttackJobOptions;
  static constexpr const char* name = "learned-attack";
  static constexpr const char* description =
      "The learned reconstruction attack (Balle et al. 2022; Edmunds 2024, section 3.2): shadow softmax models "
      "trained on D_fixed + {z_i} by sgd, dpsgd, prune or fim, an MLP (or linear) attacker from standardised "
      "parameters and the label to the image, and the MSE and SSIM of its reconstructions of held-out targets beside "
      "the class-mean (perfect privacy) baseline. LPIPS is not computed. Defaults: the thesis' table B.2 on MNIST 0 "
      "vs 1 (9500 + 500 shadow models per method).";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the thesis' learned attack (Edmunds 2024, table B.2)";
  static std::vector<DefaultReason> default_reasons() { return {{"pca", "the attack reconstructs the raw pixels"}}; }
  static constexpr const char* out_help =
      "Per-target CSV, one row per (method, target): method (0 sgd, 1 dpsgd, 2 prune, 3 fim), target, label, mse, "
      "ssim, baseline_mse, baseline_ssim";
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"reconstructions_out",
             "CSV of the first 16 targets' images: method (-2 = target, -1 = class-mean baseline, 0 sgd, 1 dpsgd, 2 "
             "prune, 3 fim), target, label, x0..x{d-1}"}};
  }
  static constexpr bool runs_on_mpi_ranks = true;  // shadow models spread over the ranks (docs/distributed.md)
  static LearnedAttackJobResult run(const Options& options, bool progress) {
    return run_learned_attack(options, progress);
  }
};

}  // namespace filkit
