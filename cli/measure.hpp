// `filkit measure`: per-example Fisher information loss of an output-perturbed GLM.
#pragma once

#include "common.hpp"

#include "filkit/jobs/measure.hpp"

#include <iosfwd>

namespace filkit::cli {

struct MeasureCommandOptions {
  DataFlags data;
  ModelFlags model;
  RunFlags run;
  double sigma = 1.0;             ///< noise of one release, > 0
  int releases = 1;               ///< independent releases composed
  std::string label = "private";  ///< private or public
  std::string attribute;          ///< NAME or COLS
  std::vector<std::string> subsets;
  std::string release_out;        ///< CSV of the released weights w'
  std::string report;             ///< report directory (figures + report.html); empty = none
};

void setup_measure(CLI::App& app);
/// Runs the job, writes the requested files and prints the summary table to `out` (unless quiet).
MeasureResult run_measure(const MeasureCommandOptions& options, std::ostream& out);
/// The library options the command's flags mean.
MeasureOptions to_measure_options(const MeasureCommandOptions& options);

}  // namespace filkit::cli
