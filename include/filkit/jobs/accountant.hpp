// The job behind `filkit accountant`: the RDP or PLD accountant of the sampled Gaussian mechanism
// (privacy/rdp_accountant.hpp, privacy/pld_accountant.hpp; docs/mathematics.md, section 7;
// docs/accountants.md): eps for given noise, or the noise multiplier that reaches a target eps,
// for one mechanism or a composition, under Poisson sampling (add/remove) or fixed-size batches
// without replacement (replace-one).
#pragma once

#include "filkit/jobs/job.hpp"
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace filkit {

/// One sampled Gaussian mechanism: sample rate q, noise multiplier, steps.
struct Mechanism {
  double sample_rate;
  double noise_multiplier;
  std::int64_t steps;
};

/// A mechanism is given by sample_rate (or batch_size with n), noise_multiplier (or target_eps to
/// solve for it) and steps (or epochs); further ones by `mechanism`
/// ("sample_rate,noise_multiplier,steps"). "auto" marks what is derived from the others.
struct AccountantOptions {
  std::optional<double> sample_rate;                 ///< sampling rate q in [0, 1]; or batch_size with n
  std::optional<std::int64_t> batch_size;            ///< expected batch size B; sample_rate = B / n
  std::optional<std::int64_t> n;                     ///< number of training examples, >= batch size
  std::optional<double> noise_multiplier;            ///< >= 0; not with target_eps
  std::optional<std::int64_t> steps;                 ///< >= 0
  std::optional<double> epochs;                      ///< steps = ceil(epochs / sample_rate)
  double delta = 1e-5;                               ///< in (0, 1)
  std::string orders = "opacus";                     ///< opacus, tf-privacy (tf), or a list like 2,4.5,8
  std::vector<std::string> mechanisms;               ///< further mechanisms "sample_rate,noise_multiplier,steps"
  std::optional<double> target_eps;                  ///< solve for the noise multiplier instead; > 0
  AccountantKind accountant = AccountantKind::kRdp;  ///< rdp or pld
  /// The batches' sampling, which fixes the neighbouring relation (neighbouring_relation.hpp):
  /// poisson (add/remove) or uniform (replace-one); shuffle is refused (no accountant covers it).
  BatchSampling sampling = BatchSampling::kPoisson;
  double discretization = PldSettings{}.discretization;  ///< PLD loss grid spacing; > 0
  /// What the PLD's grids may take (the RDP accountant needs next to nothing).
  ByteSize max_memory = default_memory_budget();
  /// Points of each eps curve (against steps, against the noise multiplier) for the report; 0 =
  /// none; auto = 40 with rdp, and with pld 8 when a report is written (each point is a PLD
  /// composition, tenths of a second), else none.
  std::optional<int> curve_points;

  void validate() const;
};

template <class Visit>
void visit_fields(AccountantOptions& o, Visit&& visit) {
  visit("sample_rate", o.sample_rate,
        "Sampling rate q in [0, 1]: the probability of each example to be in a batch (or batch_size with n)");
  visit("batch_size", o.batch_size, "Expected batch size B, in examples; sample_rate = B / n");
  visit("n", o.n, "Number of training examples (with batch_size)");
  visit("noise_multiplier", o.noise_multiplier, "Noise multiplier (noise std / clipping norm)");
  visit("steps", o.steps, "Number of steps (noisy gradient updates)");
  visit("epochs", o.epochs, "Epochs (passes over the data); steps = ceil(epochs / sample_rate)");
  visit("delta", o.delta, "Target delta in (0, 1)");
  visit("orders", o.orders, "Order grid: opacus, tf-privacy (tf), or a list like 2,4.5,8");
  visit("mechanism", o.mechanisms, "A further mechanism sample_rate,noise_multiplier,steps (repeatable)");
  visit("target_eps", o.target_eps, "Solve for the noise multiplier that reaches this eps");
  visit("accountant", o.accountant, "rdp (Renyi DP, orders) or pld (privacy loss distribution, tighter)");
  visit("sampling", o.sampling,
        "poisson (add/remove one) or uniform (B of n without replacement; replace one); shuffle is refused: no "
        "accountant covers it");
  visit("discretization", o.discretization, kDiscretizationHelp);
  visit("max_memory", o.max_memory,
        "Memory budget (e.g. 2G, 512M) of the PLD accountant's loss grids: a grid (with its FFT) that needs more is "
        "refused with its estimate before it is allocated; default: half of the physical memory");
  visit("curve_points", o.curve_points,
        "Points of the report's eps curves (against steps and against the noise multiplier); 0 = none; auto = 40 "
        "with rdp, with pld 8 when --report is given (each is a PLD composition, tenths of a second), else none");
}

struct AccountantJobResult final : JobResult {
  AccountantOptions options;
  std::vector<Mechanism> mechanisms;                        ///< as composed (with the solved noise multiplier)
  PrivacySpent spent;                                       ///< RDP: the conversion; PLD: eps and delta only
  double infinity_mass = 0.0;                               ///< PLD: the truncated mass counted in delta
  std::string description;                                  ///< the accountant, neighbouring relation and approximation
  std::vector<std::pair<double, double>> pld_eps_by_delta;  ///< PLD: (delta, eps) for the table
  /// One mechanism: eps at delta against its steps (1 to 2 T) and against its noise multiplier
  /// (sigma / 4 to 4 sigma), the rest as given: the report's curves.
  std::vector<std::pair<double, double>> eps_by_steps, eps_by_noise_multiplier;
  /// eps, optimal order, the RDP curve, the mechanisms and, for one mechanism, the eps curves.
  nlohmann::json to_json() const override;
  /// RDP: the curve (order, rdp); PLD: eps at delta = 1e-2 .. 1e-10 (delta, eps).
  NumericTable table() const override;
  /// rdp-curve.csv or eps-by-delta.csv: what the table holds.
  std::string table_file() const override;
  void print_summary(std::ostream& out) const override;
};

/// `for_report`: a report will be drawn, which resolves curve_points' auto for pld.
AccountantJobResult run_accountant(const AccountantOptions& options, bool progress = false, bool for_report = false);

struct AccountantJob {
  using Options = AccountantOptions;
  static constexpr const char* name = "accountant";
  static constexpr const char* description =
      "RDP or PLD accountant of the sampled Gaussian mechanism (DP-SGD): eps for given noise, or the noise multiplier "
      "for a target eps. E.g. --sample-rate 0.04 --noise-multiplier 1.5 --steps 2250 --accountant pld.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason =
      "auto: given, or following from the other options (the accountant describes a mechanism, not a training run)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"sampling", "Poisson sampling, as Opacus and TF Privacy account DP-SGD"}};
  }
  static constexpr const char* out_help = "CSV of the composed RDP curve (order, rdp), or for pld: delta, eps";
  static std::vector<ExtraOutput> extra_outputs() { return {}; }
  static AccountantJobResult run(const Options& options, bool progress, const JobOutputs& outputs) {
    return run_accountant(options, progress, !outputs.report.empty());
  }
};

}  // namespace filkit
