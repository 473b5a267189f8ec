// The options of fim's learned gradient model g_phi (public_data_training.hpp; docs/mathematics.md,
// section 11; Edmunds 2024, chapter 2 and table B.6): what it outputs, the objective it is trained
// to on public data, its shape and its optimiser. A header of its own because the LibTorch plugin,
// compiled as C++17, reads it (network_backend.hpp).
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/precision.hpp"
#include "filkit/base/types.hpp"
#include "filkit/data/dataset.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

struct NetworkPlan;

/// The thesis' Hutchinson probes per example (its fisher_iters, for the accountant and the gradient
/// model's objective) and the floor its code adds to each trace estimate (it squares sqrt(T + 1e-7)).
inline constexpr Index kFisherTermProbes = 2;
inline constexpr double kFisherTermFloor = 1e-7;

/// Which gradient model fim learns (docs/mathematics.md, section 11.3).
enum class GradientModelKind {
  /// The thesis' model as its code computes it: its normalise-then-dense stack sees a batch of one
  /// example, so it outputs the same vector c(phi) = W_o gelu(W beta + b) + b_o for every input;
  /// only the layers after its last normalisation are parameters (Edmunds 2024, appendix A).
  kConstant,
  /// c itself is the parameter vector (the simplest constant perturbation), starting at 0.
  kVector,
  /// filkit's own extension: an input-dependent g_phi(x, theta, M grad l) with per-example layer
  /// normalisation (a harder problem than the thesis solved; see experiments/README.md).
  kConditional,
};
template <>
struct EnumNames<GradientModelKind> {
  static constexpr const char* what = "gradient model";
  static constexpr std::pair<GradientModelKind, const char*> names[] = {
      {GradientModelKind::kConstant, "constant"},
      {GradientModelKind::kVector, "vector"},
      {GradientModelKind::kConditional, "conditional"}};
};

/// What the gradient model's schedule (steps, decay, min_steps) counts.
enum class ScheduleUnit {
  kEpochs,   ///< full passes over the public part (a permutation each, the last batch short), as the thesis
  kBatches,  ///< uniformly drawn public batches
};
template <>
struct EnumNames<ScheduleUnit> {
  static constexpr const char* what = "schedule unit";
  static constexpr std::pair<ScheduleUnit, const char*> names[] = {{ScheduleUnit::kEpochs, "epochs"},
                                                                   {ScheduleUnit::kBatches, "batches"}};
};

/// How the Fisher term ||d r/dx||_F^2 of the constant models' objective is estimated.
enum class GradientTrace {
  kProbes,  ///< the mean of ||J v||^2 over `probes` input-space Gaussian probes v (the thesis' code)
  kExact,   ///< Tr(J^T J) itself: the probes' expectation, so the expected objective and gradient
};
template <>
struct EnumNames<GradientTrace> {
  static constexpr const char* what = "gradient trace";
  static constexpr std::pair<GradientTrace, const char*> names[] = {{GradientTrace::kProbes, "probes"},
                                                                    {GradientTrace::kExact, "exact"}};
};

/// When the constant models' objective draws its input-space probes (GradientTrace::kProbes).
enum class ProbeDraws {
  kBatch,  ///< afresh for every public batch, as the thesis' code (a new key a batch)
  kStep,   ///< once per example and private step, reused by every epoch before it: theta is fixed
           ///< over those epochs, so each example's gradient and probe products are computed once
           ///< and the objective at any c follows from them in O(S m) (filkit's variant)
};
template <>
struct EnumNames<ProbeDraws> {
  static constexpr const char* what = "probe draws";
  static constexpr std::pair<ProbeDraws, const char*> names[] = {{ProbeDraws::kBatch, "batch"},
                                                                 {ProbeDraws::kStep, "step"}};
};

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

/// The constant gradient models' objective on a public batch (docs/mathematics.md, section 11.3)
/// and its gradient about the shift c, however it is computed (the network backend, softmax
/// regression's closed form, or kept per-example terms).
struct PerturbationObjectiveValue {
  double value = 0.0;
  VectorXd gradient;  ///< d value / d c (released coordinates)
};

