#include "filkit/leakage/attribute_inference.hpp"
#include "filkit/data/pipeline.hpp"

#include "filkit/leakage/fil.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/index_list.hpp"
#include "filkit/base/summary.hpp"
#include "models/glm_loss.hpp"

#include "base/seeding.hpp"

#include <Eigen/Cholesky>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace



// ---------------------------------------------------------------------------------------------
// The attribute and its candidate levels.

AttributeColumns find_attribute(const Dataset& data, const std::string& spec) {
  const bool indices = !spec.empty() && spec.find_first_not_of("0123456789, ") == std::string::npos;
  if (!indices) return data.attribute(spec);
  AttributeColumns attribute;
  attribute.name = "columns " + spec;
  attribute.categorical = true;
  attribute.columns = parse_index_list(spec, "attribute");
  for (Index j : attribute.columns) {
    if (j >= data.d())
      throw std::invalid_argument("attribute: column " + std::to_string(j) + " is outside 0.." +
                                  std::to_string(data.d() - 1));
    attribute.levels.push_back("column " + std::to_string(j));
  }
  attribute.dropped_level = "none";
  return attribute;
}

namespace {

// The block's common nonzero value (1 unless rows were scaled), checking one-hot structure.
double one_hot_value(const Dataset& train, const AttributeColumns& attribute) {
  double value = 0.0;
  for (Index i = 0; i < train.n(); ++i) {
    Index nonzero = 0;
    for (Index j : attribute.columns) {
      const double x = train.X(i, j);
      if (x == 0.0) continue;
      ++nonzero;
      if (value == 0.0) value = x;
      if (nonzero > 1 || std::abs(x - value) > 1e-12 * std::abs(value))
        throw std::invalid_argument(
            "attribute '" + attribute.name + "' is not one-hot in training row " + std::to_string(i) +
            ": attribute inference needs a categorical attribute whose columns preprocessing left as 0 or one "
            "common value (use --scale none or global-max, no PCA)");
    }
  }
  return value == 0.0 ? 1.0 : value;
}

}  // namespace

AttributeCandidates attribute_candidates(const Dataset& train, const AttributeColumns& attribute) {
  if (attribute.columns.empty())
    throw std::invalid_argument("attribute '" + attribute.name + "' has no columns");
  if (!attribute.categorical)
    throw std::invalid_argument("attribute '" + attribute.name +
                                "' is numeric; attribute inference needs a categorical (one-hot) attribute");
  if (train.n() == 0) throw std::invalid_argument("attribute_candidates: no training examples");
  for (Index j : attribute.columns)
    if (j < 0 || j >= train.d())
      throw std::invalid_argument("attribute '" + attribute.name + "': column " + std::to_string(j) +
                                  " is outside 0.." + std::to_string(train.d() - 1));
  const double value = one_hot_value(train, attribute);
  const auto c = static_cast<Index>(attribute.columns.size());
  AttributeCandidates candidates;
  candidates.name = attribute.name;
  candidates.columns = attribute.columns;
  candidates.patterns = MatrixXd::Zero(c + 1, c);
  candidates.patterns.topRows(c).diagonal().setConstant(value);
  for (Index k = 0; k < c; ++k)
    candidates.levels.push_back(static_cast<Index>(attribute.levels.size()) == c ? attribute.levels[k]
                                                                               : "column " + std::to_string(attribute.columns[k]));
  candidates.levels.push_back(attribute.dropped_level.empty() ? "none" : attribute.dropped_level);
  candidates.truth.assign(static_cast<std::size_t>(train.n()), c);
  candidates.prior = VectorXd::Zero(c + 1);
  for (Index i = 0; i < train.n(); ++i) {
    for (Index k = 0; k < c; ++k)
      if (train.X(i, attribute.columns[k]) != 0.0) candidates.truth[static_cast<std::size_t>(i)] = k;
    candidates.prior(candidates.truth[static_cast<std::size_t>(i)]) += 1.0;
  }
  candidates.prior /= static_cast<double>(train.n());
  candidates.prior.maxCoeff(&candidates.mode);
  return candidates;
}

// ---------------------------------------------------------------------------------------------
// Candidate minimisers.

