#include "filkit/leakage/attribute_inference.hpp"

#include "filkit/base/checks.hpp"
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

}  // namespace

void AttackOptions::validate() const {
  fit.validate();
  if (fit.kind == ModelKind::kSoftmax) option_error("model", "softmax", "the attacks need least-squares or logistic");
  if (sigmas.empty()) option_error("sigmas", "empty; give at least one noise scale");
  for (double sigma : sigmas) require_positive("sigmas", sigma);
  require_positive("trials", trials);
  if (!white_box && !black_box)
    option_error("white_box", "false", "and " + option_name("black_box") + " is false too; run at least one attack");
  require_non_negative("examples", max_examples);
  require_non_negative("compare_naive", naive_examples);
  if (naive_examples > 0 && (solver != WhiteBoxSolver::kUpdate || !white_box))
    option_error("compare_naive", std::to_string(naive_examples),
                 "the naive comparison needs the white-box attack with " + option_name("white_box_solver") + " update");
  require_positive("groups", groups);
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

// One noise draw's outcome at one sigma, on this process's attacked examples.
struct TrialOutcome {
  std::vector<char> white_box, black_box;  // per attacked example: guessed right
  double train_mse = 0.0, test_mse = 0.0, train_accuracy = 0.0, test_accuracy = 0.0;  // of all ranks' rows
};

struct Shared {
  const Dataset& train;
  const Dataset& test;
  const Model& model;
  const AttributeCandidates& candidates;
  const std::vector<Index>& examples;  // this process's attacked rows
  const CandidateMinimisers* minimisers;
  const AttackOptions& options;
  const Communicator& comm;
};

std::vector<char> correct(const std::vector<Index>& guesses, const Shared& s) {
  std::vector<char> right(guesses.size());
  for (std::size_t e = 0; e < guesses.size(); ++e)
    right[e] = guesses[e] == s.candidates.truth[static_cast<std::size_t>(s.examples[e])];
  return right;
}

// Draw t: the same standard normal z_t at every sigma, from its own generator.
VectorXd trial_noise(const Shared& s, int t) {
  std::mt19937_64 rng(trial_seed(s.options.seed, t));
  std::normal_distribution<double> normal;
  VectorXd z(s.model.num_params());
  for (Index k = 0; k < z.size(); ++k) z(k) = normal(rng);
  return z;
}

Model released_model(const Shared& s, const VectorXd& z, double sigma) {
  Model released = s.model;
  released.set_flat(s.model.flat() + sigma * z);
  return released;
}

// The sums over this process's rows that a release's evaluation and the black-box adversary need:
// the black-box statistics (5), then the squared errors and correct predictions of train and test.
constexpr Index kReleaseSums = 9;

void release_sums(const Shared& s, const Model& released,
                  Eigen::Ref<Eigen::RowVectorXd, 0, Eigen::InnerStride<>> sums) {
  const ReleaseStatistics statistics = release_statistics(released, s.train);
  const bool classification = !released.regression;
  const auto total = [&](const Dataset& data, double (*mean)(const Model&, const Dataset&)) {
    return data.n() > 0 ? mean(released, data) * static_cast<double>(data.n()) : 0.0;
  };
  sums << statistics.squared_residuals, statistics.counts(0, 0), statistics.counts(0, 1), statistics.counts(1, 0),
      statistics.counts(1, 1), total(s.train, mean_squared_error), total(s.test, mean_squared_error),
      classification ? std::round(total(s.train, accuracy)) : 0.0,
      classification ? std::round(total(s.test, accuracy)) : 0.0;
}

TrialOutcome run_trial(const Shared& s, const VectorXd& z, double sigma, const Eigen::RowVectorXd& sums, Index n_train,
                       Index n_test) {
  TrialOutcome outcome;
  const Model released = released_model(s, z, sigma);
  if (s.options.white_box) outcome.white_box = correct(white_box_guesses(*s.minimisers, sigma * z), s);
  if (s.options.black_box) {
    ReleaseStatistics whole;
    whole.squared_residuals = sums(0);
    whole.counts << sums(1), sums(2), sums(3), sums(4);
    whole.n = n_train;
    outcome.black_box = correct(black_box_guesses(released, s.train, s.candidates, s.examples, whole), s);
  }
  const bool classification = !released.regression;
  const auto share = [](double sum, Index n) { return n > 0 ? sum / static_cast<double>(n) : std::nan(""); };
  outcome.train_mse = share(sums(5), n_train);
  outcome.test_mse = share(sums(6), n_test);
  outcome.train_accuracy = classification ? share(sums(7), n_train) : std::nan("");
  outcome.test_accuracy = classification ? share(sums(8), n_test) : std::nan("");
  return outcome;
}

// outcomes[t][k]: trial t at sigma k. Parallel over trials; each has its own generator. First each
// release's sums over this process's rows, added over the ranks at once (the threads do not call
// MPI), then the guesses.
std::vector<std::vector<TrialOutcome>> run_trials(const Shared& s) {
  const int trials = s.options.trials;
  const auto S = static_cast<Index>(s.options.sigmas.size());
  MatrixXd sums(static_cast<Index>(trials) * S, kReleaseSums);
  FirstException failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int t = 0; t < trials; ++t) {
    try {
      const VectorXd z = trial_noise(s, t);
      for (Index k = 0; k < S; ++k)
        release_sums(s, released_model(s, z, s.options.sigmas[static_cast<std::size_t>(k)]), sums.row(t * S + k));
    } catch (...) {
      failure.capture();
    }
  }
  failure.rethrow_if_any();
  s.comm.sum(sums);
  const Index n_train = s.comm.sum(s.train.n()), n_test = s.comm.sum(s.test.n());

  std::vector<std::vector<TrialOutcome>> outcomes(static_cast<std::size_t>(trials));
  Progress bar("attack trials", trials, !s.options.progress || !s.comm.is_root());
#pragma omp parallel for schedule(dynamic, 1)
  for (int t = 0; t < trials; ++t) {
    try {
      const VectorXd z = trial_noise(s, t);
      for (Index k = 0; k < S; ++k)
        outcomes[static_cast<std::size_t>(t)].push_back(
            run_trial(s, z, s.options.sigmas[static_cast<std::size_t>(k)], sums.row(t * S + k), n_train, n_test));
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

// Over every rank's attacked examples: the hits of each trial and group are added over the ranks
// (m examples in all); per_example is of this process's examples.
AttackSummary summarise_attack(const std::vector<std::vector<TrialOutcome>>& outcomes, std::size_t k,
                               std::vector<char> TrialOutcome::*attack, const std::vector<int>& group, int groups,
                               Index m, const Communicator& comm) {
  const auto G = static_cast<Index>(groups);
  const auto T = static_cast<Index>(outcomes.size());
  VectorXd counts = VectorXd::Zero(T + 2 * G);  // hits of each trial, then each group's hits and size
  AttackSummary summary;
  summary.per_example = VectorXd::Zero(static_cast<Index>(group.size()));
  for (Index t = 0; t < T; ++t) {
    const std::vector<char>& right = outcomes[static_cast<std::size_t>(t)][k].*attack;
    for (std::size_t e = 0; e < right.size(); ++e) {
      counts(t) += right[e];
      counts(T + group[e]) += right[e];
      counts(T + G + group[e]) += 1.0;
      summary.per_example(static_cast<Index>(e)) += right[e];
    }
  }
  comm.sum(counts);  // counts: exact
  summary.per_example /= static_cast<double>(T);
  std::vector<double> per_trial;
  for (Index t = 0; t < T; ++t) per_trial.push_back(counts(t) / static_cast<double>(m));
  summary.mean = mean(per_trial);
  summary.std = sample_std(per_trial);
  for (Index g = 0; g < G; ++g)
    summary.by_group.push_back(counts(T + G + g) > 0 ? counts(T + g) / counts(T + G + g) : std::nan(""));
  return summary;
}

// This process's part of the attacked examples (all of them on one process): its rows among them,
// their eta (sigma = 1) and eta groups. The attacked examples are in increasing order, so the ranks'
// parts follow one another in rank order.
struct AttackedPart {
  std::vector<Index> rows;  // local row indices
  Index first = 0;          // position of the first in the list of all attacked examples
  VectorXd eta;
  std::vector<int> group;
};

SigmaAccuracy summarise_sigma(const std::vector<std::vector<TrialOutcome>>& outcomes, std::size_t k,
                              const AttackedPart& part, AttackResult& r, const AttackOptions& options,
                              const Communicator& comm) {
  SigmaAccuracy acc;
  acc.sigma = options.sigmas[k];
  const auto m = static_cast<Index>(r.examples.size());
  acc.eta_mean = comm.sum(part.eta.sum()) / static_cast<double>(m) / acc.sigma;
  acc.white_box = acc.white_box_std = acc.black_box = acc.black_box_std = std::nan("");
  // The white-box and the black-box attack alike, each into its own fields.
  const auto summarise = [&](std::vector<char> TrialOutcome::*guesses, double& mean, double& spread,
                             std::vector<double>& by_group, MatrixXd& correct) {
    AttackSummary summary = summarise_attack(outcomes, k, guesses, part.group, options.groups, m, comm);
    mean = summary.mean;
    spread = summary.std;
    by_group = std::move(summary.by_group);
    correct.col(static_cast<Index>(k)) = summary.per_example;
  };
  if (options.white_box)
    summarise(&TrialOutcome::white_box, acc.white_box, acc.white_box_std, acc.white_box_by_group, r.white_box_correct);
  if (options.black_box)
    summarise(&TrialOutcome::black_box, acc.black_box, acc.black_box_std, acc.black_box_by_group, r.black_box_correct);
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
                        const AttackedPart& part, const AttackOptions& options, const Communicator& comm,
                        NaiveComparison& naive) {
  // The first `count` attacked examples of all; this process's among them.
  const auto count = std::min<Index>(options.naive_examples, static_cast<Index>(r.examples.size()));
  const Index mine = std::clamp<Index>(count - part.first, 0, static_cast<Index>(part.rows.size()));
  const std::vector<Index> subset(part.rows.begin(), part.rows.begin() + static_cast<long>(mine));
  const CandidateMinimisers fast = candidate_minimisers(model, train, omega, r.candidates, subset, options.fit,
                                                        WhiteBoxSolver::kUpdate, false, comm);
  const CandidateMinimisers slow = candidate_minimisers(model, train, omega, r.candidates, subset, options.fit,
                                                        WhiteBoxSolver::kRefit, options.progress, comm);
  naive.examples = count;
  naive.seconds = comm.max(slow.seconds);
  naive.fast_seconds = comm.max(fast.seconds);
  naive.estimated_seconds_all = naive.seconds * static_cast<double>(r.examples.size()) / static_cast<double>(count);
  const double difference = mine > 0 ? (fast.shifts - slow.shifts).cwiseAbs().maxCoeff() : 0.0;
  naive.max_difference = comm.max(difference) / std::max(1.0, model.flat().norm());
}

}  // namespace

namespace {

void evaluate_model(const Dataset& train, const Dataset& test, AttackResult& r, const Communicator& comm) {
  const bool classification = !r.model.regression;
  r.train_mse = mean_squared_error_over_ranks(r.model, train, comm);
  r.test_mse = mean_squared_error_over_ranks(r.model, test, comm);
  r.train_accuracy = classification ? accuracy_over_ranks(r.model, train, comm) : std::nan("");
  r.test_accuracy = classification ? accuracy_over_ranks(r.model, test, comm) : std::nan("");
}

// Attribute-level eta (sigma = 1) of the attacked examples and their quantile groups (formed at rank
// 0 over all attacked examples, each rank given its part).
void group_by_eta(const Dataset& train, const VectorXd& omega, int groups, AttackedPart& part, AttackResult& r,
                  const Communicator& comm) {
  FilOptions fil_options;
  const VectorXd all_eta = FisherInformationLoss(r.model, train, omega, fil_options, comm)
                               .per_example_selection(CoordinateSelection::columns(r.candidates.columns));
  const auto m = static_cast<Index>(part.rows.size());
  part.eta.resize(m);
  for (Index e = 0; e < m; ++e) part.eta(e) = all_eta(part.rows[static_cast<std::size_t>(e)]);
  require_finite(part.eta, "FIL", "the attribute-level eta of an attacked example",
                 "the model's Hessian may be nearly singular (raise l2)");
  r.eta = comm.gather(part.eta);
  VectorXd group(static_cast<Index>(r.examples.size()));
  if (comm.is_root()) {
    const std::vector<int> every = eta_groups(r.eta, groups);
    for (std::size_t e = 0; e < every.size(); ++e) group(static_cast<Index>(e)) = every[e];
  }
  comm.broadcast(group);
  r.group.assign(group.data(), group.data() + group.size());
  part.group.assign(r.group.begin() + part.first, r.group.begin() + part.first + m);
}

// Mean eta and prior accuracy of every group and overall (over all ranks' attacked examples).
void summarise_groups(int groups, const AttackedPart& part, AttackResult& r, const Communicator& comm) {
  const auto G = static_cast<Index>(groups);
  VectorXd sums = VectorXd::Zero(3 * G);  // eta sum, prior hits and size of each group
  for (std::size_t e = 0; e < part.rows.size(); ++e) {
    const auto g = static_cast<Index>(part.group[e]);
    const bool right = r.candidates.truth[static_cast<std::size_t>(part.rows[e])] == r.candidates.mode;
    sums(g) += part.eta(static_cast<Index>(e));
    sums(G + g) += right;
    sums(2 * G + g) += 1.0;
  }
  comm.sum(sums);
  for (Index g = 0; g < G; ++g) {
    const double size = sums(2 * G + g);
    r.group_eta.push_back(size > 0 ? sums(g) / size : std::nan(""));
    r.prior_by_group.push_back(size > 0 ? sums(G + g) / size : std::nan(""));
  }
  r.prior_accuracy = sums.segment(G, G).sum() / static_cast<double>(r.examples.size());
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

// This process's part of the attacked examples: those among its rows.
AttackedPart attacked_part(const std::vector<Index>& examples, Index n_local, const Communicator& comm) {
  const Index offset = comm.exclusive_prefix_sum(n_local);
  const auto first = std::lower_bound(examples.begin(), examples.end(), offset);
  const auto last = std::lower_bound(first, examples.end(), offset + n_local);
  AttackedPart part;
  part.first = first - examples.begin();
  for (auto it = first; it != last; ++it) part.rows.push_back(*it - offset);
  return part;
}

// At rank 0, each column of `local` (rows: this process's attacked examples) over all ranks.
MatrixXd gathered_columns(const MatrixXd& local, Index m, const Communicator& comm) {
  if (!comm.distributed()) return local;
  MatrixXd all(comm.is_root() ? m : 0, local.cols());
  for (Index c = 0; c < local.cols(); ++c) {
    const VectorXd column = comm.gather(local.col(c));
    if (comm.is_root()) all.col(c) = column;
  }
  return all;
}

// At rank 0, every training example's level (the outputs name each attacked example's).
std::vector<Index> gathered_truth(const std::vector<Index>& truth, const Communicator& comm) {
  if (!comm.distributed()) return truth;
  VectorXd local(static_cast<Index>(truth.size()));
  for (std::size_t i = 0; i < truth.size(); ++i) local(static_cast<Index>(i)) = static_cast<double>(truth[i]);
  const VectorXd all = comm.gather(local);
  return std::vector<Index>(all.data(), all.data() + all.size());
}

}  // namespace

AttackResult attribute_inference(const Dataset& train, const Dataset& test, const AttributeColumns& attribute,
                                 const AttackOptions& options, const VectorXd& omega, const Communicator& comm) {
  options.validate();
  AttackResult r;
  r.candidates = attribute_candidates(train, attribute, comm);
  r.examples = attacked_examples(comm.sum(train.n()), options.max_examples, options.seed);
  // Rank groups need an example each: more groups than examples would report empty (NaN) groups.
  if (static_cast<std::size_t>(options.groups) > r.examples.size())
    option_error("groups", std::to_string(options.groups),
                 "more than the " + std::to_string(r.examples.size()) +
                     " attacked examples; give at most one group per attacked example");
  AttackedPart part = attacked_part(r.examples, train.n(), comm);

  auto start = Clock::now();
  r.model = fit(train, options.fit, omega, comm);
  require_finite_model(r.model);
  r.seconds["fit"] = seconds_since(start);
  evaluate_model(train, test, r, comm);

  start = Clock::now();
  group_by_eta(train, omega, options.groups, part, r, comm);
  r.seconds["fil"] = seconds_since(start);
  summarise_groups(options.groups, part, r, comm);

  CandidateMinimisers minimisers;
  VectorXd nearest = VectorXd::Constant(static_cast<Index>(part.rows.size()), std::nan(""));
  if (options.white_box) {
    minimisers = candidate_minimisers(r.model, train, omega, r.candidates, part.rows, options.fit, options.solver,
                                      options.progress, comm);
    r.seconds["candidates"] = minimisers.seconds;
    r.fallback_refits = minimisers.fallback_refits;
    nearest = nearest_shifts(minimisers, r.candidates);
    if (options.naive_examples > 0) compare_with_naive(r.model, train, omega, r, part, options, comm, r.naive);
  }

  start = Clock::now();
  const Shared shared{train, test, r.model, r.candidates, part.rows, &minimisers, options, comm};
  const auto outcomes = run_trials(shared);
  const auto m = static_cast<Index>(part.rows.size()), S = static_cast<Index>(options.sigmas.size());
  r.white_box_correct = MatrixXd::Constant(m, S, std::nan(""));
  r.black_box_correct = MatrixXd::Constant(m, S, std::nan(""));
  for (std::size_t k = 0; k < options.sigmas.size(); ++k)
    r.sigmas.push_back(summarise_sigma(outcomes, k, part, r, options, comm));
  r.seconds["trials"] = seconds_since(start);

  // Rank 0 gathers the per-example results, in the order of the attacked examples.
  const auto all = static_cast<Index>(r.examples.size());
  r.nearest_shift = gathered_columns(nearest, all, comm);
  r.white_box_correct = gathered_columns(r.white_box_correct, all, comm);
  r.black_box_correct = gathered_columns(r.black_box_correct, all, comm);
  r.candidates.truth = gathered_truth(r.candidates.truth, comm);
  return r;
}

}  // namespace filkit
