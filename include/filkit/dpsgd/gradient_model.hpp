// The options of fim's learned gradient model g_phi (public_data_training.hpp; docs/mathematics.md,
// section 11; Edmunds 2024, chapter 2 and table B.6): what it outputs, the objective it is trained
// to on public data, its shape and its optimiser. A header of its own because the LibTorch plugin,
// compiled as C++17, reads it (network_backend.hpp).
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/types.hpp"

#include <vector>

namespace filkit {

/// What the gradient model outputs and is fitted to.
enum class GradientObjective {
  kPerturbation,  ///< g_phi is added to the gradient, penalised by ||g_phi||^2 (thesis 2.5-2.9)
  kGradient,      ///< g_phi replaces the gradient, fitted by ||grad l - g_phi||^2 (thesis 2.4)
};
template <>
struct EnumNames<GradientObjective> {
  static constexpr const char* what = "gradient objective";
  static constexpr std::pair<GradientObjective, const char*> names[] = {
      {GradientObjective::kPerturbation, "perturbation"}, {GradientObjective::kGradient, "gradient"}};
};

/// The learned gradient model of fim and its training on public data.
struct GradientModelOptions {
  GradientObjective objective = GradientObjective::kPerturbation;
  /// lambda >= 0: weight of the Fisher term. Thesis: 1e3.
  double lambda = 1e3;
  /// Divide the Fisher term by ||r||^2 (the signal-to-noise form, thesis equation 2.8).
  bool snr = true;
  /// Widths of the dense hidden layers (each >= 1, at least one). Thesis: 256, 256.
  std::vector<Index> hidden = {256, 256};
  /// The convolutional branch over image rows (ignored for rows without an image shape).
  bool conv = true;
  /// Public steps before the first private step (T3), then `decay` fewer before each next one, but
  /// at least `min_steps` (the thesis' epochs, epoch decay and min epochs, counted in batches).
  Index steps = 200;
  Index decay = 50;
  Index min_steps = 20;
  /// Public batch size (B3, >= 1; at most the public part's size).
  Index batch_size = 512;
  /// AdamW step size (> 0) and decoupled weight decay (>= 0). Thesis: 0.01 and 0.1.
  double step_size = 0.01;
  double weight_decay = 0.1;
  /// Hutchinson probes per example in the training objective (>= 1). Thesis: 2.
  int probes = 2;
  /// Public steps before private step t (1-based).
  Index steps_before(Index t) const;
  void validate() const;
};

template <class Visit>
void visit_fields(GradientModelOptions& o, Visit&& visit) {
  visit("objective", o.objective, "fim: perturbation (g_phi added to the gradient) or gradient (g_phi replaces it)");
  visit("lambda", o.lambda, "fim: weight of the Fisher term ||d r/dx||_F^2 in the gradient model's objective");
  visit("snr", o.snr, "fim: divide the Fisher term by ||r||^2 (the signal-to-noise form)");
  visit("gradient_hidden", o.hidden, "fim: the gradient model's dense hidden widths");
  visit("gradient_conv", o.conv, "fim: the gradient model's convolutional branch over images");
  visit("gradient_steps", o.steps, "fim: public steps of the gradient model before the first private step");
  visit("gradient_decay", o.decay, "fim: that many fewer before each next private step");
  visit("gradient_min_steps", o.min_steps, "fim: but at least this many");
  visit("gradient_batch_size", o.batch_size, "fim: public batch size of the gradient model");
  visit("gradient_step_size", o.step_size, "fim: AdamW step size of the gradient model");
  visit("gradient_weight_decay", o.weight_decay, "fim: AdamW weight decay of the gradient model");
  visit("gradient_probes", o.probes, "fim: Hutchinson probes per example in the gradient model's objective");
}

}  // namespace filkit