namespace {

void check_binary_model(const Model& model, const std::string& who) {
  if (model.kind == ModelKind::kSoftmax)
    throw std::invalid_argument(who + ": softmax models are not supported; use least-squares or logistic");
}

// What every candidate of every example shares: the design, A = H^-1, targets and weights.
struct Problem {
  Problem(const Model& model, const Dataset& train, const VectorXd& omega_in, const AttributeCandidates& candidates)
      : model(model), train(train), design(train.X, model.intercept), w(model.flat()),
        omega(omega_in.size() ? omega_in : VectorXd::Ones(train.n())), candidates(candidates) {
    if (omega.size() != train.n())
      throw std::invalid_argument("candidate minimisers: " + std::to_string(omega.size()) + " example weights for " +
                                  std::to_string(train.n()) + " examples");
    FitOptions coding;
    coding.kind = model.kind;
    coding.regression = model.regression;
    target = model_targets(train, coding);
    const MatrixXd H = hessian(model, train, omega);
    const Eigen::LLT<MatrixXd> llt(H);
    if (llt.info() != Eigen::Success || !(llt.rcond() > 1e-14))
      throw std::runtime_error("white-box attack: the Hessian is singular; set a positive --l2");
    A = llt.solve(MatrixXd::Identity(H.rows(), H.cols()));
    const Index offset = model.intercept ? 1 : 0;
    for (Index j : candidates.columns) block.push_back(j + offset);
    A_block = A(Eigen::all, block);
  }

  // Design row of example i with its attribute at level k.
  VectorXd row_at_level(Index i, Index k) const {
    VectorXd x = design.row(i);
    for (std::size_t c = 0; c < block.size(); ++c) x(block[c]) = candidates.patterns(k, static_cast<Index>(c));
    return x;
  }

  const Model& model;
  const Dataset& train;
  detail::Design design;
  VectorXd w;
  VectorXd omega;
  const AttributeCandidates& candidates;
  VectorXd target;
  MatrixXd A;
  std::vector<Index> block;  // the attribute's coordinates of w
  MatrixXd A_block;          // A's columns of the block
};

// (I + C G)^-1 C r for the 2x2 Woodbury system of U = [x, x'], C = diag(c0, c1), G = U^T A U.
Eigen::Vector2d woodbury_solve(const Eigen::Matrix2d& G, const Eigen::Vector2d& C, const Eigen::Vector2d& r, Index i) {
  const Eigen::Matrix2d M = Eigen::Matrix2d::Identity() + C.asDiagonal() * G;
  if (!(std::abs(M.determinant()) > 1e-13 * std::max(1.0, M.cwiseAbs().maxCoeff() * M.cwiseAbs().maxCoeff())))
    throw std::runtime_error("white-box attack: changing example " + std::to_string(i) +
                             " makes the Hessian singular (the example has leverage ~1); set a positive --l2");
  return M.partialPivLu().solve(C.asDiagonal() * r);
}

// Least squares: every candidate of example i in closed form (see the header).
void least_squares_shifts(const Problem& p, Index i, Eigen::Ref<MatrixXd> shifts) {
  const Index truth = p.candidates.truth[static_cast<std::size_t>(i)];
  const double omega = p.omega(i), t = p.target(i);
  const VectorXd x = p.design.row(i);
  const VectorXd Ax = p.A * x;
  const VectorXd x_block = p.candidates.patterns.row(truth).transpose();
  for (Index k = 0; k < p.candidates.num_levels(); ++k) {
    if (k == truth || omega == 0.0) {
      shifts.row(k).setZero();
      continue;
    }
    const VectorXd x_new = p.row_at_level(i, k);
    const VectorXd Ax_new = Ax + p.A_block * (p.candidates.patterns.row(k).transpose() - x_block);
    const VectorXd moved = omega * t * (Ax_new - Ax);  // A b' - w*
    const VectorXd Ab = p.w + moved;
    Eigen::Matrix2d G;
    G << x.dot(Ax), x.dot(Ax_new), x_new.dot(Ax), x_new.dot(Ax_new);
    const Eigen::Vector2d s = woodbury_solve(G, {-omega, omega}, {x.dot(Ab), x_new.dot(Ab)}, i);
    shifts.row(k) = (moved - s(0) * Ax - s(1) * Ax_new).transpose();
  }
}

constexpr int kMaxChordSteps = 30;

// Logistic: chord Newton from w* for one candidate; false if it did not converge.
bool logistic_shift(const Problem& p, const detail::GlmObjective& objective, const VectorXd& gradient_at_w,
                    double tolerance, Index i, Index k, Eigen::Ref<VectorXd> shift) {
  const double omega = p.omega(i), t = p.target(i);
  const VectorXd x = p.design.row(i), x_new = p.row_at_level(i, k);
  const VectorXd Ax = p.A * x, Ax_new = p.A * x_new;
  const auto loss = [&](const VectorXd& v, const VectorXd& row) {
    return detail::scalar_loss(p.model.kind, row.dot(v), t);
  };
  Eigen::Matrix2d G;
  G << x.dot(Ax), x.dot(Ax_new), x_new.dot(Ax), x_new.dot(Ax_new);
  const Eigen::Vector2d C(-omega * loss(p.w, x).second, omega * loss(p.w, x_new).second);
  // The changed objective's gradient: F's plus example i's new term minus its old one.
  const auto changed_gradient = [&](const VectorXd& v, const VectorXd& full) {
    return VectorXd(full + omega * (loss(v, x_new).first * x_new - loss(v, x).first * x));
  };
  VectorXd v = p.w;
  VectorXd g = changed_gradient(v, gradient_at_w);
  double previous = std::numeric_limits<double>::infinity();
  for (int step = 0; step < kMaxChordSteps; ++step) {
    // Below the tolerance, or stalled at the rounding floor of the gradient's sum close to it
    // (fit()'s Newton accepts the same floor).
    const double norm = g.norm();
    const bool stalled = norm > 0.5 * previous;
    if (norm <= tolerance || (stalled && norm <= 1e3 * tolerance)) {
      shift = v - p.w;
      return true;
    }
    // The chord contracts fast only while H(w*) stays close to the changed problem's Hessian;
    // when it does not (small n, near-separable data), a warm-started Newton refit is cheaper.
    if (stalled) return false;
    previous = norm;
    const VectorXd Ag = p.A * g;
    const Eigen::Vector2d s = woodbury_solve(G, C, {x.dot(Ag), x_new.dot(Ag)}, i);
    v -= Ag - s(0) * Ax - s(1) * Ax_new;
    g = changed_gradient(v, objective.gradient(v));
  }
  return false;
}

// A full refit of example i at level k, on a private copy of the data.
VectorXd refit_shift(const Problem& p, Dataset& copy, const FitOptions& options, Index i, Index k) {
  const VectorXd original = copy.X.row(i).transpose();
  for (std::size_t c = 0; c < p.candidates.columns.size(); ++c)
    copy.X(i, p.candidates.columns[c]) = p.candidates.patterns(k, static_cast<Index>(c));
  const Model changed = p.model.kind == ModelKind::kLeastSquares ? fit(copy, options, p.omega)
                                                                 : refit(copy, options, p.model, p.omega);
  copy.X.row(i) = original.transpose();
  return changed.flat() - p.w;
}

}  // namespace

