// One run of dpsgd, prune or fim (public_data_model.hpp): its backend, its private steps, the
// conditional gradient model's training and the diagnostics.
#include "public_data/public_data_model.hpp"

#include <cmath>
#include <numeric>
#include <utility>

namespace filkit {

namespace {

double cosine(const VectorXd& a, const VectorXd& b) {
  const double denominator = a.norm() * b.norm();
  return denominator > 0.0 ? a.dot(b) / denominator : 0.0;
}

}  // namespace

PublicDataModel::PublicDataModel(const TrainedModel& model, const Dataset& public_part, const Dataset& private_part,
                                 const DpSgdOptions& phase, const GradientModelOptions& gradient_model,
                                 PrivateTrainingMethod method, VectorXd start, std::vector<bool> frozen, Index K,
                                 std::uint64_t run_seed, bool account_fil, bool keep_public_records,
                                 const Communicator& ranks, std::optional<TrainedGradientModel> first_gradient_model)
    : account_fil_(account_fil),
      keep_public_records_(keep_public_records),
      ranks_(ranks),
      model_(model),
      public_(public_part),
      private_(private_part),
      phase_(phase),
      gradient_model_(gradient_model),
      method_(method),
      start_(std::move(start)),
      frozen_(std::move(frozen)),
      private_first_row_(ranks.exclusive_prefix_sum(private_part.n())),
      private_rows_(ranks.sum(private_part.n())),
      first_gradient_model_(std::move(first_gradient_model)) {
  ReleasedGradientSpec spec;
  spec.plan = model.plan();
  spec.input_dim = private_part.d();
  spec.image = private_part.image;
  spec.num_classes = K;
  spec.intercept = model.intercept();
  for (Index i = 0; i < static_cast<Index>(frozen_.size()); ++i)
    if (!frozen_[static_cast<std::size_t>(i)]) spec.released.push_back(i);
  released_ = spec.released;
  const bool fim = method == PrivateTrainingMethod::kFim;
  spec.learned = fim && !gradient_model.is_constant();
  spec.gradient_model = gradient_model;
  spec.clip_norm = phase.clip_norm;
  spec.precision = phase.precision;
  backend_ = create_released_gradient_backend(spec);
  const std::uint64_t model_seed = splitmix64(run_seed ^ 0x6a09e667f3bcc908ULL);
  backend_->initialize(model_seed);
  if (fim && gradient_model.is_constant()) {
    constant_.emplace(gradient_model.kind, static_cast<Index>(released_.size()), gradient_model.hidden, model_seed,
                      gradient_model.state_precision);
    backend_->set_shift(constant_->perturbation());
  }
}

StepAccounting PublicDataModel::step(const VectorXd& w, const LocalBatch& local, std::uint64_t run_seed, Index t) {
  // On the ranks of one run, the members among this rank's shard of the private rows (maybe none).
  const std::vector<Index>& batch = local.rows;
  const Index members = static_cast<Index>(batch.size());
  StepAccounting out{VectorXd::Zero(parameter_count()), VectorXd(members), VectorXd::Constant(members, std::nan(""))};
  if (account_fil_ && fisher_term_sum_.size() == 0) fisher_term_sum_ = VectorXd::Zero(private_.n());
  if (local.batch_size == 0) return out;  // an empty Poisson batch: as one process, which skips the step
  const RowMatrix Xb = private_.select_rows(batch).X;
  VectorXd yb(members);
  for (Index b = 0; b < members; ++b) yb(b) = private_.y(batch[static_cast<std::size_t>(b)]);
  if (method_ == PrivateTrainingMethod::kFim) {
    if (constant_) {
      if (t == 1 && first_gradient_model_) {  // shared by the runs, trained once (shared_run_start)
        constant_->restore(first_gradient_model_->state);
        backend_->set_shift(constant_->perturbation());
        loss_.push_back(first_gradient_model_->loss);
      } else {
        train_constant_model(w, run_seed, t);
      }
      record_constant_diagnostics(w, batch, local.batch_size);
    } else {
      train_gradient_model(w, Xb, yb, run_seed, t, local.batch_size);
    }
  }
  if (members == 0) return out;
  NetworkBatchAccounting a;
  if (account_fil_) {
    NetworkAccountingRequest request;
    request.trace = *phase_.trace;
    request.probes = *phase_.probes;
    a = backend_->account_batch(w, Xb, yb, request, derive_seed(run_seed, t, 1), local.position, local.batch_size);
    add_fisher_terms(w, Xb, yb, local, a.trace, derive_seed(run_seed, t, 0));
  } else {  // the release alone (the same vectors, no Jacobian)
    a.clipped_sum = backend_->released(w, Xb, yb).colwise().sum().transpose();
    a.trace = VectorXd::Zero(Xb.rows());
    a.spectral = VectorXd::Constant(Xb.rows(), std::nan(""));
  }
  for (std::size_t j = 0; j < released_.size(); ++j)
    out.clipped_sum(released_[j]) = a.clipped_sum(static_cast<Index>(j));
  out.trace = std::move(a.trace);
  out.spectral = std::move(a.spectral);
  return out;
}

void PublicDataModel::add_fisher_terms(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb,
                                       const LocalBatch& local, const VectorXd& accounted, std::uint64_t seed) {
  VectorXd estimate;
  if (*phase_.trace == TraceMethod::kGaussian && *phase_.probes == kFisherTermProbes) {
    estimate = accounted;
  } else {
    NetworkAccountingRequest request;
    request.trace = TraceMethod::kGaussian;
    request.probes = kFisherTermProbes;
    estimate = backend_->account_batch(w, Xb, yb, request, seed, local.position, local.batch_size).trace;
  }
  for (std::size_t b = 0; b < local.rows.size(); ++b) {
    const double T = estimate(static_cast<Index>(b));
    fisher_term_sum_(local.rows[b]) += (std::isnan(T) ? 0.0 : T) + kFisherTermFloor;
  }
}

VectorXd PublicDataModel::fisher_term_sum_over_ranks() const { return ranks_.gather(fisher_term_sum_); }

VectorXd PublicDataModel::released_mean_public_gradient(const VectorXd& w) const {
  const RowShard shard = ranks_.shard(public_.n());  // every row on one process
  std::vector<Index> rows(static_cast<std::size_t>(shard.size()));
  std::iota(rows.begin(), rows.end(), shard.begin);
  VectorXd full = rows.empty() ? VectorXd::Zero(model_.parameter_count()) : model_.mean_gradient(public_, rows, w);
  if (ranks_.distributed()) {  // the shards' sums added, then the mean over every public row
    full *= static_cast<double>(shard.size());
    ranks_.sum(full);
    full /= static_cast<double>(public_.n());
  }
  VectorXd mean_public(static_cast<Index>(released_.size()));
  for (std::size_t j = 0; j < released_.size(); ++j) mean_public(static_cast<Index>(j)) = full(released_[j]);
  return mean_public;
}

void PublicDataModel::record_constant_diagnostics(const VectorXd& w, const std::vector<Index>& batch,
                                                  Index batch_size) {
  const VectorXd mean_public = released_mean_public_gradient(w);
  const VectorXd& c = constant_->perturbation();
  cosine_.push_back(cosine(c, mean_public));
  // The norms of M g_b and r_b summed over the members (this rank's), added over the ranks.
  Eigen::Vector2d sums = Eigen::Vector2d::Zero();
  if (!batch.empty()) {
    const MatrixXd base = model_.released_gradients(private_, batch, w, released_);
    const Dataset members = private_.select_rows(batch);
    const MatrixXd released = backend_->released(w, members.X, members.y);
    sums << base.rowwise().norm().sum(), released.rowwise().norm().sum();
  }
  ranks_.sum(sums);
  const double B = static_cast<double>(batch_size);
  norms_.push_back({sums(0) / B, c.norm(), sums(1) / B});
}

void PublicDataModel::train_gradient_model(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb,
                                           std::uint64_t run_seed, Index t, Index batch_size) {
  const GradientModelOptions& o = gradient_model_;
  const Index per_epoch =
      (public_.n() + o.batch_size - 1) / o.batch_size;  // the conditional model's batches are uniform
  const Index batches = o.steps_before(t) * (o.unit == ScheduleUnit::kEpochs ? per_epoch : 1);
  // Every rank trains phi alike on the whole public part (the same numbers everywhere).
  const GradientModelTraining trained = backend_->train(w, public_.X, public_.y, batches, derive_seed(run_seed, t, 2));
  loss_.push_back(trained.final_loss);
  const VectorXd mean_public = released_mean_public_gradient(w);
  double sum = 0.0;  // over the members (this rank's), added over the ranks
  if (Xb.rows() > 0) {
    const MatrixXd perturbation = backend_->perturbation(w, Xb, yb);
    for (Index b = 0; b < perturbation.rows(); ++b) sum += cosine(perturbation.row(b).transpose(), mean_public);
  }
  cosine_.push_back(ranks_.sum(sum) / static_cast<double>(batch_size));
}

}  // namespace filkit
