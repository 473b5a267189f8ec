// fim's constant gradient models trained on public batches before each private step
// (PublicDataModel::train_constant_model, public_data_model.hpp).
#include "public_data/public_data_model.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"

#include "base/splitmix_stream.hpp"
#include "dpsgd/optimizer_steps.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace filkit {

namespace {

/// The positions [first, last) in a batch's sorted `rows` of the members among `shard`'s rows.
std::pair<std::size_t, std::size_t> members_in(const std::vector<Index>& rows, const RowShard& shard) {
  const auto first = std::lower_bound(rows.begin(), rows.end(), shard.begin);
  const auto last = std::lower_bound(first, rows.end(), shard.end);
  return {static_cast<std::size_t>(first - rows.begin()), static_cast<std::size_t>(last - rows.begin())};
}

}  // namespace

PerturbationObjectiveValue objective_over_ranks(const PerturbationObjectiveValue& part, Index members, Index batch_rows,
                                                Index released, const Communicator& ranks) {
  if (!ranks.distributed()) return part;
  // Each rank's mean times its members is its members' sum; the sums added, then the batch's mean.
  VectorXd sums = VectorXd::Zero(released + 1);
  if (members > 0) {
    sums(0) = part.value * static_cast<double>(members);
    sums.tail(released) = part.gradient * static_cast<double>(members);
  }
  ranks.sum(sums);
  sums /= static_cast<double>(batch_rows);
  return {sums(0), sums.tail(released)};
}

