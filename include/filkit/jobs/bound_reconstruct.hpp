// The jobs behind `filkit bound` and `filkit reconstruct` (load -> preprocess -> fit ->
// reconstruction bounds -> GLM attack -> summary) as library calls, like measure.hpp, so that the
// command line holds no mathematics. The formulas are in bounds.hpp and reconstruction.hpp; the
// setting is section 7.1 of Guo, Karrer, Chaudhuri and van der Maaten (ICML 2022).
#pragma once

#include "filkit/leakage/bounds.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/data/preprocessing.hpp"
#include "filkit/leakage/glm_reconstruction.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace filkit {

struct BoundJobOptions {
  DataOptions data;
  PreprocessOptions preprocess;
  /// Must be logistic regression (the RDP guarantee needs its 1-Lipschitz loss).
  FitOptions fit;
  /// sigma of the output perturbation, per-coordinate diameters, the norm bound R.
  ReconstructionBoundOptions bounds;
  /// Seed of the one release w' whose accuracy is reported, and of any train/test split.
  std::uint64_t seed = 0;
  /// Progress on stderr.
  bool progress = false;
  void validate() const;
};

/// The paper's output-perturbation setting: MNIST 0 vs 1, pixels / 255 and nothing else (no row
/// scaling, no PCA; the authors' scripts load MNIST with normalize=False), logistic regression
/// with an intercept, lambda = sigma = 1e-2.
BoundJobOptions default_bound_job_options();

struct BoundJobResult {
  DatasetSplit data;  ///< after preprocessing
  Preprocessor preprocessor;
  Model model;        ///< w*
  Model release;      ///< w' = w* + N(0, sigma^2 I), seeded
  ReconstructionBounds bounds;
  double train_accuracy = 0.0, test_accuracy = 0.0, release_test_accuracy = 0.0;
  std::vector<std::string> warnings;      ///< e.g. the norm assumption failing
  std::map<std::string, double> seconds;  ///< wall time of each stage

  /// Every setting, seed, version, eps, RDP bound, perfect-privacy line and shares above it,
  /// quantiles of the per-example bounds, the norm check, accuracies, warnings, timings.
  nlohmann::json summary(const BoundJobOptions& options) const;
  /// One row per example: index, label, eta, dfil, fil_bound, dfil_bound.
  std::vector<std::string> table_header() const;
  std::vector<std::vector<double>> table_rows() const;
};

BoundJobResult run_bound_job(const BoundJobOptions& options);

struct ReconstructJobOptions {
  /// Data, model, sigma (the attack's noise) and seed (the attack's base seed).
  BoundJobOptions bound;
  /// Noise draws, >= 1 (the paper: 10000).
  Index trials = 10000;
  /// Examples attacked (empty = all) and those whose mean reconstruction is kept.
  std::vector<Index> rows;
  std::vector<Index> keep_reconstructions;
  /// See GlmAttackOptions::divisor_guard.
  double divisor_guard = 1e-300;
  /// The attack's options: these fields plus bound.bounds.sigma and bound.seed.
  GlmAttackOptions attack_options() const;
  void validate() const;
};

/// default_bound_job_options() at the paper's attack setting: sigma = 1e-5, 10000 trials.
ReconstructJobOptions default_reconstruct_job_options();

struct ReconstructJobResult {
  BoundJobResult bound;
  GlmAttackResult attack;

  /// The bound job's summary plus the attack: trials, guarded trials, MSE quantiles, the share
  /// of examples whose realised MSE is at or above their dFIL bound (Figure 3's "above the
  /// line"), overall and among those with a bound below the perfect-privacy line, and the
  /// Pearson correlation of log10 bound and log10 MSE.
  nlohmann::json summary(const ReconstructJobOptions& options) const;
  /// One row per attacked example: the bound table's columns plus attack_mse, linearised_mse,
  /// guarded_trials.
  std::vector<std::string> table_header() const;
  std::vector<std::vector<double>> table_rows() const;
  /// Two rows per kept example (kind 0 = the original, 1 = the mean reconstruction): index,
  /// label, kind, attack_mse, then the d pixel values x0..x{d-1}.
  std::vector<std::string> reconstruction_header() const;
  std::vector<std::vector<double>> reconstruction_rows() const;
};

ReconstructJobResult run_reconstruct_job(const ReconstructJobOptions& options);

}  // namespace filkit
