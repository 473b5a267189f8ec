// `filkit reconstruct`: the GLM reconstruction attack (Balle et al. 2022) on an output-perturbed
// logistic regression with an intercept, its realised per-example MSE over many noise draws
// against the dFIL bound.
#pragma once

#include "bound.hpp"

#include <iosfwd>

namespace filkit::cli {

/// The bound flags at the paper's attack setting (sigma = 1e-5).
BoundCommandOptions attack_bound_flags();

struct ReconstructCommandOptions {
  /// Data, model, run flags, --diameter and --norm-bound; sigma defaults to the paper's 1e-5.
  BoundCommandOptions bound = attack_bound_flags();
  Index trials = 10000;                ///< noise draws, >= 1
  std::string rows = "all";            ///< examples attacked: all, or indices "0,5,17"
  std::string save_reconstructions;    ///< indices whose mean reconstruction is saved
  std::string reconstructions_out;     ///< CSV of those originals and reconstructions
  double divisor_guard = 1e-300;       ///< |B_i[0]| below this excludes a trial
};

void setup_reconstruct(CLI::App& app);
ReconstructJobResult run_reconstruct(const ReconstructCommandOptions& options, std::ostream& out);
ReconstructJobOptions to_reconstruct_job_options(const ReconstructCommandOptions& options);

}  // namespace filkit::cli