/// The learned gradient model of fim and its training on public data.
struct GradientModelOptions {
  GradientModelKind kind = GradientModelKind::kConstant;
  /// conditional only (the constant models are perturbations).
  GradientObjective objective = GradientObjective::kPerturbation;
  /// lambda >= 0: weight of the Fisher term. Thesis: 1e3.
  double lambda = 1e3;
  /// Before private step t (1-based) the weight is max(lambda_min, lambda - lambda_decay (t - 1))
  /// (the thesis' repository config: 1e3, 1e2, 1e1; its tables most likely used a constant lambda,
  /// so the default is no decay). Constant models only.
  double lambda_decay = 0.0;
  double lambda_min = 0.0;
  /// Divide the Fisher term by ||r||^2 (the signal-to-noise form, thesis equation 2.8).
  bool snr = true;
  /// Widths of the dense hidden layers (each >= 1, at least one). Thesis: 256, 256.
  std::vector<Index> hidden = {256, 256};
  /// The convolutional branch over image rows (ignored for rows without an image shape).
  bool conv = true;
  /// Public epochs (or batches, `unit`) before the first private step (T3), then `decay` fewer
  /// before each next one, but at least `min_steps` (the thesis' epochs, epoch decay, min epochs).
  ScheduleUnit unit = ScheduleUnit::kEpochs;
  Index steps = 200;
  Index decay = 50;
  Index min_steps = 20;
  /// Public batch size (B3, >= 1; at most the public part's size).
  Index batch_size = 512;
  /// Adam step size (> 0) and weight decay (>= 0). Thesis: 0.01 and 0.1. The constant models use the
  /// thesis' Adam: the decay is coupled (g + weight_decay phi is what Adam sees), the moments carry
  /// over between private steps and the step count restarts at each (jax's optimizers.adam called
  /// with i = 1, 2, ...); conditional uses AdamW (decoupled decay, one continuing count).
  double step_size = 0.01;
  double weight_decay = 0.1;
  /// Probes per example in the training objective (>= 1). Thesis: 2.
  int probes = static_cast<int>(kFisherTermProbes);
  /// Constant models: the Fisher term by input-space probes (the thesis) or exactly.
  GradientTrace trace = GradientTrace::kProbes;
  /// Constant models with probes: drawn afresh each public batch (the thesis) or once per private step.
  ProbeDraws probe_draws = ProbeDraws::kBatch;
  /// Constant models on networks: the objective's arithmetic (softmax regression's closed form is
  /// float64 only).
  Precision precision = Precision::kFloat64;
  /// Constant models: the storage and arithmetic of phi, Adam's moments and c(phi). float32 (the
  /// thesis' jax) halves the memory traffic of Adam's pass over the ~10^6 parameters, the largest
  /// part of a softmax regression batch; c enters the releases widened, which stay float64.
  Precision state_precision = Precision::kFloat64;
  /// Public epochs (or batches) before private step t (1-based).
  Index steps_before(Index t) const;
  /// The Fisher term's weight before private step t (1-based).
  double lambda_before(Index t) const;
  bool is_constant() const { return kind != GradientModelKind::kConditional; }
  void validate() const;
};

template <class Visit>
void visit_fields(GradientModelOptions& o, Visit&& visit) {
  visit("gradient_model", o.kind,
        "fim: constant (the thesis' model as its code computes it: a learned vector c added to every gradient), "
        "vector (c itself the parameters) or conditional (filkit's input-dependent extension)");
  visit("objective", o.objective,
        "fim, conditional model: perturbation (g_phi added to the gradient) or gradient (g_phi replaces it)");
  visit("lambda", o.lambda, "fim: weight of the Fisher term ||d r/dx||_F^2 in the gradient model's objective");
  visit("lambda_decay", o.lambda_decay, "fim: lambda decreases by this before each next private step (0: constant)");
  visit("lambda_min", o.lambda_min, "fim: but not below this");
  visit("snr", o.snr, "fim: divide the Fisher term by ||r||^2 (the signal-to-noise form)");
  visit("gradient_hidden", o.hidden, "fim: the gradient model's dense hidden widths");
  visit("gradient_conv", o.conv, "fim: the gradient model's convolutional branch over images");
  visit("gradient_unit", o.unit, "fim: what gradient_steps counts: epochs of the public part (the thesis) or batches");
  visit("gradient_steps", o.steps,
        "fim: public epochs (or batches) of the gradient model before the first private step");
  visit("gradient_decay", o.decay, "fim: that many fewer before each next private step");
  visit("gradient_min_steps", o.min_steps, "fim: but at least this many");
  visit("gradient_batch_size", o.batch_size, "fim: public batch size of the gradient model");
  visit("gradient_step_size", o.step_size, "fim: Adam step size of the gradient model");
  visit("gradient_weight_decay", o.weight_decay,
        "fim: weight decay of the gradient model (coupled L2 for the constant models, AdamW's for conditional)");
  visit("gradient_probes", o.probes, "fim: probes per example in the gradient model's objective");
  visit("gradient_trace", o.trace, "fim, constant models: the Fisher term by probes (the thesis) or exact");
  visit("gradient_probe_draws", o.probe_draws,
        "fim, constant models with probes: draw them afresh each public batch (the thesis) or once per example and "
        "private step, so that each example's gradient and probe products are computed once a step (filkit's variant)");
  visit("gradient_precision", o.precision,
        "fim, constant models on networks: arithmetic of the gradient model's objective (float32 as the thesis' jax; "
        "releases and accounting stay float64)");
  visit("gradient_state_precision", o.state_precision,
        "fim, constant models: storage and arithmetic of the gradient model's parameters, Adam moments and c "
        "(float32 as the thesis' jax, half the memory traffic of each update; releases and accounting stay float64)");
}

