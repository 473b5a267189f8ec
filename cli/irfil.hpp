// `filkit irfil`: iteratively reweighted FIL (Algorithm 1 of the FIL paper).
#pragma once

#include "common.hpp"
#include "task.hpp"

#include "filkit/leakage/irfil.hpp"

#include <iosfwd>
#include <limits>
#include <string>

namespace filkit::cli {

struct IrfilCommandOptions {
  IrfilCommandOptions() { set_tabular_defaults(data, model); }
  DataFlags data;
  ModelFlags model;
  RunFlags run;
  int iterations = 10;                 ///< T >= 0 updates
  std::string weighting = "example";   ///< example, class or hybrid
  double min_weight = 0.0;
  double max_weight = std::numeric_limits<double>::infinity();
  double sigma = 1.0;                  ///< noise the eta refer to, > 0
  std::string label = "private";       ///< private or public (example-level eta)
  std::string attribute;               ///< NAME or COLS: attribute-level eta drives the update
  std::string history_out;             ///< CSV of the training weights of every iteration
};

void setup_irfil(CLI::App& app);
/// Runs IRFIL, writes the requested files and prints the per-iteration table to `out` (unless quiet).
IrfilResult run_irfil(const IrfilCommandOptions& options, std::ostream& out);

}  // namespace filkit::cli
