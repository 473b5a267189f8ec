// `filkit accountant`: the RDP accountant of the sampled Gaussian mechanism (DP-SGD) on the
// command line. Either eps for given mechanisms (one from --q/--batch-size/--n, --sigma,
// --steps/--epochs, plus any number of --mechanism q,sigma,steps, all composed), or with
// --target-eps the smallest noise multiplier that meets it. The mathematics is in
// filkit/accounting.hpp; setup_accountant is declared in commands.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit::cli {

struct AccountantOptions {
  std::optional<double> q;                 ///< --q: sampling rate in [0, 1]; or --batch-size with --n
  std::optional<std::int64_t> batch_size;  ///< --batch-size: expected batch size B; q = B / n
  std::optional<std::int64_t> n;           ///< --n: number of training examples, >= batch size
  std::optional<double> sigma;             ///< --sigma: noise multiplier, >= 0; not with --target-eps
  std::optional<std::int64_t> steps;       ///< --steps: number of steps, >= 0
  /// --epochs: steps = ceil(epochs n / B), or ceil(epochs / q) when --q is given (as TF Privacy's
  /// compute_dp_sgd_privacy); > 0
  std::optional<double> epochs;
  double delta = 1e-5;                     ///< --delta: in (0, 1); default 1e-5
  /// --orders: "opacus" (default), "tf-privacy" (or "tf"), or a comma-separated list of orders > 1
  std::string orders = "opacus";
  /// --mechanism q,sigma,steps: further mechanisms composed with the first (repeatable)
  std::vector<std::string> mechanisms;
  std::optional<double> target_eps;        ///< --target-eps: solve for sigma instead; > 0
  std::string json_path;                   ///< --json: write inputs and results here; empty = no file

  /// Checks that the flags fit together (value ranges are checked by the library); throws
  /// std::invalid_argument naming the flags.
  void validate() const;
};

/// Prints a summary to stdout (warnings to stderr) and writes the JSON file if asked for.
void run_accountant(const AccountantOptions& options);

}  // namespace filkit::cli