CandidateMinimisers candidate_minimisers(const Model& model, const Dataset& train, const VectorXd& omega,
                                         const AttributeCandidates& candidates, const std::vector<Index>& examples,
                                         const FitOptions& options, WhiteBoxSolver solver, bool progress) {
  check_binary_model(model, "white-box attack");
  options.validate();
  if (static_cast<Index>(candidates.truth.size()) != train.n())
    throw std::invalid_argument("candidate minimisers: the candidates describe " + std::to_string(candidates.truth.size()) +
                                " examples, the data have " + std::to_string(train.n()));
  for (Index i : examples)
    if (i < 0 || i >= train.n())
      throw std::invalid_argument("candidate minimisers: example " + std::to_string(i) + " is outside 0.." +
                                  std::to_string(train.n() - 1));
  const auto start = Clock::now();
  const Problem problem(model, train, omega, candidates);
  const Index K = candidates.num_levels(), m = static_cast<Index>(examples.size());
  CandidateMinimisers result;
  result.examples = examples;
  result.levels = K;
  result.shifts = MatrixXd::Zero(m * K, model.num_params());
  const bool logistic_update = solver == WhiteBoxSolver::kUpdate && model.kind != ModelKind::kLeastSquares;
  const detail::GlmObjective objective(model, train, problem.omega);
  VectorXd gradient_at_w;
  double tolerance = 0.0;  // fit()'s: relative to the gradient at w = 0
  if (logistic_update) {
    gradient_at_w = objective.gradient(problem.w);
    tolerance = options.gradient_tolerance * std::max(1.0, objective.gradient(VectorXd::Zero(problem.w.size())).norm());
  }

  Progress bar("white-box candidates (" + to_string(solver) + ")", m, !progress);
  std::exception_ptr failure;
  Index fallbacks = 0;
#pragma omp parallel reduction(+ : fallbacks)
  {
    Dataset copy;
    if (solver == WhiteBoxSolver::kRefit || logistic_update) copy = train;
#pragma omp for schedule(dynamic, 8)
    for (Index e = 0; e < m; ++e) {
      try {
        const Index i = examples[static_cast<std::size_t>(e)];
        const Index truth = candidates.truth[static_cast<std::size_t>(i)];
        auto rows = result.shifts.middleRows(e * K, K);
        if (solver == WhiteBoxSolver::kUpdate && model.kind == ModelKind::kLeastSquares) {
          least_squares_shifts(problem, i, rows);
        } else {
          for (Index k = 0; k < K; ++k) {
            if (k == truth) continue;
            VectorXd shift(problem.w.size());
            const bool converged = logistic_update && logistic_shift(problem, objective, gradient_at_w, tolerance, i, k, shift);
            if (!converged) {
              shift = refit_shift(problem, copy, options, i, k);
              if (logistic_update) ++fallbacks;
            }
            rows.row(k) = shift.transpose();
          }
        }
      } catch (...) {
#pragma omp critical(filkit_attack_failure)
        if (!failure) failure = std::current_exception();
      }
      bar.advance();
    }
  }
  bar.finish();
  if (failure) std::rethrow_exception(failure);
  result.fallback_refits = fallbacks;
  result.squared_norms = result.shifts.rowwise().squaredNorm();
  result.seconds = seconds_since(start);
  return result;
}

