// `filkit bound`: lower bounds on the reconstruction error of an output-perturbed logistic
// regression (RDP, dFIL and FIL; Guo et al., ICML 2022), per training example.
#pragma once

#include "common.hpp"

#include "filkit/jobs/bound_reconstruct.hpp"

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace filkit::cli {

/// The paper's setting, the defaults of `bound` and `reconstruct` (not measure's): MNIST 0 vs 1,
/// pixels / 255 and no other preprocessing; logistic regression with an intercept, lambda 1e-2.
DataFlags reconstruction_data_flags();
ModelFlags reconstruction_model_flags();

struct BoundCommandOptions {
  DataFlags data = reconstruction_data_flags();
  ModelFlags model = reconstruction_model_flags();
  RunFlags run;
  double sigma = 1e-2;           ///< noise of the output perturbation, > 0
  std::string diameter = "1";    ///< a number for every coordinate, or a file of d numbers
  double norm_bound = 1.0;       ///< R in eps = 4 R^2 / (n lambda sigma)^2
};

void setup_bound(CLI::App& app);
/// Runs the job, writes the requested files, warns on stderr (e.g. rows outside the unit ball)
/// and prints the summary to `out` (unless quiet).
BoundJobResult run_bound(const BoundCommandOptions& options, std::ostream& out);
/// The library options the command's flags mean.
BoundJobOptions to_bound_job_options(const BoundCommandOptions& options);

/// The flags `bound` and `reconstruct` share (data, model, run, --sigma, --diameter, --norm-bound).
void add_bound_flags(CLI::App& command, BoundCommandOptions& options, const std::string& out_description);
/// Prints the bound part of the summary.
void print_bound_summary(std::ostream& out, const BoundCommandOptions& options, const BoundJobResult& result);
/// "  seconds: load 0.1 fit 2.3 ..." from a job's stage timings.
void print_seconds(std::ostream& out, const std::map<std::string, double>& seconds);
/// Every warning of a job, one line each on stderr (also recorded in the JSON summary).
void print_warnings(const std::string& command, const std::vector<std::string>& warnings);

}  // namespace filkit::cli
