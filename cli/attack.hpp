// `filkit attack`: attribute inference (prior, black-box, white-box) against output-perturbed
// releases, over noise scales and noise draws, reported overall and by decile of attribute FIL.
#pragma once

#include "common.hpp"
#include "task.hpp"

#include "filkit/leakage/attribute_inference.hpp"

#include <iosfwd>
#include <string>
#include <vector>

namespace filkit::cli {

struct AttackCommandOptions {
  AttackCommandOptions() { set_tabular_defaults(data, model); }
  DataFlags data;
  ModelFlags model;
  RunFlags run;
  std::string attribute;  ///< default: the built-in dataset's sensitive attribute
  std::vector<double> sigmas = AttackOptions().sigmas;
  int trials = AttackOptions().trials;
  std::vector<std::string> attacks = {"white-box", "black-box"};
  std::string solver = "update";
  long long examples = 0;     ///< attack a seeded subset of this many training examples; 0 = all
  long long compare_naive = 0;  ///< time the naive refit on this many examples
  int groups = 10;
  std::string weights;        ///< CSV of training weights (e.g. from filkit irfil)
  std::string weights_column = "weight";
  std::string examples_out;   ///< per-example CSV
};

void setup_attack(CLI::App& app);
/// Runs the attacks, writes the requested files and prints the per-sigma table to `out` (unless quiet).
AttackResult run_attack(const AttackCommandOptions& options, std::ostream& out);

}  // namespace filkit::cli
