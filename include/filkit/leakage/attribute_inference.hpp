// Attribute-inference attacks on an output-perturbed GLM, used to validate FIL
// (docs/mathematics.md, section 5; FIL paper section 6.4, figures 6 and 7). The adversary wants the
// value v of one categorical attribute of training example i (a one-hot block of X, the dropped
// level being all zeros) and sees the released model w' = w* + b, b ~ N(0, sigma^2 I):
//
//   prior      argmax_v p(v): the most frequent level in the training set.
//   black-box  argmax_v p(v) pi(prediction(w', x_i with v), y_i)      (Fredrikson et al. 2014)
//              least squares: pi = N(w'.x; y_i, s^2), s^2 = sum_j (w'.x_j - y_j)^2 / (n - p), the
//              residual variance of w' on the training set (targets as the model codes them);
//              logistic: pi = P(y_i | prediction) from w''s confusion matrix on the training set,
//              counts plus one (so an unseen cell is unlikely, not impossible).
//              p(v) is the level's share of the training set.
//   white-box  argmin_v ||w' - f(D with x_i's attribute set to v)||   (the FIL threat model: the
//              adversary knows everything but the attribute, and how the model was trained,
//              including the example weights omega)
//
// The three adversaries live in attribute_candidates.hpp (prior), black_box_attack.hpp and
// white_box_attack.hpp; this header runs them over noise draws and noise scales and summarises.
#pragma once

#include "filkit/leakage/attribute_candidates.hpp"
#include "filkit/leakage/black_box_attack.hpp"
#include "filkit/leakage/white_box_attack.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace filkit {

struct AttackOptions {
  /// How the attacked model was trained (least squares or logistic); the white-box adversary
  /// retrains the same way.
  FitOptions fit;
  /// Noise scales of the release, each > 0.
  std::vector<double> sigmas = {1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  /// Noise draws per sigma (>= 1). Draw t is the same standard normal vector z_t at every sigma
  /// (b = sigma z_t), from std::mt19937_64 seeded by a hash of (seed, t).
  int trials = 20;
  std::uint64_t seed = 0;
  bool white_box = true;
  bool black_box = true;
  WhiteBoxSolver solver = WhiteBoxSolver::kUpdate;
  /// Attack a seeded random subset of this many training examples; 0 = all.
  Index max_examples = 0;
  /// Also compute the candidate minimisers of the first this many attacked examples by the naive
  /// refit, timing it and recording the largest difference (0 = skip; needs solver kUpdate).
  Index naive_examples = 0;
  /// Quantile groups of the attribute-level eta (10 = deciles), >= 1.
  int groups = 10;
  bool progress = false;
  /// Throws std::invalid_argument naming the field, value and rule.
  void validate() const;
};

/// The user-facing fields of AttackOptions (fit comes from the job's task, seed from the job).
template <class Visit>
void visit_fields(AttackOptions& o, Visit&& visit) {
  visit("sigmas", o.sigmas, "Noise scales of the release, each > 0");
  visit("trials", o.trials, "Noise draws per sigma (the same draws at every sigma)");
  visit("white_box", o.white_box, "Run the white-box attack (the FIL threat model)");
  visit("black_box", o.black_box, "Run the black-box attack (Fredrikson et al. 2014)");
  visit("white_box_solver", o.solver,
        "White-box candidate minimisers: update (rank-2 updates / chord Newton) or refit (naive)");
  visit("examples", o.max_examples, "Attack a seeded subset of this many training examples; 0 = all");
  visit("compare_naive", o.naive_examples,
        "Also refit naively for this many attacked examples: time it, check it agrees (in the JSON)");
  visit("groups", o.groups, "Quantile groups of attribute FIL (10 = deciles)");
}

/// Accuracy of the attacks at one noise scale: shares of attacked examples whose level was
/// guessed, averaged over trials (std over trials).
struct SigmaAccuracy {
  double sigma = 0.0;
  double eta_mean = 0.0;  ///< mean attribute-level eta of the attacked examples at this sigma
  double white_box = 0.0, white_box_std = 0.0, black_box = 0.0, black_box_std = 0.0;
  std::vector<double> white_box_by_group, black_box_by_group;
  /// The released model, averaged over trials: MSE (mean_squared_error) and accuracy (NaN for
  /// regression) on the training and test sets.
  double train_mse = 0.0, test_mse = 0.0, train_accuracy = 0.0, test_accuracy = 0.0;
};

/// The naive refit timed against the update path on the same examples.
struct NaiveComparison {
  Index examples = 0;
  double seconds = 0.0;                ///< naive refits of those examples
  double fast_seconds = 0.0;           ///< the update path on the same examples (its share of the total)
  double estimated_seconds_all = 0.0;  ///< seconds * m / examples
  double max_difference = 0.0;         ///< max |shift difference| / max(1, ||w*||)
};

struct AttackResult {
  AttributeCandidates candidates;
  std::vector<Index> examples;  ///< the attacked training examples (m)
  VectorXd eta;                 ///< their attribute-level eta at sigma = 1 (eta scales as 1/sigma)
  /// White-box margin of each attacked example: min over wrong levels v of ||f(D with v) - w*||,
  /// the finite-change counterpart of eta (which is first order); NaN without the white-box attack.
  VectorXd nearest_shift;
  std::vector<int> group;         ///< each attacked example's eta group 0..groups-1 (0 = lowest)
  std::vector<double> group_eta;  ///< mean eta (sigma = 1) of each group
  double prior_accuracy = 0.0;
  std::vector<double> prior_by_group;
  std::vector<SigmaAccuracy> sigmas;
  /// m x S: share of trials in which each attacked example's level was guessed (NaN for an
  /// attack not run).
  MatrixXd white_box_correct, black_box_correct;
  Model model;                                                                        ///< w*
  double train_mse = 0.0, test_mse = 0.0, train_accuracy = 0.0, test_accuracy = 0.0;  ///< of w*
  Index fallback_refits = 0;
  NaiveComparison naive;
  std::map<std::string, double> seconds;  ///< fit, fil, candidates, trials

  nlohmann::json to_json() const;
  /// One row per (sigma, group): sigma, group (-1 = all examples), eta_mean, prior, white_box,
  /// white_box_std, black_box, black_box_std, train_mse, test_mse, train_accuracy, test_accuracy.
  std::vector<std::string> table_header() const;
  std::vector<std::vector<double>> table_rows() const;
  /// One row per (attacked example, sigma): index, level, group, sigma, eta (at that sigma),
  /// nearest_shift, prior_correct, white_box_accuracy, black_box_accuracy.
  std::vector<std::string> example_header() const;
  std::vector<std::vector<double>> example_rows() const;
};

/// Fits the model (with `omega`, empty = 1) and runs the attacks on `attribute` at every sigma.
/// Trials run in parallel; results are bitwise identical for any thread count. Throws
/// std::invalid_argument for bad options or data, std::runtime_error for numerical failure.
///
/// On the ranks of an MPI job (collective; docs/distributed.md) `train`, `test` and `omega` are
/// each rank's rows: the fit, the FIL, the prior and the black-box adversary's statistics are of all
/// ranks' rows, each rank attacks the attacked examples among its rows, and rank 0 gathers the
/// per-example results (eta, groups, margins, hit rates and every example's level) in the order of
/// `examples`; the other ranks hold only the summaries.
AttackResult attribute_inference(const Dataset& train, const Dataset& test, const AttributeColumns& attribute,
                                 const AttackOptions& options, const VectorXd& omega = VectorXd(),
                                 const Communicator& comm = Communicator::local());

}  // namespace filkit
