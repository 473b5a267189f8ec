// The job behind `filkit reconstruct`: the bound job, then the GLM reconstruction attack
// (leakage/glm_reconstruction.hpp; docs/mathematics.md, section 6) on every (or the chosen)
// training example, its realised MSE beside the dFIL bound, and beside the biased forms of the
// RDP, dFIL and FIL bounds at the attack's estimated bias and Jacobian (section 6.7).
#pragma once

#include "filkit/jobs/bound.hpp"
#include "filkit/leakage/glm_reconstruction.hpp"

#include <vector>

namespace filkit {

struct ReconstructJobOptions {
  /// The bound job's setting at Guo et al.'s attack noise sigma = 1e-5.
  BoundJobOptions bound{.bounds = {.sigma = 1e-5}};
  /// trials, rows, keep_reconstructions, divisor_guard (sigma and seed come from `bound`).
  GlmAttackOptions attack;
  /// `attack` with the bound job's sigma and seed.
  GlmAttackOptions attack_options() const;
  void validate() const;
};

template <class Visit>
void visit_fields(ReconstructJobOptions& o, Visit&& visit) {
  visit_fields(o.bound, visit);
  visit("trials", o.attack.trials, "Noise draws (independent releases), >= 1");
  visit("rows", o.attack.rows, "Examples attacked: all, or 0-based indices such as 0,5,17");
  visit("save_reconstructions", o.attack.keep_reconstructions,
        "0-based indices of examples whose mean reconstruction is written to reconstructions_out");
  visit("divisor_guard", o.attack.divisor_guard,
        "A trial with |B_i[0]| below this (or a non-finite error) is excluded and counted");
}

/// The biased forms of the bounds (leakage/biased_attacker.hpp) per attacked row, in the order of
/// GlmAttackResult::rows, with their standard errors (upper bounds on them).
struct BiasedReconstructionBounds {
  VectorXd rdp, rdp_standard_error;    ///< at the stated eps, every gamma_k = tr J_mu / d
  VectorXd dfil, dfil_standard_error;  ///< (tr J_mu / d)^2 / dfil^2 + ||b||^2 / d
  VectorXd fil, fil_standard_error;    ///< (tr J_mu / d)^2 / eta^2 + ||b||^2 / d
};

struct ReconstructJobResult final : JobResult {
  ReconstructJobOptions options;  ///< as run, autos resolved
  BoundJobResult bound;
  GlmAttackResult attack;
  BiasedReconstructionBounds biased;
  nlohmann::json to_json() const override;
  /// The bound table's columns and attack_mse, linearised_mse, guarded_trials, the attack's
  /// standard error, squared bias and Jacobian trace, and the biased bounds, per attacked row.
  NumericTable table() const override;
  /// "reconstructions_out": per kept example two rows (kind 0 = original, 1 = mean
  /// reconstruction): index, label, kind, attack_mse, x0..x{d-1}.
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
};

ReconstructJobResult run_reconstruct(const ReconstructJobOptions& options, bool progress = false);

struct ReconstructJob {
  using Options = ReconstructJobOptions;
  static constexpr const char* name = "reconstruct";
  static constexpr bool runs_on_mpi_ranks = true;  // sharded (docs/distributed.md)
  static constexpr const char* description =
      "The GLM reconstruction attack (Balle et al. 2022) on output-perturbed logistic regression with an intercept: "
      "the adversary knows lambda and every other example. Per-example MSE averaged over trials noise draws, "
      "against the dFIL bound and, at the attack's bias and Jacobian estimated from the same draws, the biased "
      "forms of the RDP, dFIL and FIL bounds. Defaults: Guo et al. 2022's setting, MNIST 0 vs 1, pixels / 255, lambda "
      "1e-2, sigma "
      "1e-5, 10000 trials.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the reconstruction paper's attack (Guo et al. 2022)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"pca", "the attack reconstructs the raw pixels (Guo et al. 2022)"}};
  }
  static constexpr const char* out_help =
      "Per-example CSV: index, label, eta, dfil, fil_bound, dfil_bound, attack_mse, linearised_mse, guarded_trials, "
      "attack_mse_standard_error, squared_bias, jacobian_trace (each with _standard_error), biased_rdp_bound, "
      "biased_dfil_bound, biased_fil_bound (each with _standard_error); an empty cell is not a finite number";
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"reconstructions_out",
             "CSV: per saved example two rows (kind 0 = original, 1 = mean reconstruction): index, label, kind, "
             "attack_mse, x0..x{d-1}"}};
  }
  static ReconstructJobResult run(const Options& options, bool progress) { return run_reconstruct(options, progress); }
};

}  // namespace filkit