void PublicDataModel::train_constant_model(const VectorXd& w, std::uint64_t run_seed, Index t) {
  const GradientModelOptions& o = gradient_model_;
  const Index n = public_.n(), B = std::min(o.batch_size, n), d = public_.d();
  const Index S = o.trace == GradientTrace::kProbes ? o.probes : 0;
  // This rank's public rows (all of them on one process): it computes each batch's objective over
  // its members among them, which are consecutive in the sorted batch (objective_over_ranks).
  const RowShard shard = ranks_.shard(n);
  const Index released = static_cast<Index>(released_.size());
  PerturbationObjectiveRequest request;  // its floor is the thesis' 1e-7
  request.lambda = o.lambda_before(t);
  request.snr = o.snr;
  request.precision = o.precision;
  std::mt19937_64 rng(derive_seed(run_seed, t, 2));
  std::vector<Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  constant_->restart();
  // Softmax regression: the objective in O(B p K) products (constant_perturbation.hpp), the same
  // numbers as the backend's (a test checks) at a fraction of the cost.
  std::optional<SoftmaxRelease> closed_form;
  if (model_.is_glm())
    closed_form.emplace(Eigen::Map<const MatrixXd>(w.data(), model_.p(), w.size() / model_.p()), model_.intercept(),
                        frozen_, phase_.clip_norm);
  // ProbeDraws::kStep: each public example's probes drawn once for this step, from its own stream;
  // on a network its gradient and probe products at w computed once (w is fixed until the step).
  // With lambda 0 (figure 3.2's first point, or a decay down to 0) the Fisher term weighs nothing
  // and the objective is ||c||^2 on every batch, exactly: neither probes nor gradients are made
  // (the other random streams are drawn from their own seeds, so nothing else changes).
  const bool fisher_term = request.lambda != 0.0;
  const bool per_step = fisher_term && S > 0 && o.probe_draws == ProbeDraws::kStep;
  RowMatrix step_probes;
  PerturbationObjectiveTerms step_terms;
  // The shard's public examples (a copy on several ranks only: on one process, public_ itself).
  RowMatrix shard_X;
  VectorXd shard_y;
  if (ranks_.distributed()) {
    shard_X = public_.X.middleRows(shard.begin, shard.size());
    shard_y = public_.y.segment(shard.begin, shard.size());
  }
  const RowMatrix& X_of_shard = ranks_.distributed() ? shard_X : public_.X;
  const VectorXd& y_of_shard = ranks_.distributed() ? shard_y : public_.y;
  if (per_step) {  // the shard's rows' probes (row (r - shard.begin) S + s: public row r's s-th)
    step_probes = gaussian_probes(shard.size(), S, d, derive_seed(run_seed, t, 4), shard.begin);
    if (!closed_form && shard.size() > 0)
      step_terms = backend_->perturbation_objective_terms(w, X_of_shard, y_of_shard, step_probes, o.precision);
  }
  // A network with the thesis' per-batch probes over epochs: every public example is in exactly
  // one batch an epoch and its terms do not depend on c, so an epoch's terms are computed before
  // its batches, from the records of the public examples kept for the whole step (each epoch
  // then costs only the probes' products), and each batch's objective follows from them.
  // (Decided alike on every rank; a rank with no public rows keeps no records.)
  const bool from_cache =
      keep_public_records_ && fisher_term && S > 0 && !per_step && !closed_form && o.unit == ScheduleUnit::kEpochs;
  std::unique_ptr<PerturbationObjectiveTermCache> epoch_cache;
  if (from_cache && shard.size() > 0)
    epoch_cache = backend_->perturbation_objective_term_cache(w, X_of_shard, y_of_shard, o.precision);
  RowMatrix epoch_probes, epoch_products;
  Index batch_count = 0;
  // The key of the next batch's probes (its position r draws from stream key + r).
  auto next_batch_key = [&] {
    return derive_seed(run_seed, t, 3) ^ splitmix64(static_cast<std::uint64_t>(batch_count++));
  };
  double last_value = std::nan("");
  // The batch's objective from this rank's part of it (positions first.. of the sorted batch), added
  // over the ranks; then the update, the same on every rank.
  auto update_from = [&](const PerturbationObjectiveValue& part, Index members, Index batch_rows) {
    const PerturbationObjectiveValue value = objective_over_ranks(part, members, batch_rows, released, ranks_);
    apply_constant_update(value, t);
    last_value = value.value;
  };
  // Rows of the shard, counted from its first (the per-step terms' and the cache's rows).
  auto in_shard = [&](std::vector<Index> rows) {
    for (Index& row : rows) row -= shard.begin;
    return rows;
  };
  auto train_on = [&](std::vector<Index> batch) {
    std::sort(batch.begin(), batch.end());
    if (!fisher_term) {
      const VectorXd& c = constant_->perturbation();
      const PerturbationObjectiveValue value{c.squaredNorm(), 2.0 * c};
      apply_constant_update(value, t);
      last_value = value.value;
      return;
    }
    const auto [first, last] = members_in(batch, shard);
    const std::vector<Index> rows(batch.begin() + static_cast<std::ptrdiff_t>(first),
                                  batch.begin() + static_cast<std::ptrdiff_t>(last));
    const Index b_rows = static_cast<Index>(rows.size()), batch_rows = static_cast<Index>(batch.size());
    PerturbationObjectiveValue value;
    if (per_step && !closed_form) {
      if (b_rows > 0)
        value = perturbation_objective_from_terms(step_terms.gradients, step_terms.probe_products, in_shard(rows),
                                                  constant_->perturbation(), phase_.clip_norm, request.lambda,
                                                  request.snr, request.floor);
      update_from(value, b_rows, batch_rows);
      return;
    }
    const std::uint64_t key = next_batch_key();
    const auto position = static_cast<Index>(first);  // of this rank's first member in the batch
    if (b_rows == 0) {
      // No member here: this rank adds nothing to the batch's sums.
    } else if (closed_form && S > 0) {
      // The batch's rows gathered and its probes made (drawn, or this step's copied) block by
      // block inside the objective, where they are used: its B d pixels and B S d probes are
      // never written to memory and read back (the same values as the gathering below).
      const SoftmaxRelease::ProbeSource source = [&](Index first, Index count, double* out) {
        if (!per_step) {
          fill_gaussian_probes(key, position + first, count, S, d, out);
          return;
        }
        for (Index b = first; b < first + count; ++b)
          Eigen::Map<RowMatrix>(out + (b - first) * S * d, S, d) =
              step_probes.middleRows((rows[static_cast<std::size_t>(b)] - shard.begin) * S, S);
      };
      value = closed_form->objective(public_.X, public_.y, rows, constant_->perturbation(), S, source, request.lambda,
                                     request.snr, request.floor);
    } else {
      // A network's batch (probes drawn each batch: its per-step terms are used above), or the
      // closed form's exact trace. The rows gathered directly: select_rows would re-validate
      // every value of checked data (8 % of the training's time at the thesis' table 3.1 shape).
      RowMatrix Xb(b_rows, d);
      VectorXd yb(b_rows);
#pragma omp parallel for schedule(static)
      for (Index b = 0; b < b_rows; ++b) {
        Xb.row(b) = public_.X.row(rows[static_cast<std::size_t>(b)]);
        yb(b) = public_.y(rows[static_cast<std::size_t>(b)]);
      }
      const RowMatrix probes = gaussian_probes(b_rows, S, d, key, position);
      value = closed_form ? closed_form_objective(*closed_form, Xb, yb, probes, request)
                          : backend_->perturbation_objective(w, Xb, yb, constant_->perturbation(), probes, request);
    }
    update_from(value, b_rows, batch_rows);
  };
  // An epoch from the cache: its batches (rows sorted, as train_on sorts them) and their probes
  // drawn as train_on draws them, batch by batch (position r of a batch from stream key + r), then
  // every example's products at once, then the batches' objectives and updates in order.
  // On the ranks, each rank does this for its shard's rows (its members of each batch).
  auto train_epoch_from_cache = [&](std::vector<std::vector<Index>> batches) {
    std::vector<std::uint64_t> keys;
    std::vector<std::pair<std::size_t, std::size_t>> members;
    for (std::vector<Index>& rows : batches) {
      std::sort(rows.begin(), rows.end());
      keys.push_back(next_batch_key());
      members.push_back(members_in(rows, shard));
    }
    epoch_probes.resize(shard.size() * S, d);
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const std::vector<Index>& rows = batches[k];
      const auto first = static_cast<Index>(members[k].first), last = static_cast<Index>(members[k].second);
#pragma omp parallel for schedule(static)
      for (Index r = first; r < last; ++r)
        fill_gaussian_probes(keys[k], r, 1, S, d,
                             epoch_probes.row((rows[static_cast<std::size_t>(r)] - shard.begin) * S).data());
    }
    if (epoch_cache) epoch_cache->probe_products(epoch_probes, epoch_products);
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const std::vector<Index>& batch = batches[k];
      const std::vector<Index> rows(batch.begin() + static_cast<std::ptrdiff_t>(members[k].first),
                                    batch.begin() + static_cast<std::ptrdiff_t>(members[k].second));
      PerturbationObjectiveValue value;
      if (!rows.empty())
        value = perturbation_objective_from_terms(epoch_cache->gradients(), epoch_products, in_shard(rows),
                                                  constant_->perturbation(), phase_.clip_norm, request.lambda,
                                                  request.snr, request.floor);
      update_from(value, static_cast<Index>(rows.size()), static_cast<Index>(batch.size()));
    }
  };
  // An epoch's batches: a full Fisher-Yates permutation cut into batches of B, the last short.
  auto epoch_batches = [&] {
    detail::shuffle_batch_to_front(order, n, rng);
    std::vector<std::vector<Index>> batches;
    for (Index first = 0; first < n; first += B)
      batches.emplace_back(order.begin() + first, order.begin() + std::min(n, first + B));
    return batches;
  };
  const Index amount = o.steps_before(t);
  for (Index round = 0; round < amount; ++round) {
    if (from_cache) {
      train_epoch_from_cache(epoch_batches());
    } else if (o.unit == ScheduleUnit::kEpochs) {
      for (std::vector<Index>& rows : epoch_batches()) train_on(std::move(rows));
    } else {
      detail::shuffle_batch_to_front(order, B, rng);
      train_on(std::vector<Index>(order.begin(), order.begin() + B));
    }
  }
  backend_->set_shift(constant_->perturbation());
  loss_.push_back(last_value);
}

