#include "filkit/leakage/white_box_attack.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/timing.hpp"

#include "filkit/base/first_exception.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/summary.hpp"
#include "leakage/binary_model.hpp"
#include "models/glm_loss.hpp"

#include <Eigen/Cholesky>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

// What every candidate of every example shares: the design, A = H^-1, targets and weights.
struct Problem {
  Problem(const Model& model, const Dataset& train, const VectorXd& omega_in, const AttributeCandidates& candidates,
          const Communicator& comm)
      : model(model),
        train(train),
        design(train.X, model.intercept),
        w(model.flat()),
        omega(omega_in.size() ? omega_in : VectorXd::Ones(train.n())),
        candidates(candidates) {
    if (omega.size() != train.n())
      throw OptionError::with_text("example_weights", "candidate minimisers: " + std::to_string(omega.size()) +
                                                          " example weights for " + std::to_string(train.n()) +
                                                          " examples");
    FitOptions coding;
    coding.kind = model.kind;
    coding.regression = model.regression;
    target = model_targets(train, coding);
    const MatrixXd H = hessian(model, train, omega, comm);
    const Eigen::LLT<MatrixXd> llt(H);
    if (llt.info() != Eigen::Success || !(llt.rcond() > 1e-14))
      throw NumericalError("white-box attack: the Hessian is singular; set a positive l2 (L2 strength)");
    A = llt.solve(MatrixXd::Identity(H.rows(), H.cols()));
    const Index offset = model.intercept ? 1 : 0;
    for (Index j : candidates.columns) block.push_back(j + offset);
    A_block = A(Eigen::all, block);
  }

