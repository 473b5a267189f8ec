// The options of private training with public data (public_data_training.hpp; docs/mathematics.md,
// section 11) and their rules: the methods compared, pre-training, the private phase and fim's
// gradient model (whose own options, rules and schedule are networks/gradient_model.hpp's).
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/public_data/public_private_split.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace filkit {

/// What the private phase does (see above).
enum class PrivateTrainingMethod { kSgd, kDpSgd, kPrune, kFim };
template <>
struct EnumNames<PrivateTrainingMethod> {
  static constexpr const char* what = "private training method";
  static constexpr std::pair<PrivateTrainingMethod, const char*> names[] = {{PrivateTrainingMethod::kSgd, "sgd"},
                                                                            {PrivateTrainingMethod::kDpSgd, "dpsgd"},
                                                                            {PrivateTrainingMethod::kPrune, "prune"},
                                                                            {PrivateTrainingMethod::kFim, "fim"}};
};

/// Non-private minibatch training (pre-training, and the sgd method).
struct PlainTrainingOptions {
  Index steps = 1000;          ///< >= 0 (0: none)
  Index batch_size = 512;      ///< >= 1, at most the data's size
  double step_size = 0.01;     ///< Adam step size, > 0
  double weight_decay = 1e-4;  ///< added to the gradient times w, >= 0
  /// uniform: each batch an independent B-subset; shuffle: epochs of a permutation, every example
  /// once an epoch, the last batch short (the thesis' code). Poisson is not offered here.
  BatchSampling sampling = BatchSampling::kUniform;
  /// > 0: each example's gradient through the smooth clip at this norm before the batch's mean
  /// (the sgd method's sgd_clip); 0: the plain mean. Not an option of pre-training.
  double clip_norm = 0.0;
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
  /// sgd: each example's gradient through the smooth clip at private_phase.clip_norm, without
  /// noise, as the thesis' code trains its SGD rows (its private training at sigma 0, the clip
  /// left on); false: plain minibatch training.
  bool sgd_clip = false;
  /// The private phase (T2 steps, B2, eta2, C, sigma, optimiser, runs, seed, accounting). Its
  /// kind must be softmax, or network set; trace gaussian or exact (auto: gaussian, probes auto 2);
  /// spectral none.
  DpSgdOptions private_phase;
  GradientModelOptions gradient_model;
  /// Whether dpsgd, prune and fim account each private example's FIL (not an option of the
  /// commands: train_one_model turns it off, since a shadow model's release needs none; the
  /// traces are then zero).
  bool account_fil = true;
  /// Throws an OptionError naming the field.
  void validate() const;
};

/// sgd_clip, as the jobs that train the sgd method declare it.
template <class Visit>
void visit_sgd_clip_field(PublicDataTrainingOptions& o, Visit&& visit) {
  visit("sgd_clip", o.sgd_clip,
        "sgd: each example's gradient through the smooth clip at clip_norm, without noise, as the thesis' code's SGD "
        "(its private training at sigma 0); off: plain minibatch training");
}

/// The private phase's options as run, autos resolved (trace, probes, spectral).
DpSgdOptions resolved_private_phase(const PublicDataTrainingOptions& options, Index n_private);

nlohmann::json to_json(const PublicDataTrainingOptions& options);

}  // namespace filkit
