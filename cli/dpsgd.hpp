// `filkit dpsgd`: private SGD for logistic / softmax regression with per-example FIL accounting
// (Algorithm 1 of the reconstruction paper).
#pragma once

#include "common.hpp"

#include "filkit/jobs/dpsgd.hpp"

#include <iosfwd>
#include <string>

namespace filkit::cli {

struct DpSgdCommandOptions {
  DataFlags data = default_data_flags();
  RunFlags run;
  std::string model = "logistic";     ///< logistic, softmax, mlp or cnn
  std::string engine = "auto";        ///< closed-form, torch, or auto (closed form for GLMs)
  std::vector<Index> hidden = {128};  ///< mlp widths
  Index chunk = 100;                  ///< networks: examples differentiated together
  std::string optimizer = "sgd";      ///< sgd or adam
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  std::string checkpoint;             ///< state file for resuming
  Index checkpoint_every = 0;
  Index stop_after = 0;
  bool intercept = false;
  std::string label = "public";       ///< private or public
  Index batch_size = 600;
  std::string sampling = "uniform";   ///< uniform or poisson
  Index steps = 1000;
  double step_size = 0.1;
  double clip_norm = 1.0;
  double sigma = 1.0;
  double momentum = 0.5;
  double weight_decay = 0.0;
  double init_scale = 0.0;
  std::string kappa = "amplified";    ///< amplified or one
  double kappa_delta = 1e-5;
  std::string trace = "auto";         ///< exact, coordinates, gaussian, or auto (GLMs exact, networks gaussian)
  std::string spectral = "auto";      ///< exact, power-iteration, none, or auto (GLMs exact, networks none)
  std::string probes = "auto";        ///< a count, or auto (GLMs 50, networks 1 a step)
  int power_iterations = 20;
  int runs = 1;
  std::vector<double> epochs;
  double rdp_delta = 1e-5;

  /// The data flags' defaults for this command: MNIST 0 vs 1, pixels / 255, no PCA, no row
  /// scaling (every coordinate in [0, 1], as the MSE bounds assume).
  static DataFlags default_data_flags();
};

void setup_dpsgd(CLI::App& app);
/// Runs the job, writes the requested files and prints the summary table to `out` (unless quiet).
DpSgdJobResult run_dpsgd(const DpSgdCommandOptions& options, std::ostream& out);
/// The library options the command's flags mean.
DpSgdJobOptions to_dpsgd_job_options(const DpSgdCommandOptions& options);

}  // namespace filkit::cli