  // A design row with its attribute at level k.
  VectorXd at_level(VectorXd x, Index k) const {
    for (std::size_t c = 0; c < block.size(); ++c) x(block[c]) = candidates.patterns(k, static_cast<Index>(c));
    return x;
  }
  // Design row of example i with its attribute at level k.
  VectorXd row_at_level(Index i, Index k) const { return at_level(design.row(i), k); }

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
    throw NumericalError("white-box attack: changing example " + std::to_string(i) +
                         " makes the Hessian singular (the example has leverage ~1); set a positive l2 (L2 strength)");
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

// What a candidate's computation needs of its example: its design row, weight, target and level
// (on the ranks of an MPI job, sent by the rank that owns it to all).
struct AttackedRow {
  Index index = 0;  // in the messages: the example's global index
  VectorXd x;
  double omega = 1.0, target = 0.0;
  Index truth = 0;
};

AttackedRow attacked_row(const Problem& p, Index i, Index global_index) {
  return {global_index, p.design.row(i), p.omega(i), p.target(i), p.candidates.truth[static_cast<std::size_t>(i)]};
}

// Logistic: chord Newton from w* for one candidate; false if it did not converge. The objective's
// gradient is that of all ranks (a collective call a step on several).
bool logistic_shift(const Problem& p, const detail::GlmObjective& objective, const VectorXd& gradient_at_w,
                    double tolerance, const AttackedRow& row, Index k, Eigen::Ref<VectorXd> shift) {
  const Index i = row.index;
  const double omega = row.omega, t = row.target;
  const VectorXd& x = row.x;
  const VectorXd x_new = p.at_level(row.x, k);
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

// A full refit of example i at level k, on a private copy of the data. On the ranks of an MPI job
// every rank refits (collective) and only the one that owns the example changes it (i = -1 elsewhere).
VectorXd refit_shift(const Problem& p, Dataset& copy, const FitOptions& options, Index i, Index k,
                     const Communicator& comm) {
  VectorXd original;
  if (i >= 0) {
    original = copy.X.row(i).transpose();
    for (std::size_t c = 0; c < p.candidates.columns.size(); ++c)
      copy.X(i, p.candidates.columns[c]) = p.candidates.patterns(k, static_cast<Index>(c));
  }
  const Model changed = p.model.kind == ModelKind::kLeastSquares ? fit(copy, options, p.omega, comm)
                                                                 : refit(copy, options, p.model, p.omega, comm);
  if (i >= 0) copy.X.row(i) = original.transpose();
  return changed.flat() - p.w;
}

}  // namespace

namespace {

// Example i (a local row, or -1 on the ranks that do not own it) as every rank needs it: the owner's
// row added over the ranks, to whom the others add zeros (exact).
AttackedRow row_from_owner(const Problem& p, Index i, Index row_offset, const Communicator& comm) {
  const Index width = p.w.size();
  VectorXd message = VectorXd::Zero(width + 4);
  if (i >= 0) {
    const AttackedRow own = attacked_row(p, i, row_offset + i);
    message << own.x, own.omega, own.target, static_cast<double>(own.truth), static_cast<double>(own.index);
  }
  comm.sum(message);
  return {static_cast<Index>(message(width + 3)), message.head(width), message(width), message(width + 1),
          static_cast<Index>(message(width + 2))};
}

// The shifts of one example's candidates into `rows` (logistic chord Newton with refit fallbacks,
// or refits); returns the refits that were fallbacks.
Index candidate_shifts(const Problem& p, const detail::GlmObjective& objective, const VectorXd& gradient_at_w,
                       double tolerance, const AttackedRow& row, Index local_row, Dataset& copy,
                       const FitOptions& options, bool logistic_update, const Communicator& comm,
                       Eigen::Ref<MatrixXd> rows) {
  Index fallbacks = 0;
  for (Index k = 0; k < p.candidates.num_levels(); ++k) {
    if (k == row.truth) continue;
    VectorXd shift(p.w.size());
    const bool converged = logistic_update && logistic_shift(p, objective, gradient_at_w, tolerance, row, k, shift);
    if (!converged) {
      shift = refit_shift(p, copy, options, local_row, k, comm);
      if (logistic_update) ++fallbacks;
    }
    if (rows.rows() > 0) rows.row(k) = shift.transpose();
  }
  return fallbacks;
}

}  // namespace

CandidateMinimisers candidate_minimisers(const Model& model, const Dataset& train, const VectorXd& omega,
                                         const AttributeCandidates& candidates, const std::vector<Index>& examples,
                                         const FitOptions& options, WhiteBoxSolver solver, bool progress,
                                         const Communicator& comm) {
  detail::require_binary_model(model, "white-box attack");
  options.validate();
  // Sizes fixed by the attack's own setup: a bug otherwise.
  if (static_cast<Index>(candidates.truth.size()) != train.n())
    throw std::logic_error("candidate minimisers: the candidates describe " + std::to_string(candidates.truth.size()) +
                           " examples, the data have " + std::to_string(train.n()));
  for (Index i : examples)
    if (i < 0 || i >= train.n())
      throw OptionError::with_text("examples", "candidate minimisers: example " + std::to_string(i) +
                                                   " is outside 0.." + std::to_string(train.n() - 1));
  const auto start = Clock::now();
  const Problem problem(model, train, omega, candidates, comm);
  const Index K = candidates.num_levels(), m = static_cast<Index>(examples.size());
  CandidateMinimisers result;
  result.examples = examples;
  result.levels = K;
  result.shifts = MatrixXd::Zero(m * K, model.num_params());
  const bool logistic_update = solver == WhiteBoxSolver::kUpdate && model.kind != ModelKind::kLeastSquares;
  const detail::GlmObjective objective(model, train, problem.omega, comm);
  VectorXd gradient_at_w;
  double tolerance = 0.0;  // fit()'s: relative to the gradient at w = 0
  if (logistic_update) {
    gradient_at_w = objective.gradient(problem.w);
    tolerance = options.gradient_tolerance * std::max(1.0, objective.gradient(VectorXd::Zero(problem.w.size())).norm());
  }

  if (comm.distributed() && (solver == WhiteBoxSolver::kRefit || logistic_update)) {
    // Each candidate needs sums over all the ranks' rows (a chord step's gradient, a refit): the
    // ranks take the attacked examples one at a time, in the order of the ranks, together; the
    // owner of each keeps its shifts.
    const Index total = comm.sum(m), first = comm.exclusive_prefix_sum(m);
    const Index row_offset = comm.exclusive_prefix_sum(train.n());
    Dataset copy = train;
    Progress bar("white-box candidates (" + to_string(solver) + ")", total, !progress || !comm.is_root());
    for (Index q = 0; q < total; ++q) {
      const bool mine = q >= first && q < first + m;
      const Index local_row = mine ? examples[static_cast<std::size_t>(q - first)] : -1;
      const AttackedRow row = row_from_owner(problem, local_row, row_offset, comm);
      MatrixXd none(0, model.num_params());
      result.fallback_refits += candidate_shifts(
          problem, objective, gradient_at_w, tolerance, row, local_row, copy, options, logistic_update, comm,
          mine ? Eigen::Ref<MatrixXd>(result.shifts.middleRows((q - first) * K, K)) : Eigen::Ref<MatrixXd>(none));
      bar.advance();
    }
    bar.finish();
  } else {
    Progress bar("white-box candidates (" + to_string(solver) + ")", m, !progress || !comm.is_root());
    FirstException failure;
    Index fallbacks = 0;
#pragma omp parallel reduction(+ : fallbacks)
    {
      Dataset copy;
      if (solver == WhiteBoxSolver::kRefit || logistic_update) copy = train;
#pragma omp for schedule(dynamic, 8)
      for (Index e = 0; e < m; ++e) {
        try {
          const Index i = examples[static_cast<std::size_t>(e)];
          auto rows = result.shifts.middleRows(e * K, K);
          if (solver == WhiteBoxSolver::kUpdate && model.kind == ModelKind::kLeastSquares)
            least_squares_shifts(problem, i, rows);
          else  // one process: comm is local here
            fallbacks += candidate_shifts(problem, objective, gradient_at_w, tolerance, attacked_row(problem, i, i), i,
                                          copy, options, logistic_update, comm, rows);
        } catch (...) {
          failure.capture();
        }
        bar.advance();
      }
    }
    bar.finish();
    failure.rethrow_if_any();
    result.fallback_refits = fallbacks;
  }
  result.squared_norms = result.shifts.rowwise().squaredNorm();
  result.seconds = seconds_since(start);
  return result;
}

std::vector<Index> white_box_guesses(const CandidateMinimisers& minimisers, const VectorXd& noise) {
  // Sizes fixed by the attack's own setup: a bug otherwise.
  if (noise.size() != minimisers.shifts.cols())
    throw std::logic_error("white_box_guesses: noise of size " + std::to_string(noise.size()) + " for " +
                           std::to_string(minimisers.shifts.cols()) + " parameters");
  // ||b - s||^2 = ||b||^2 - 2 b.s + ||s||^2: the first term is common to all candidates.
  const VectorXd score = minimisers.squared_norms - 2.0 * (minimisers.shifts * noise);
  const Index K = minimisers.levels;
  std::vector<Index> guesses(minimisers.examples.size());
  for (std::size_t e = 0; e < guesses.size(); ++e) score.segment(static_cast<Index>(e) * K, K).minCoeff(&guesses[e]);
  return guesses;
}

}  // namespace filkit