std::vector<Index> white_box_guesses(const CandidateMinimisers& minimisers, const VectorXd& noise) {
  if (noise.size() != minimisers.shifts.cols())
    throw std::invalid_argument("white_box_guesses: noise of size " + std::to_string(noise.size()) + " for " +
                                std::to_string(minimisers.shifts.cols()) + " parameters");
  // ||b - s||^2 = ||b||^2 - 2 b.s + ||s||^2: the first term is common to all candidates.
  const VectorXd score = minimisers.squared_norms - 2.0 * (minimisers.shifts * noise);
  const Index K = minimisers.levels;
  std::vector<Index> guesses(minimisers.examples.size());
  for (std::size_t e = 0; e < guesses.size(); ++e) score.segment(static_cast<Index>(e) * K, K).minCoeff(&guesses[e]);
  return guesses;
}

// ---------------------------------------------------------------------------------------------
// Black box.

std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples) {
  check_binary_model(released, "black-box attack");
  FitOptions coding;
  coding.kind = released.kind;
  coding.regression = released.regression;
  const VectorXd target = model_targets(train, coding);
  const detail::Design design(train.X, released.intercept);
  const VectorXd scores = design.times(released.weights).col(0);
  const Index offset = released.intercept ? 1 : 0, K = candidates.num_levels();
  VectorXd block_weights(static_cast<Index>(candidates.columns.size()));
  for (std::size_t c = 0; c < candidates.columns.size(); ++c)
    block_weights(static_cast<Index>(c)) = released.weights(candidates.columns[c] + offset, 0);
  const VectorXd level_scores = candidates.patterns * block_weights;  // K: the block's part of the score
  const VectorXd log_prior = candidates.prior.array().log();

  const bool gaussian = released.kind == ModelKind::kLeastSquares;
  const double dof = static_cast<double>(std::max<Index>(train.n() - released.num_params(), 1));
  const double variance = std::max((scores - target).squaredNorm() / dof, std::numeric_limits<double>::min());
  Eigen::Matrix2d log_pi;  // log P(y | prediction), add-one smoothed
  if (!gaussian) {
    Eigen::Matrix2d counts = Eigen::Matrix2d::Ones();
    for (Index j = 0; j < train.n(); ++j) counts(static_cast<Index>(target(j)), scores(j) >= 0.0 ? 1 : 0) += 1.0;
    log_pi = (counts.array().rowwise() / counts.colwise().sum().array()).log();
  }
  std::vector<Index> guesses(examples.size());
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const Index i = examples[e];
    const double base = scores(i) - level_scores(candidates.truth[static_cast<std::size_t>(i)]);
    double best = -std::numeric_limits<double>::infinity();
    guesses[e] = candidates.mode;
    for (Index k = 0; k < K; ++k) {
      const double a = base + level_scores(k);
      const double fit = gaussian ? -(a - target(i)) * (a - target(i)) / (2.0 * variance)
                                  : log_pi(static_cast<Index>(target(i)), a >= 0.0 ? 1 : 0);
      if (log_prior(k) + fit > best) {
        best = log_prior(k) + fit;
        guesses[e] = k;
      }
    }
  }
  return guesses;
}

// ---------------------------------------------------------------------------------------------
// The whole experiment.

void AttackOptions::validate() const {
  fit.validate();
  if (fit.kind == ModelKind::kSoftmax)
    throw std::invalid_argument("AttackOptions.fit.kind = softmax: the attacks need least-squares or logistic");
  if (sigmas.empty()) throw std::invalid_argument("AttackOptions.sigmas is empty; give at least one noise scale");
  for (double sigma : sigmas)
    if (!(sigma > 0.0) || !std::isfinite(sigma))
      throw std::invalid_argument("AttackOptions.sigmas contains " + number(sigma) + ": every sigma must be finite and > 0");
  if (trials < 1) throw std::invalid_argument("AttackOptions.trials = " + std::to_string(trials) + ": must be >= 1");
  if (!white_box && !black_box)
    throw std::invalid_argument("AttackOptions: white_box and black_box are both off; run at least one attack");
  if (max_examples < 0)
    throw std::invalid_argument("AttackOptions.max_examples = " + std::to_string(max_examples) + ": must be >= 0");
  if (naive_examples < 0)
    throw std::invalid_argument("AttackOptions.naive_examples = " + std::to_string(naive_examples) + ": must be >= 0");
  if (naive_examples > 0 && (solver != WhiteBoxSolver::kUpdate || !white_box))
    throw std::invalid_argument("AttackOptions.naive_examples = " + std::to_string(naive_examples) +
                                ": the naive comparison needs the white-box attack with solver 'update'");
  if (groups < 1) throw std::invalid_argument("AttackOptions.groups = " + std::to_string(groups) + ": must be >= 1");
}