/// What fim's gradient model holds in memory, estimated before it is built (bytes; each part
/// saturates at UINT64_MAX). Defined in gradient_model_memory.cpp, beside neither model's code
/// because the conditional model lives in the LibTorch plugin and is estimated before it loads.
struct GradientModelMemoryEstimate {
  Index parameter_count = 0;      ///< phi
  std::uint64_t parameters = 0;   ///< phi, its gradient and Adam's two moments
  std::uint64_t activations = 0;  ///< a public batch's inputs and layer outputs, with their graphs
  std::uint64_t probes = 0;       ///< the B x S input-space probes (d each) and their products (m each)
  /// probe_draws step: every public example's probes (S d), and on a network its released gradient
  /// and probe products ((S + 1) m), kept for the private step's epochs. On a network with per-batch
  /// probes over epochs the same, drawn an epoch at a time (PerturbationObjectiveTermCache).
  std::uint64_t step_draws = 0;
  /// On a network with per-batch probes over epochs: every public example's records of its forward
  /// and backward passes, with the graph of their Jacobian products, kept for a private step.
  std::uint64_t kept_records = 0;
  std::uint64_t total() const;
  std::string describe() const;
};

/// Copies of phi: itself, its gradient, Adam's two moments.
inline constexpr int kGradientModelParameterCopies = 4;
/// Copies of a public batch's layer outputs (conditional model): forward, backward and the
/// double-backward graph of its Fisher term.
inline constexpr int kGradientModelActivationCopies = 4;
/// Copies of an example's activations and records (every parametric layer's input, unfolded for a
/// convolution, and pre-activation) that the kept graph of its forward, backward and double-backward
/// passes holds: 6.2 measured on the thesis' ConvNet (0.8 MB an example in float32).
inline constexpr int kKeptRecordCopies = 8;

/// The parameter count of the gradient model of `options` releasing `released` coordinates of a
/// model on rows of shape `image` (for the conditional model's conv branch; none for tables): the constant model's
/// beta, W, b, W_o, b_o; the vector c; or the conditional MLP's (conv branch, then per hidden layer a normalisation's
/// scale and shift, weight and bias, then the output layer onto the released coordinates, from 2 m + conv features
/// inputs).
Index gradient_model_parameter_count(const GradientModelOptions& options, Index released,
                                     const std::optional<ImageShape>& image);

/// The estimate for public batches of options.batch_size rows (at most `public_rows`); `network`:
/// the objective comes from the network backend (else softmax regression's closed form, which keeps
/// no per-example terms). `kept_records`: the network whose public examples' records are kept for
/// a private step with per-batch probes over epochs (PerturbationObjectiveTermCache); none: each batch's
/// terms computed afresh.
GradientModelMemoryEstimate estimate_gradient_model_memory(const GradientModelOptions& options, Index released,
                                                           Index input_dim, const std::optional<ImageShape>& image,
                                                           Index public_rows, bool network,
                                                           const NetworkPlan* kept_records = nullptr);

/// train_with_public_data (public_data_training.hpp) refuses, before pre-training, a gradient
/// model whose estimate, with the network's and its gradients' if any, is beyond max_memory.

}  // namespace filkit
