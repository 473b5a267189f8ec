#include "filkit/leakage/glm_reconstruction.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/leakage/biased_attacker.hpp"

#include "models/glm_loss.hpp"

#include "base/parallel_blocks.hpp"
#include "base/seeding.hpp"

#include <Eigen/Cholesky>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace filkit {

namespace {

constexpr Index kTrialsPerBlock = 32;  // columns of each GEMM: enough to run at BLAS-3 speed
constexpr Index kBlocksPerWave = 16;   // blocks reduced together; fixed so sums never depend on threads

// n_all: the examples of every rank (train.n() on one process).
void check_attack_inputs(const Model& model, const Dataset& train, Index n_all) {
  if (model.kind == ModelKind::kSoftmax)
    throw OptionError::with_text("model", "GLM attack: needs a binary model (logistic or least squares), not softmax");
  if (!model.intercept)
    throw OptionError::with_text("intercept",
                                 "GLM attack: the model needs an intercept (its coordinate is the divisor "
                                 "B_i[0]); fit with an intercept");
  if (train.d() != model.input_dim() || n_all != model.n_train)
    throw DataError("GLM attack: the model was fitted on " + std::to_string(model.n_train) + " x " +
                    std::to_string(model.input_dim()) + " data, given " + std::to_string(n_all) + " x " +
                    std::to_string(train.d()));
}

std::vector<Index> checked_rows(const std::vector<Index>& rows, Index n, const std::string& what) {
  if (rows.empty()) {
    std::vector<Index> all(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  std::vector<bool> listed(static_cast<std::size_t>(n), false);
  for (Index i : rows) {
    if (i < 0 || i >= n) option_error(what, "row " + std::to_string(i) + " is outside 0.." + std::to_string(n - 1));
    // Each row is one line of the outputs and one term of the summaries: a repeat would count twice.
    if (listed[static_cast<std::size_t>(i)]) option_error(what, "row " + std::to_string(i) + " is listed twice");
    listed[static_cast<std::size_t>(i)] = true;
  }
  return rows;
}

VectorXd coded_targets(const Model& model, const Dataset& train) {
  FitOptions coding;
  coding.kind = model.kind;
  coding.regression = model.regression;
  return model_targets(train, coding);
}

// dl/da of every example at every column of scores (n x T).
MatrixXd loss_derivatives(ModelKind kind, const MatrixXd& scores, const VectorXd& target) {
  MatrixXd r(scores.rows(), scores.cols());
  for (Index c = 0; c < scores.cols(); ++c)
    for (Index i = 0; i < scores.rows(); ++i) r(i, c) = detail::scalar_loss(kind, scores(i, c), target(i)).first;
  return r;
}

// grad F at every column of W (p x T): X~^T r + n lambda W.
MatrixXd objective_gradients(const detail::Design& design, const MatrixXd& r, const MatrixXd& W, double penalty) {
  MatrixXd g = design.transpose_times(r);
  g.noalias() += penalty * W;
  return g;
}

// What one block of trials contributes; summed over blocks in a fixed order.
struct BlockTotals {
  VectorXd mse_sum, mse_squared_sum;
  Eigen::VectorXi guarded;
  RowMatrix reconstruction_sum;
  Eigen::VectorXi reconstruction_count;
  // The Stein term of tr J_mu per example: y = s - s_lin against the control s_lin - d.
  std::vector<ControlVariateSums> jacobian_trace;
  // The sum of the errors is sum_t (g_0 x_i - g_{1:}) / D_it = x_i sum_t g_0 / D_it - G (1 / D_i.):
  // the first sum per example here, the second a GEMM per block (add_error_sums).
  VectorXd intercept_ratio_sum;
  MatrixXd inverse_divisors;  // |rows| x trials of the block, 0 where guarded
  MatrixXd g_features;        // d x trials of the block

  static BlockTotals zero(Index attacked, Index kept, Index d) {
    return {VectorXd::Zero(attacked),
            VectorXd::Zero(attacked),
            Eigen::VectorXi::Zero(attacked),
            RowMatrix::Zero(kept, d),
            Eigen::VectorXi::Zero(kept),
            std::vector<ControlVariateSums>(static_cast<std::size_t>(attacked)),
            VectorXd::Zero(attacked),
            MatrixXd(),
            MatrixXd()};
  }
  void add(const BlockTotals& other) {
    mse_sum += other.mse_sum;
    mse_squared_sum += other.mse_squared_sum;
    guarded += other.guarded;
    reconstruction_sum += other.reconstruction_sum;
    reconstruction_count += other.reconstruction_count;
    for (std::size_t k = 0; k < jacobian_trace.size(); ++k) jacobian_trace[k].add(other.jacobian_trace[k]);
    intercept_ratio_sum += other.intercept_ratio_sum;
  }
};

// Everything the trials share, computed once.
struct AttackSetup {
  const Model& model;
  const Dataset& train;
  detail::Design design;
  VectorXd target;
  std::vector<Index> rows;
  bool all_rows;
  RowMatrix selected;      // features of `rows` unless all_rows (no copy of X then)
  VectorXd squared_norms;  // ||x_i||^2 of `rows`
  std::vector<Index> kept;
  double penalty;
  GlmAttackOptions options;
  // For the bias and the Jacobian of the attack's mean (header comment): H at w* (of all ranks)
  // and its factorisation, the feature weights w_{1:}, and per attacked row r_i, c_i at w* and
  // x_i.w_{1:}. Left empty at sigma = 0, where they are not estimated.
  bool estimate_moments = false;
  MatrixXd hessian{};
  Eigen::LDLT<MatrixXd> hessian_factor{};
  VectorXd feature_weights{};
  VectorXd r{}, c{}, x_dot_w{};

  const RowMatrix& attacked() const { return all_rows ? train.X : selected; }
};

// The trials of one block released together: their noise E (p x T, w' = w* + sigma E), weights W,
// r (n x T) and g = grad F (p x T), first of this rank's examples only (data_gradients), then of
// all (finish_gradients).
struct BlockGradients {
  MatrixXd E, W, r, g;
};

BlockGradients data_gradients(const AttackSetup& setup, Index first_trial, Index count) {
  BlockGradients block;
  const Index p = setup.model.weights.rows();
  block.E.resize(p, count);
  block.W.resize(p, count);
  for (Index c = 0; c < count; ++c) {
    // As perturb_output draws it: the same bits as the release it returns.
    block.E.col(c) = output_noise(p, trial_seed(setup.options.seed, first_trial + c));
    block.W.col(c) = setup.model.weights.col(0) + setup.options.sigma * block.E.col(c);
  }
  block.r = loss_derivatives(setup.model.kind, setup.design.times(block.W), setup.target);
  block.g = objective_gradients(setup.design, block.r, block.W, 0.0);
  return block;
}

// grad F of the whole training set: the ranks' sums of X~^T r, then the penalty (as
// objective_gradients adds it, so one process computes the same bits as before).
void finish_gradients(const AttackSetup& setup, BlockGradients& block, const Communicator& comm) {
  comm.sum(block.g);
  block.g.noalias() += setup.penalty * block.W;
}

// Squared errors ||x_hat_i - x_i||^2 / d = ||g_0 x_i - g_{1:}||^2 / (d (r_i - g_0)^2), the norm
// expanded so that one GEMM gives x_i . g_{1:} for every example and trial; and the terms of the
// bias and of tr J_mu (header comment), whose per-trial vectors nu = H^{-1} eps and h = H eps meet
// x_i through one more GEMM, x_i . nu_{1:}.
void accumulate_errors(const AttackSetup& setup, const BlockGradients& block, BlockTotals& totals) {
  const Index d = setup.train.d(), count = block.g.cols();
  const auto m = static_cast<Index>(setup.rows.size());
  totals.g_features = block.g.bottomRows(d);
  const MatrixXd& g_features = totals.g_features;
  const MatrixXd cross = setup.attacked() * g_features;
  const VectorXd g_norm2 = g_features.colwise().squaredNorm().transpose();
  MatrixXd nu, h, x_dot_nu;
  VectorXd g_dot_nu, g_dot_w, h_dot_nu, h_dot_w;
  if (setup.estimate_moments) {
    nu = setup.hessian_factor.solve(block.E);
    h = setup.hessian * block.E;
    x_dot_nu = setup.attacked() * nu.bottomRows(d);
    g_dot_nu = g_features.cwiseProduct(nu.bottomRows(d)).colwise().sum().transpose();
    h_dot_nu = h.bottomRows(d).cwiseProduct(nu.bottomRows(d)).colwise().sum().transpose();
    g_dot_w = g_features.transpose() * setup.feature_weights;
    h_dot_w = h.bottomRows(d).transpose() * setup.feature_weights;
    totals.inverse_divisors = MatrixXd::Zero(m, count);
  }
  const double sigma = setup.options.sigma, dims = static_cast<double>(d);
  for (Index k = 0; k < m; ++k) {
    const Index i = setup.rows[static_cast<std::size_t>(k)];
    for (Index c = 0; c < count; ++c) {
      const double g0 = block.g(0, c), divisor = block.r(i, c) - g0;
      const double numerator = std::max(0.0, g0 * g0 * setup.squared_norms(k) - 2.0 * g0 * cross(k, c) + g_norm2(c));
      const double mse = numerator / (divisor * divisor * dims);
      if (std::abs(divisor) < setup.options.divisor_guard || !std::isfinite(mse)) {
        ++totals.guarded(k);
        continue;
      }
      totals.mse_sum(k) += mse;
      totals.mse_squared_sum(k) += mse * mse;
      if (!setup.estimate_moments) continue;
      totals.inverse_divisors(k, c) = 1.0 / divisor;
      totals.intercept_ratio_sum(k) += g0 / divisor;
      // s = eps^T J_i e / sigma with e = (g_0 x_i - g_{1:}) / D, and s_lin the same of e_lin.
      const double r = setup.r(k), curvature = setup.c(k), x_tilde_dot_nu = nu(0, c) + x_dot_nu(k, c);
      const double h0 = h(0, c);
      const double s = -(r * (g0 * x_dot_nu(k, c) - g_dot_nu(c)) +
                         curvature * x_tilde_dot_nu * (g0 * setup.x_dot_w(k) - g_dot_w(c))) /
                       (divisor * sigma);
      const double s_lin = -(r * (h0 * x_dot_nu(k, c) - h_dot_nu(c)) +
                             curvature * x_tilde_dot_nu * (h0 * setup.x_dot_w(k) - h_dot_w(c))) /
                           r;
      totals.jacobian_trace[static_cast<std::size_t>(k)].add(s - s_lin, s_lin - dims);
    }
  }
}

// sum_t g_{1:} / D_it for every attacked row, added to `sum` (|rows| x d) in row blocks.
void add_error_sums(const BlockTotals& block, MatrixXd& sum) {
  detail::for_each_block(sum.rows(), 512, [&](Index start, Index count) {
    sum.middleRows(start, count).noalias() +=
        block.inverse_divisors.middleRows(start, count) * block.g_features.transpose();
  });
}

void accumulate_reconstructions(const AttackSetup& setup, const BlockGradients& block, BlockTotals& totals) {
  const Index d = setup.train.d();
  for (std::size_t k = 0; k < setup.kept.size(); ++k) {
    const Index i = setup.kept[k];
    for (Index c = 0; c < block.g.cols(); ++c) {
      const double divisor = block.r(i, c) - block.g(0, c);
      const VectorXd x_hat = (block.r(i, c) * setup.train.X.row(i).transpose() - block.g.col(c).tail(d)) / divisor;
      if (std::abs(divisor) < setup.options.divisor_guard || !x_hat.allFinite()) continue;
      totals.reconstruction_sum.row(static_cast<Index>(k)) += x_hat.transpose();
      ++totals.reconstruction_count(static_cast<Index>(k));
    }
  }
}

BlockTotals block_totals(const AttackSetup& setup, const BlockGradients& block) {
  BlockTotals totals =
      BlockTotals::zero(static_cast<Index>(setup.rows.size()), static_cast<Index>(setup.kept.size()), setup.train.d());
  accumulate_errors(setup, block, totals);
  accumulate_reconstructions(setup, block, totals);
  return totals;
}

AttackSetup make_setup(const Model& model, const Dataset& train, const GlmAttackOptions& options, Index n_all,
                       const Communicator& comm) {
  AttackSetup setup{model,
                    train,
                    detail::Design(train.X, true),
                    coded_targets(model, train),
                    checked_rows(options.rows, train.n(), "rows"),
                    options.rows.empty(),
                    RowMatrix(),
                    VectorXd(),
                    options.keep_reconstructions,
                    static_cast<double>(n_all) * model.l2,
                    options};
  checked_rows(setup.kept, train.n(), "save_reconstructions");  // validation only
  if (!setup.all_rows) {
    setup.selected.resize(static_cast<Index>(setup.rows.size()), train.d());
    for (std::size_t k = 0; k < setup.rows.size(); ++k)
      setup.selected.row(static_cast<Index>(k)) = train.X.row(setup.rows[k]);
  }
  setup.squared_norms = setup.attacked().rowwise().squaredNorm();
  setup.hessian = hessian(model, train, VectorXd(), comm);  // collective: on every rank
  setup.estimate_moments = options.sigma > 0;
  if (setup.estimate_moments) {
    setup.hessian_factor.compute(setup.hessian);
    setup.feature_weights = model.weights.col(0).tail(train.d());
    const auto m = static_cast<Index>(setup.rows.size());
    setup.r.resize(m);
    setup.c.resize(m);
    const VectorXd scores = setup.design.times(model.weights).col(0);
    for (Index k = 0; k < m; ++k) {
      const Index i = setup.rows[static_cast<std::size_t>(k)];
      const detail::ScalarLoss loss = detail::scalar_loss(model.kind, scores(i), setup.target(i));
      setup.r(k) = loss.first;
      setup.c(k) = loss.second;
    }
    setup.x_dot_w = setup.attacked() * setup.feature_weights;
  }
  return setup;
}

// The delta-method prediction (header comment) of `rows` of this rank's shard, from H of all ranks.
VectorXd linearised_mse_at(const MatrixXd& H, const Model& model, const Dataset& train, double sigma,
                           const std::vector<Index>& rows) {
  const Index d = train.d();
  // ||[x, -I] H||_F^2 = ||x||^2 ||H_0||^2 - 2 x.(H_{1:} H_0) + ||H_{1:}||_F^2, H_0 = row 0 of H.
  const VectorXd h0 = H.row(0).transpose();
  const VectorXd cross = H.bottomRows(d) * h0;
  const double h0_norm2 = h0.squaredNorm(), rest_norm2 = H.bottomRows(d).squaredNorm();
  const VectorXd target = coded_targets(model, train);
  const VectorXd scores = detail::Design(train.X, true).times(model.weights).col(0);
  VectorXd prediction(static_cast<Index>(rows.size()));
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Index i = rows[k];
    const double r = detail::scalar_loss(model.kind, scores(i), target(i)).first;
    const double frobenius2 =
        std::max(0.0, train.X.row(i).squaredNorm() * h0_norm2 - 2.0 * train.X.row(i).dot(cross) + rest_norm2);
    prediction(static_cast<Index>(k)) = sigma * sigma * frobenius2 / (static_cast<double>(d) * r * r);
  }
  return prediction;
}

}  // namespace

std::uint64_t trial_seed(std::uint64_t seed, Index trial) {
  // The seed advanced by `trial + 1` golden-ratio steps, mixed.
  return splitmix64(seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(trial));
}

void GlmAttackOptions::validate() const {
  require_non_negative("sigma", sigma);
  // 1e15 (kMaxIterations): no run would finish more, and trials + kTrialsPerBlock - 1 wrapped at
  // 2^63 - 1 into a negative block count (an allocation failure; issue 50).
  require_in_range("trials", trials, 1, static_cast<long long>(kMaxIterations));
  require_in_interval("divisor_guard", divisor_guard, 0.0, End::kClosed, 1e-3, End::kClosed);
  for (Index i : rows) require_non_negative("rows", i);
  for (Index i : keep_reconstructions) require_non_negative("save_reconstructions", i);
}

GlmReconstruction glm_attack(const Model& released, const Dataset& train, const std::vector<Index>& rows) {
  check_attack_inputs(released, train, train.n());
  GlmReconstruction result;
  result.rows = checked_rows(rows, train.n(), "GLM attack");
  const detail::Design design(train.X, true);
  const MatrixXd w = released.weights;
  const MatrixXd r = loss_derivatives(released.kind, design.times(w), coded_targets(released, train));
  const VectorXd g = objective_gradients(design, r, w, static_cast<double>(train.n()) * released.l2).col(0);
  const auto m = static_cast<Index>(result.rows.size());
  result.x_hat.resize(m, train.d());
  result.divisor.resize(m);
  for (Index k = 0; k < m; ++k) {
    const Index i = result.rows[static_cast<std::size_t>(k)];
    result.divisor(k) = r(i, 0) - g(0);  // B_i[0]
    result.x_hat.row(k) = (r(i, 0) * train.X.row(i) - g.tail(train.d()).transpose()) / result.divisor(k);
  }
  return result;
}

VectorXd linearised_attack_mse(const Model& model, const Dataset& train, double sigma, const std::vector<Index>& rows,
                               const Communicator& comm) {
  check_attack_inputs(model, train, comm.sum(train.n()));
  const std::vector<Index> chosen = checked_rows(rows, train.n(), "linearised attack MSE");
  return linearised_mse_at(hessian(model, train, VectorXd(), comm), model, train, sigma, chosen);
}

namespace {

// The squared bias and tr J_mu / d of every attacked row from the trials' sums (header comment);
// NaN where a trial was guarded (the sums would miss it) or at sigma = 0.
void moment_estimates(const AttackSetup& setup, const BlockTotals& sum, const MatrixXd& error_sums,
                      GlmAttackResult& result) {
  const auto m = static_cast<Index>(setup.rows.size());
  const Index d = setup.train.d();
  const double dims = static_cast<double>(d), trials = static_cast<double>(setup.options.trials);
  result.squared_bias = result.squared_bias_standard_error = VectorXd::Constant(m, kNaN);
  result.jacobian_trace = result.jacobian_trace_standard_error = VectorXd::Constant(m, kNaN);
  if (!setup.estimate_moments) return;
  for (Index k = 0; k < m; ++k) {
    if (sum.guarded(k) > 0) continue;
    const VectorXd error_sum =
        setup.attacked().row(k).transpose() * sum.intercept_ratio_sum(k) - error_sums.row(k).transpose();
    const McEstimate bias = squared_norm_of_mean(error_sum, dims * sum.mse_sum(k), trials);
    result.squared_bias(k) = bias.value / dims;
    result.squared_bias_standard_error(k) = bias.standard_error / dims;
    // tr J_mu = E[s - s_lin] + E[s_lin], E[s_lin] = d; the control s_lin - d has mean 0.
    const McEstimate trace = control_variate_mean(sum.jacobian_trace[static_cast<std::size_t>(k)], 0.0);
    result.jacobian_trace(k) = (trace.value + dims) / dims;
    result.jacobian_trace_standard_error(k) = trace.standard_error / dims;
  }
}

// The entries of `rows` (indices into all ranks' examples, empty = all) that this rank's shard
// [offset, offset + n) holds, as indices into the shard, in the given order.
std::vector<Index> rows_of_shard(const std::vector<Index>& rows, Index offset, Index n) {
  std::vector<Index> local;
  if (rows.empty()) {
    local.resize(static_cast<std::size_t>(n));
    std::iota(local.begin(), local.end(), Index{0});
    return local;
  }
  for (Index i : rows)
    if (i >= offset && i < offset + n) local.push_back(i - offset);
  return local;
}

// At rank 0: the per-row values of every rank, in the order of `wanted` (global indices), from the
// ranks' (global index, value) lists gathered in rank order.
VectorXd in_order(const std::vector<Index>& wanted, const VectorXd& gathered_rows, const VectorXd& gathered_values,
                  Index columns) {
  std::unordered_map<Index, Index> position;
  for (Index k = 0; k < gathered_rows.size(); ++k) position[static_cast<Index>(gathered_rows(k))] = k;
  VectorXd ordered(static_cast<Index>(wanted.size()) * columns);
  for (std::size_t k = 0; k < wanted.size(); ++k)
    ordered.segment(static_cast<Index>(k) * columns, columns) =
        gathered_values.segment(position.at(wanted[k]) * columns, columns);
  return ordered;
}

VectorXd as_vector(const std::vector<Index>& values) {
  VectorXd v(static_cast<Index>(values.size()));
  for (std::size_t k = 0; k < values.size(); ++k) v(static_cast<Index>(k)) = static_cast<double>(values[k]);
  return v;
}

// The result of every rank's rows, at rank 0, in the order `options` asks for.
GlmAttackResult gather_result(const GlmAttackResult& mine, const GlmAttackOptions& options, Index offset, Index n_all,
                              const Communicator& comm) {
  GlmAttackResult all;
  all.trials = mine.trials;
  all.total_guarded = comm.sum(mine.total_guarded);
  all.examples_all_guarded = comm.sum(mine.examples_all_guarded);
  std::vector<Index> global_rows = mine.rows, global_kept = mine.reconstruction_rows;
  for (Index& i : global_rows) i += offset;
  for (Index& i : global_kept) i += offset;
  const Index d = mine.originals.cols();
  const VectorXd rows = comm.gather(as_vector(global_rows)), kept = comm.gather(as_vector(global_kept));
  const VectorXd mse = comm.gather(mine.mean_mse), linearised = comm.gather(mine.linearised_mse),
                 guarded = comm.gather(mine.guarded.cast<double>()), mse_error = comm.gather(mine.mse_standard_error),
                 bias = comm.gather(mine.squared_bias), bias_error = comm.gather(mine.squared_bias_standard_error),
                 trace = comm.gather(mine.jacobian_trace),
                 trace_error = comm.gather(mine.jacobian_trace_standard_error);
  const auto flat = [](const RowMatrix& m) { return VectorXd(Eigen::Map<const VectorXd>(m.data(), m.size())); };
  const VectorXd reconstructions = comm.gather(flat(mine.reconstructions)),
                 originals = comm.gather(flat(mine.originals));
  if (!comm.is_root()) return all;
  all.rows = options.rows;
  if (all.rows.empty()) {
    all.rows.resize(static_cast<std::size_t>(n_all));
    std::iota(all.rows.begin(), all.rows.end(), Index{0});
  }
  all.mean_mse = in_order(all.rows, rows, mse, 1);
  all.linearised_mse = in_order(all.rows, rows, linearised, 1);
  all.guarded = in_order(all.rows, rows, guarded, 1).cast<int>();
  all.mse_standard_error = in_order(all.rows, rows, mse_error, 1);
  all.squared_bias = in_order(all.rows, rows, bias, 1);
  all.squared_bias_standard_error = in_order(all.rows, rows, bias_error, 1);
  all.jacobian_trace = in_order(all.rows, rows, trace, 1);
  all.jacobian_trace_standard_error = in_order(all.rows, rows, trace_error, 1);
  all.reconstruction_rows = options.keep_reconstructions;
  const auto m = static_cast<Index>(all.reconstruction_rows.size());
  const VectorXd ordered_reconstructions = in_order(all.reconstruction_rows, kept, reconstructions, d);
  const VectorXd ordered_originals = in_order(all.reconstruction_rows, kept, originals, d);
  all.reconstructions = Eigen::Map<const RowMatrix>(ordered_reconstructions.data(), m, d);
  all.originals = Eigen::Map<const RowMatrix>(ordered_originals.data(), m, d);
  return all;
}

}  // namespace

GlmAttackResult evaluate_glm_attack(const Model& model, const Dataset& train, const GlmAttackOptions& options,
                                    const TrialProgress& progress, const Communicator& comm) {
  options.validate();
  check_attack_inputs(model, train, comm.sum(train.n()));
  const Index n_all = comm.sum(train.n()), offset = comm.exclusive_prefix_sum(train.n());
  checked_rows(options.rows, n_all, "rows");  // the whole lists, on every rank
  checked_rows(options.keep_reconstructions, n_all, "save_reconstructions");
  GlmAttackOptions local = options;
  if (comm.distributed()) {
    local.rows = rows_of_shard(options.rows, offset, train.n());
    local.keep_reconstructions = rows_of_shard(options.keep_reconstructions, offset, train.n());
    if (options.keep_reconstructions.empty()) local.keep_reconstructions.clear();
  }
  const AttackSetup setup = make_setup(model, train, local, n_all, comm);
  const auto m = static_cast<Index>(setup.rows.size());
  const auto kept = static_cast<Index>(setup.kept.size());

  BlockTotals sum = BlockTotals::zero(m, kept, train.d());
  MatrixXd error_sums = setup.estimate_moments ? MatrixXd::Zero(m, train.d()) : MatrixXd();  // sum_t g_{1:} / D_it

  const Index blocks = (options.trials + kTrialsPerBlock - 1) / kTrialsPerBlock;
  for (Index wave = 0; wave < blocks; wave += kBlocksPerWave) {
    const Index wave_blocks = std::min(kBlocksPerWave, blocks - wave);
    std::vector<BlockTotals> totals(static_cast<std::size_t>(wave_blocks));
    const auto block_gradients = [&](Index b) {
      const Index first = (wave + b) * kTrialsPerBlock;
      return data_gradients(setup, first, std::min(kTrialsPerBlock, options.trials - first));
    };
    if (!comm.distributed()) {  // one block at a time a thread: r of a block is n x 32
#pragma omp parallel for schedule(dynamic, 1)
      for (Index b = 0; b < wave_blocks; ++b) {
        BlockGradients block = block_gradients(b);
        finish_gradients(setup, block, comm);
        totals[static_cast<std::size_t>(b)] = block_totals(setup, block);
      }
    } else {  // the wave's gradients added over the ranks by the main thread between two parallel passes
      std::vector<BlockGradients> gradients(static_cast<std::size_t>(wave_blocks));
#pragma omp parallel for schedule(dynamic, 1)
      for (Index b = 0; b < wave_blocks; ++b) gradients[static_cast<std::size_t>(b)] = block_gradients(b);
      for (BlockGradients& block : gradients) finish_gradients(setup, block, comm);
#pragma omp parallel for schedule(dynamic, 1)
      for (Index b = 0; b < wave_blocks; ++b)
        totals[static_cast<std::size_t>(b)] = block_totals(setup, gradients[static_cast<std::size_t>(b)]);
    }
    for (const BlockTotals& block : totals) {
      sum.add(block);
      if (setup.estimate_moments) add_error_sums(block, error_sums);
    }
    if (progress) progress(std::min(options.trials, (wave + wave_blocks) * kTrialsPerBlock), options.trials);
  }

  GlmAttackResult result;
  result.rows = setup.rows;
  result.trials = options.trials;
  result.guarded = sum.guarded;
  const VectorXd valid = (options.trials - sum.guarded.array()).cast<double>();
  result.mean_mse = (valid.array() > 0).select(sum.mse_sum.array() / valid.array(), kNaN);
  result.mse_standard_error.resize(m);
  for (Index k = 0; k < m; ++k) {
    const double variance =
        (sum.mse_squared_sum(k) - valid(k) * result.mean_mse(k) * result.mean_mse(k)) / (valid(k) - 1);
    result.mse_standard_error(k) = valid(k) > 1 ? std::sqrt(std::max(0.0, variance) / valid(k)) : kNaN;
  }
  moment_estimates(setup, sum, error_sums, result);
  result.total_guarded = sum.guarded.cast<Index>().sum();
  result.examples_all_guarded = (valid.array() == 0).count();
  result.reconstruction_rows = setup.kept;
  result.reconstructions = RowMatrix::Constant(kept, train.d(), kNaN);
  result.originals.resize(kept, train.d());
  for (Index k = 0; k < kept; ++k) {
    result.originals.row(k) = train.X.row(setup.kept[static_cast<std::size_t>(k)]);
    if (sum.reconstruction_count(k) > 0)
      result.reconstructions.row(k) = sum.reconstruction_sum.row(k) / static_cast<double>(sum.reconstruction_count(k));
  }
  result.linearised_mse = linearised_mse_at(setup.hessian, model, train, options.sigma, setup.rows);
  if (!comm.distributed()) return result;
  return gather_result(result, options, offset, n_all, comm);
}

}  // namespace filkit