namespace {

std::vector<Index> attacked_examples(Index n, Index max_examples, std::uint64_t seed) {
  if (max_examples == 0 || max_examples >= n) {
    std::vector<Index> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), Index{0});
    return all;
  }
  // shuffle_split's held-out part is a portable seeded sample of exactly max_examples rows.
  return shuffle_split(n, static_cast<double>(max_examples) / static_cast<double>(n), seed).test;
}

// Quantile groups by rank of eta (ties by example order), 0 = lowest.
std::vector<int> eta_groups(const VectorXd& eta, int groups) {
  const Index m = eta.size();
  std::vector<Index> order(static_cast<std::size_t>(m));
  std::iota(order.begin(), order.end(), Index{0});
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return eta(a) < eta(b); });
  std::vector<int> group(static_cast<std::size_t>(m));
  for (Index rank = 0; rank < m; ++rank)
    group[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])] = static_cast<int>(rank * groups / m);
  return group;
}

// Independent, well-mixed seeds for the trials' generators (the splitmix64 sequence from seed).
std::uint64_t trial_seed(std::uint64_t seed, int trial) {
  return splitmix64(seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(trial));
}

// One noise draw's outcome at one sigma.
struct TrialOutcome {
  std::vector<char> white_box, black_box;  // per attacked example: guessed right
  double train_mse = 0.0, test_mse = 0.0, train_accuracy = 0.0, test_accuracy = 0.0;
};

struct Shared {
  const Dataset& train;
  const Dataset& test;
  const Model& model;
  const AttributeCandidates& candidates;
  const std::vector<Index>& examples;
  const CandidateMinimisers* minimisers;
  const AttackOptions& options;
};

std::vector<char> correct(const std::vector<Index>& guesses, const Shared& s) {
  std::vector<char> right(guesses.size());
  for (std::size_t e = 0; e < guesses.size(); ++e)
    right[e] = guesses[e] == s.candidates.truth[static_cast<std::size_t>(s.examples[e])];
  return right;
}

TrialOutcome run_trial(const Shared& s, const VectorXd& z, double sigma) {
  TrialOutcome outcome;
  const VectorXd noise = sigma * z;
  Model released = s.model;
  released.set_flat(s.model.flat() + noise);
  if (s.options.white_box) outcome.white_box = correct(white_box_guesses(*s.minimisers, noise), s);
  if (s.options.black_box) outcome.black_box = correct(black_box_guesses(released, s.train, s.candidates, s.examples), s);
  const bool classification = !released.regression;
  outcome.train_mse = mean_squared_error(released, s.train);
  outcome.test_mse = mean_squared_error(released, s.test);
  outcome.train_accuracy = classification ? accuracy(released, s.train) : std::nan("");
  outcome.test_accuracy = classification ? accuracy(released, s.test) : std::nan("");
  return outcome;
}

// outcomes[t][k]: trial t at sigma k. Parallel over trials; each has its own generator.
std::vector<std::vector<TrialOutcome>> run_trials(const Shared& s) {
  const auto trials = static_cast<std::size_t>(s.options.trials);
  std::vector<std::vector<TrialOutcome>> outcomes(trials);
  Progress bar("attack trials", s.options.trials, !s.options.progress);
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int t = 0; t < s.options.trials; ++t) {
    try {
      std::mt19937_64 rng(trial_seed(s.options.seed, t));
      std::normal_distribution<double> normal;
      VectorXd z(s.model.num_params());
      for (Index k = 0; k < z.size(); ++k) z(k) = normal(rng);
      for (double sigma : s.options.sigmas) outcomes[static_cast<std::size_t>(t)].push_back(run_trial(s, z, sigma));
    } catch (...) {
#pragma omp critical(filkit_attack_failure)
      if (!failure) failure = std::current_exception();
    }
    bar.advance();
  }
  bar.finish();
  if (failure) std::rethrow_exception(failure);
  return outcomes;
}

double mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double sample_std(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double mu = mean(values);
  double sum = 0.0;
  for (double v : values) sum += (v - mu) * (v - mu);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

// One attack at one sigma: share of right guesses over the examples in each trial, per group
// over examples and trials, and per example over trials.
struct AttackSummary {
  double mean = 0.0, std = 0.0;
  std::vector<double> by_group;
  VectorXd per_example;
};

AttackSummary summarise_attack(const std::vector<std::vector<TrialOutcome>>& outcomes, std::size_t k,
                               std::vector<char> TrialOutcome::*attack, const std::vector<int>& group, int groups) {
  const auto G = static_cast<std::size_t>(groups);
  std::vector<double> per_trial, group_hits(G, 0.0), group_size(G, 0.0);
  AttackSummary summary;
  summary.per_example = VectorXd::Zero(static_cast<Index>(group.size()));
  for (const auto& trial : outcomes) {
    const std::vector<char>& right = trial[k].*attack;
    double hits = 0.0;
    for (std::size_t e = 0; e < right.size(); ++e) {
      hits += right[e];
      group_hits[static_cast<std::size_t>(group[e])] += right[e];
      group_size[static_cast<std::size_t>(group[e])] += 1.0;
      summary.per_example(static_cast<Index>(e)) += right[e];
    }
    per_trial.push_back(hits / static_cast<double>(right.size()));
  }
  summary.per_example /= static_cast<double>(outcomes.size());
  summary.mean = mean(per_trial);
  summary.std = sample_std(per_trial);
  for (std::size_t g = 0; g < G; ++g)
    summary.by_group.push_back(group_size[g] > 0 ? group_hits[g] / group_size[g] : std::nan(""));
  return summary;
}

SigmaAccuracy summarise_sigma(const std::vector<std::vector<TrialOutcome>>& outcomes, std::size_t k, AttackResult& r,
                              const AttackOptions& options) {
  SigmaAccuracy acc;
  acc.sigma = options.sigmas[k];
  acc.eta_mean = r.eta.mean() / acc.sigma;
  acc.white_box = acc.white_box_std = acc.black_box = acc.black_box_std = std::nan("");
  const auto column = static_cast<Index>(k);
  if (options.white_box) {
    AttackSummary white = summarise_attack(outcomes, k, &TrialOutcome::white_box, r.group, options.groups);
    acc.white_box = white.mean;
    acc.white_box_std = white.std;
    acc.white_box_by_group = std::move(white.by_group);
    r.white_box_correct.col(column) = white.per_example;
  }
  if (options.black_box) {
    AttackSummary black = summarise_attack(outcomes, k, &TrialOutcome::black_box, r.group, options.groups);
    acc.black_box = black.mean;
    acc.black_box_std = black.std;
    acc.black_box_by_group = std::move(black.by_group);
    r.black_box_correct.col(column) = black.per_example;
  }
  std::vector<double> train_mse, test_mse, train_acc, test_acc;
  for (const auto& trial : outcomes) {
    train_mse.push_back(trial[k].train_mse);
    test_mse.push_back(trial[k].test_mse);
    train_acc.push_back(trial[k].train_accuracy);
    test_acc.push_back(trial[k].test_accuracy);
  }
  acc.train_mse = mean(train_mse);
  acc.test_mse = mean(test_mse);
  acc.train_accuracy = mean(train_acc);
  acc.test_accuracy = mean(test_acc);
  return acc;
}

void compare_with_naive(const Model& model, const Dataset& train, const VectorXd& omega, const AttackResult& r,
                        const AttackOptions& options, NaiveComparison& naive) {
  const auto count = std::min<std::size_t>(static_cast<std::size_t>(options.naive_examples), r.examples.size());
  const std::vector<Index> subset(r.examples.begin(), r.examples.begin() + static_cast<long>(count));
  const CandidateMinimisers fast =
      candidate_minimisers(model, train, omega, r.candidates, subset, options.fit, WhiteBoxSolver::kUpdate, false);
  const CandidateMinimisers slow =
      candidate_minimisers(model, train, omega, r.candidates, subset, options.fit, WhiteBoxSolver::kRefit, options.progress);
  naive.examples = static_cast<Index>(count);
  naive.seconds = slow.seconds;
  naive.fast_seconds = fast.seconds;
  naive.estimated_seconds_all = slow.seconds * static_cast<double>(r.examples.size()) / static_cast<double>(count);
  naive.max_difference = (fast.shifts - slow.shifts).cwiseAbs().maxCoeff() / std::max(1.0, model.flat().norm());
}

}  // namespace