TrainedGradientModel PublicDataModel::train_first_gradient_model(std::uint64_t run_seed) {
  if (!constant_) throw std::logic_error("train_first_gradient_model: fim with a constant gradient model only");
  // Step 1's parameters: the start, in float32 rounded as the trainer rounds it.
  VectorXd w = start_;
  if (phase_.precision == Precision::kFloat32) detail::round_to_float(w);
  train_constant_model(w, run_seed, 1);
  TrainedGradientModel trained{constant_->state(), loss_.back()};
  loss_.pop_back();
  return trained;
}

TrainedGradientModel first_gradient_model(const TrainedModel& model, const Dataset& public_part,
                                          const Dataset& private_part, const DpSgdOptions& phase,
                                          const GradientModelOptions& gradient_model, const RunStart& start,
                                          std::uint64_t run_seed, bool keep_public_records) {
  PublicDataModel run(model, public_part, private_part, phase, gradient_model, PrivateTrainingMethod::kFim,
                      start.parameters, start.frozen, model.num_classes(), run_seed, false, keep_public_records);
  return run.train_first_gradient_model(run_seed);
}

RowMatrix PublicDataModel::gaussian_probes(Index rows, Index S, Index d, std::uint64_t key, Index first) {
  RowMatrix probes(rows * S, d);
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) fill_gaussian_probes(key, first + r, 1, S, d, probes.row(r * S).data());
  return probes;
}

void PublicDataModel::fill_gaussian_probes(std::uint64_t key, Index first, Index count, Index S, Index d, double* out) {
  for (Index r = first; r < first + count; ++r)
    SplitMixStream(splitmix64(key + static_cast<std::uint64_t>(r))).normals(out + (r - first) * S * d, S * d);
}

void PublicDataModel::apply_constant_update(const PerturbationObjectiveValue& value, Index t) {
  if (!std::isfinite(value.value) || !value.gradient.allFinite())
    throw NumericalError("the constant gradient model's objective is not finite before private step " +
                         std::to_string(t) + ": lower " + option_name("lambda") + " or " +
                         option_name("gradient_step_size"));
  constant_->update_from_perturbation_gradient(value.gradient, gradient_model_.step_size, gradient_model_.weight_decay);
}

PerturbationObjectiveValue PublicDataModel::closed_form_objective(const SoftmaxRelease& release, const RowMatrix& X,
                                                                  const VectorXd& y, const RowMatrix& probes,
                                                                  const PerturbationObjectiveRequest& request) const {
  return release.objective(X, y, constant_->perturbation(), probes, request.lambda, request.snr, request.floor);
}

}  // namespace filkit
