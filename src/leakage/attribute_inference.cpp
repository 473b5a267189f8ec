#include "filkit/leakage/attribute_inference.hpp"

#include "filkit/base/timing.hpp"

#include "filkit/base/first_exception.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/data/pipeline.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/leakage/result_checks.hpp"

#include "base/seeding.hpp"

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
  FirstException failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int t = 0; t < s.options.trials; ++t) {
    try {
      std::mt19937_64 rng(trial_seed(s.options.seed, t));
      std::normal_distribution<double> normal;
      VectorXd z(s.model.num_params());
      for (Index k = 0; k < z.size(); ++k) z(k) = normal(rng);
      for (double sigma : s.options.sigmas) outcomes[static_cast<std::size_t>(t)].push_back(run_trial(s, z, sigma));
    } catch (...) {
      failure.capture();
    }
    bar.advance();
  }
  bar.finish();
  failure.rethrow_if_any();
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
  require_finite(r.eta, "FIL", "the attribute-level eta of an attacked example",
                 "the model's Hessian may be nearly singular (raise l2)");
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
  // Rank groups need an example each: more groups than examples would report empty (NaN) groups.
  if (static_cast<std::size_t>(options.groups) > r.examples.size())
    throw std::invalid_argument("AttackOptions.groups = " + std::to_string(options.groups) + ": more than the " +
                                std::to_string(r.examples.size()) +
                                " attacked examples; give at most one group per attacked example");

  auto start = Clock::now();
  r.model = fit(train, options.fit, omega);
  require_finite_model(r.model);
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

}  // namespace filkit