namespace {

void evaluate_model(const Dataset& train, const Dataset& test, AttackResult& r) {
  const bool classification = !r.model.regression;
  r.train_mse = mean_squared_error(r.model, train);
  r.test_mse = mean_squared_error(r.model, test);
  r.train_accuracy = classification ? accuracy(r.model, train) : std::nan("");
  r.test_accuracy = classification ? accuracy(r.model, test) : std::nan("");
}

// Attribute-level eta (sigma = 1) of the attacked examples and their quantile groups.
void group_by_eta(const Dataset& train, const VectorXd& omega, int groups, AttackResult& r) {
  const VectorXd all_eta = FisherInformationLoss(r.model, train, omega)
                               .per_example_selection(CoordinateSelection::columns(r.candidates.columns));
  const auto m = static_cast<Index>(r.examples.size());
  r.eta.resize(m);
  for (Index e = 0; e < m; ++e) r.eta(e) = all_eta(r.examples[static_cast<std::size_t>(e)]);
  r.group = eta_groups(r.eta, groups);
}

// Mean eta and prior accuracy of every group and overall.
void summarise_groups(int groups, AttackResult& r) {
  const auto G = static_cast<std::size_t>(groups);
  std::vector<double> eta_sum(G, 0.0), prior_hits(G, 0.0), size(G, 0.0);
  for (std::size_t e = 0; e < r.examples.size(); ++e) {
    const auto g = static_cast<std::size_t>(r.group[e]);
    const bool right = r.candidates.truth[static_cast<std::size_t>(r.examples[e])] == r.candidates.mode;
    eta_sum[g] += r.eta(static_cast<Index>(e));
    prior_hits[g] += right;
    size[g] += 1.0;
  }
  for (std::size_t g = 0; g < G; ++g) {
    r.group_eta.push_back(size[g] > 0 ? eta_sum[g] / size[g] : std::nan(""));
    r.prior_by_group.push_back(size[g] > 0 ? prior_hits[g] / size[g] : std::nan(""));
  }
  r.prior_accuracy = std::accumulate(prior_hits.begin(), prior_hits.end(), 0.0) / static_cast<double>(r.examples.size());
}

VectorXd nearest_shifts(const CandidateMinimisers& minimisers, const AttributeCandidates& candidates) {
  const Index K = minimisers.levels;
  VectorXd nearest(static_cast<Index>(minimisers.examples.size()));
  for (Index e = 0; e < nearest.size(); ++e) {
    const Index truth = candidates.truth[static_cast<std::size_t>(minimisers.examples[static_cast<std::size_t>(e)])];
    double smallest = std::numeric_limits<double>::infinity();
    for (Index k = 0; k < K; ++k)
      if (k != truth) smallest = std::min(smallest, minimisers.squared_norms(e * K + k));
    nearest(e) = std::sqrt(smallest);
  }
  return nearest;
}

}  // namespace

AttackResult attribute_inference(const Dataset& train, const Dataset& test, const AttributeColumns& attribute,
                                 const AttackOptions& options, const VectorXd& omega) {
  options.validate();
  AttackResult r;
  r.candidates = attribute_candidates(train, attribute);
  r.examples = attacked_examples(train.n(), options.max_examples, options.seed);

  auto start = Clock::now();
  r.model = fit(train, options.fit, omega);
  r.seconds["fit"] = seconds_since(start);
  evaluate_model(train, test, r);

  start = Clock::now();
  group_by_eta(train, omega, options.groups, r);
  r.seconds["fil"] = seconds_since(start);
  summarise_groups(options.groups, r);

  CandidateMinimisers minimisers;
  r.nearest_shift = VectorXd::Constant(static_cast<Index>(r.examples.size()), std::nan(""));
  if (options.white_box) {
    minimisers = candidate_minimisers(r.model, train, omega, r.candidates, r.examples, options.fit, options.solver,
                                      options.progress);
    r.seconds["candidates"] = minimisers.seconds;
    r.fallback_refits = minimisers.fallback_refits;
    r.nearest_shift = nearest_shifts(minimisers, r.candidates);
    if (options.naive_examples > 0) compare_with_naive(r.model, train, omega, r, options, r.naive);
  }

  start = Clock::now();
  const Shared shared{train, test, r.model, r.candidates, r.examples, &minimisers, options};
  const auto outcomes = run_trials(shared);
  const auto m = static_cast<Index>(r.examples.size()), S = static_cast<Index>(options.sigmas.size());
  r.white_box_correct = MatrixXd::Constant(m, S, std::nan(""));
  r.black_box_correct = MatrixXd::Constant(m, S, std::nan(""));
  for (std::size_t k = 0; k < options.sigmas.size(); ++k) r.sigmas.push_back(summarise_sigma(outcomes, k, r, options));
  r.seconds["trials"] = seconds_since(start);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Outputs.

namespace {

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json numbers(const std::vector<double>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (double v : values) list.push_back(number_or_null(v));
  return list;
}

}  // namespace

nlohmann::json AttackResult::to_json() const {
  nlohmann::json by_sigma = nlohmann::json::array();
  for (const SigmaAccuracy& s : sigmas) {
    by_sigma.push_back({{"sigma", s.sigma},
                        {"eta_mean", s.eta_mean},
                        {"white_box", number_or_null(s.white_box)},
                        {"white_box_std", number_or_null(s.white_box_std)},
                        {"black_box", number_or_null(s.black_box)},
                        {"black_box_std", number_or_null(s.black_box_std)},
                        {"white_box_by_group", numbers(s.white_box_by_group)},
                        {"black_box_by_group", numbers(s.black_box_by_group)},
                        {"release_train_mse", number_or_null(s.train_mse)},
                        {"release_test_mse", number_or_null(s.test_mse)},
                        {"release_train_accuracy", number_or_null(s.train_accuracy)},
                        {"release_test_accuracy", number_or_null(s.test_accuracy)}});
  }
  const std::vector<double> prior(candidates.prior.data(), candidates.prior.data() + candidates.prior.size());
  nlohmann::json json;
  json["attribute"] = {{"name", candidates.name},
                       {"columns", candidates.columns},
                       {"levels", candidates.levels},
                       {"prior", prior},
                       {"mode", candidates.levels[static_cast<std::size_t>(candidates.mode)]}};
  json["examples"] = examples.size();
  json["eta_sigma_1"] = summarize(eta).to_json();
  if (nearest_shift.allFinite()) json["nearest_shift"] = summarize(nearest_shift).to_json();
  json["group_eta_sigma_1"] = numbers(group_eta);
  json["prior_accuracy"] = prior_accuracy;
  json["prior_by_group"] = numbers(prior_by_group);
  json["by_sigma"] = by_sigma;
  json["model"] = {{"train_mse", number_or_null(train_mse)},
                   {"test_mse", number_or_null(test_mse)},
                   {"train_accuracy", number_or_null(train_accuracy)},
                   {"test_accuracy", number_or_null(test_accuracy)},
                   {"fit_iterations", model.iterations}};
  json["white_box_fallback_refits"] = fallback_refits;
  if (naive.examples > 0)
    json["naive_refit"] = {{"examples", naive.examples},
                           {"seconds", naive.seconds},
                           {"update_seconds_same_examples", naive.fast_seconds},
                           {"estimated_seconds_all_examples", naive.estimated_seconds_all},
                           {"max_difference", naive.max_difference}};
  json["seconds"] = seconds;
  return json;
}

std::vector<std::string> AttackResult::table_header() const {
  return {"sigma",     "group",         "eta_mean",  "prior",          "white_box",     "white_box_std",
          "black_box", "black_box_std", "train_mse", "test_mse",       "train_accuracy", "test_accuracy"};
}

std::vector<std::vector<double>> AttackResult::table_rows() const {
  std::vector<std::vector<double>> rows;
  for (const SigmaAccuracy& s : sigmas) {
    rows.push_back({s.sigma, -1.0, s.eta_mean, prior_accuracy, s.white_box, s.white_box_std, s.black_box,
                    s.black_box_std, s.train_mse, s.test_mse, s.train_accuracy, s.test_accuracy});
    for (std::size_t g = 0; g < group_eta.size(); ++g) {
      const auto at = [&](const std::vector<double>& v) { return v.empty() ? std::nan("") : v[g]; };
      rows.push_back({s.sigma, static_cast<double>(g), group_eta[g] / s.sigma, prior_by_group[g],
                      at(s.white_box_by_group), std::nan(""), at(s.black_box_by_group), std::nan(""), s.train_mse,
                      s.test_mse, s.train_accuracy, s.test_accuracy});
    }
  }
  return rows;
}

std::vector<std::string> AttackResult::example_header() const {
  return {"index",         "level",        "group",          "sigma", "eta", "nearest_shift",
          "prior_correct", "white_box_accuracy", "black_box_accuracy"};
}

std::vector<std::vector<double>> AttackResult::example_rows() const {
  std::vector<std::vector<double>> rows;
  for (std::size_t k = 0; k < sigmas.size(); ++k) {
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const Index i = examples[e];
      const Index level = candidates.truth[static_cast<std::size_t>(i)];
      rows.push_back({static_cast<double>(i), static_cast<double>(level), static_cast<double>(group[e]), sigmas[k].sigma,
                      eta(static_cast<Index>(e)) / sigmas[k].sigma, nearest_shift(static_cast<Index>(e)),
                      level == candidates.mode ? 1.0 : 0.0,
                      white_box_correct(static_cast<Index>(e), static_cast<Index>(k)),
                      black_box_correct(static_cast<Index>(e), static_cast<Index>(k))});
    }
  }
  return rows;
}

}  // namespace filkit
