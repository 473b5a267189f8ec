// Private training with public data (public_data_training.hpp; docs/mathematics.md, section 11):
// the split, magnitude freezing, non-private pre-training, and the private phase of every method,
// whose dpsgd, prune and fim runs go through train_dpsgd's trainer and accountant with a model
// (PublicDataModel) built per run: its pre-trained start, its frozen coordinates and, for fim, its
// gradient model, trained on public batches before each private step.
#include "filkit/public_data/public_data_training.hpp"

#include "filkit/base/checks.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/base/timing.hpp"

#include "base/seeding.hpp"
#include "base/splitmix_stream.hpp"
#include "networks/network_plugin.hpp"
#include "dpsgd/optimizer_steps.hpp"
#include "dpsgd/trainable_models.hpp"

#include "filkit/public_data/constant_gradient_model.hpp"
#include "filkit/public_data/constant_perturbation.hpp"
#include "filkit/networks/networks.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>

namespace filkit {

PublicPrivateSplit split_public_private(const Dataset& data, double public_fraction, std::uint64_t seed,
                                        PublicSplit which) {
  require_in_interval("public_fraction", public_fraction, 0.0, End::kOpen, 1.0, End::kOpen);
  PublicPrivateSplit split;
  if (which == PublicSplit::kFirst) {  // as many rows as the shuffle takes, from the top
    const Index n_public = held_out_count(data.n(), public_fraction);
    for (Index i = 0; i < data.n(); ++i) (i < n_public ? split.public_rows : split.private_rows).push_back(i);
  } else {  // shuffle_split's parts come sorted
    TrainTestIndices indices = shuffle_split(data.n(), public_fraction, seed);
    split.public_rows = std::move(indices.test);
    split.private_rows = std::move(indices.train);
  }
  if (split.public_rows.empty() || split.private_rows.empty())
    option_error("public_fraction", format_double(public_fraction),
                 "of " + std::to_string(data.n()) + " examples, leaves the " +
                     (split.public_rows.empty() ? "public" : "private") +
                     " part empty: use more data or a fraction nearer 0.5");
  split.public_part = data.select_rows(split.public_rows);
  split.private_part = data.select_rows(split.private_rows);
  return split;
}

std::vector<bool> smallest_magnitude_mask(const VectorXd& w, double freeze_fraction, const std::vector<bool>& fixed) {
  require_in_interval("freeze_fraction", freeze_fraction, 0.0, End::kClosed, 1.0, End::kOpen);
  if (!fixed.empty() && static_cast<Index>(fixed.size()) != w.size())
    throw std::invalid_argument("smallest_magnitude_mask: " + std::to_string(fixed.size()) + " fixed flags for " +
                                std::to_string(w.size()) + " coordinates");
  const auto is_fixed = [&](Index i) { return !fixed.empty() && fixed[static_cast<std::size_t>(i)]; };
  std::vector<Index> order;
  for (Index i = 0; i < w.size(); ++i)
    if (!is_fixed(i)) order.push_back(i);
  const Index frozen = std::llround(freeze_fraction * static_cast<double>(order.size()));
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return std::abs(w(a)) < std::abs(w(b)); });
  std::vector<bool> mask(static_cast<std::size_t>(w.size()), false);
  for (Index i = 0; i < w.size(); ++i) mask[static_cast<std::size_t>(i)] = is_fixed(i);
  for (Index k = 0; k < frozen; ++k) mask[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = true;
  return mask;
}

Index GradientModelOptions::steps_before(Index t) const {
  const Index decayed = steps - (t - 1) * decay;
  return std::max(std::min(min_steps, steps), decayed);
}

double GradientModelOptions::lambda_before(Index t) const {
  return std::max(lambda_min, lambda - lambda_decay * static_cast<double>(t - 1));
}

void GradientModelOptions::validate() const {
  require_non_negative("lambda", lambda);
  require_non_negative("lambda_decay", lambda_decay);
  if (!(lambda_min >= 0.0 && lambda_min <= lambda))
    option_error("lambda_min", format_double(lambda_min),
                 "must lie in [0, " + option_name("lambda") + " = " + format_double(lambda) + "]");
  if (lambda_decay > 0.0 && kind == GradientModelKind::kConditional)
    option_error("lambda_decay", format_double(lambda_decay),
                 "only the constant gradient models decay lambda (" + option_name("gradient_model") + " = conditional)");
  if (kind != GradientModelKind::kConditional && objective != GradientObjective::kPerturbation)
    option_error("objective", "gradient",
                 "the " + to_string(kind) + " gradient model is a perturbation added to the gradient; use " +
                     option_name("gradient_model") + " = conditional for the gradient objective");
  if (hidden.empty()) option_error("gradient_hidden", "the gradient model needs at least one hidden layer");
  for (Index width : hidden) require_positive("gradient_hidden", width);
  if (kind == GradientModelKind::kConstant && hidden.size() < 2)
    option_error("gradient_hidden", "the constant gradient model needs at least two widths (its last normalisation "
                                    "stands before the last hidden layer, whose input is that width)");
  require_non_negative("gradient_steps", steps);
  require_non_negative("gradient_decay", decay);
  require_non_negative("gradient_min_steps", min_steps);
  require_positive("gradient_batch_size", batch_size);
  require_positive("gradient_step_size", step_size);
  require_non_negative("gradient_weight_decay", weight_decay);
  require_positive("gradient_probes", probes);
  if (state_precision == GradientPrecision::kFloat32 && kind == GradientModelKind::kConditional)
    option_error("gradient_state_precision", "float32",
                 "applies to the constant gradient models (" + option_name("gradient_model") +
                     " = constant or vector); the conditional model trains in float64");
  if (probe_draws == ProbeDraws::kStep && (kind == GradientModelKind::kConditional || trace != GradientTrace::kProbes))
    option_error("gradient_probe_draws", "step",
                 "draws the probes of the constant models' probe estimate (" + option_name("gradient_model") +
                     " = constant or vector, " + option_name("gradient_trace") + " = probes)");
}

void PlainTrainingOptions::validate(const std::string& name) const {
  require_non_negative(name + "_steps", steps);
  require_positive(name + "_batch_size", batch_size);
  require_positive(name + "_step_size", step_size);
  require_non_negative(name + "_weight_decay", weight_decay);
  if (sampling == BatchSampling::kPoisson)
    option_error(name + "_sampling", "poisson", "is not offered for training without privacy: use uniform or shuffle");
}

void PublicDataTrainingOptions::validate() const {
  require_in_interval("public_fraction", public_fraction, 0.0, End::kOpen, 1.0, End::kOpen);
  require_in_interval("freeze_fraction", freeze_fraction, 0.0, End::kClosed, 1.0, End::kOpen);
  if (methods.empty()) option_error("methods", "name at least one of sgd, dpsgd, prune, fim");
  pretrain.validate("pretrain");
  gradient_model.validate();
  private_phase.validate();
  if (!private_phase.network && private_phase.kind != ModelKind::kSoftmax)
    option_error("model", to_string(private_phase.kind),
                 "private training with public data trains softmax regression (any K >= 2) or a network");
  if (reference_logit && private_phase.network)
    option_error("reference_logit", "holds softmax regression's last logit at 0; a network's last layer has no such "
                                    "option (use " + option_name("model") + " = softmax)");
  if (gradient_model.precision == GradientPrecision::kFloat32 &&
      (!private_phase.network || gradient_model.kind == GradientModelKind::kConditional))
    option_error("gradient_precision", "float32",
                 private_phase.network ? "applies to the constant gradient models (" + option_name("gradient_model") +
                                             " = constant or vector); the conditional model trains in float64"
                                       : "applies to networks; softmax regression's objective is a closed form "
                                         "computed in float64 (use " + option_name("model") + " = a network, or float64)");
  if (private_phase.label != LabelPrivacy::kPublic)
    option_error("label", "private", "the released gradient's Jacobian is taken about the pixels only (labels "
                                     "public, as in the thesis)");
  if (private_phase.trace && *private_phase.trace == TraceMethod::kCoordinates)
    option_error("trace", "coordinates", "use gaussian or exact for private training with public data");
  if (private_phase.spectral && *private_phase.spectral != SpectralMethod::kNone)
    option_error("spectral", to_string(*private_phase.spectral),
                 "not available for private training with public data (eta is not reported); use none");
  if (!private_phase.checkpoint_path.empty()) {  // DpSgdOptions::validate: stop_after needs it
    if (methods.size() != 1 || methods.front() == PrivateTrainingMethod::kSgd)
      option_error("checkpoint", private_phase.checkpoint_path,
                   "resumes one method at a time, one of dpsgd, prune or fim in " + option_name("methods") +
                       " (experiments/fim_tables.py runs each method as its own job)");
    if (methods.front() == PrivateTrainingMethod::kFim && gradient_model.kind == GradientModelKind::kConditional)
      option_error("checkpoint", private_phase.checkpoint_path,
                   "the conditional gradient model's state lives in LibTorch and is not in the resume file; use " +
                       option_name("gradient_model") + " = constant or vector, or no checkpoint");
  }
}

DpSgdOptions resolved_private_phase(const PublicDataTrainingOptions& options, Index n_private) {
  DpSgdOptions o = options.private_phase;
  o.kind = ModelKind::kSoftmax;
  if (!o.trace) o.trace = TraceMethod::kGaussian;
  if (!o.probes) o.probes = kThesisProbes;
  o.spectral = SpectralMethod::kNone;
  return o.resolved(n_private);
}

const MethodResult* PublicDataTrainingResult::find(PrivateTrainingMethod method) const {
  for (const MethodResult& m : methods)
    if (m.method == method) return &m;
  return nullptr;
}

namespace {

Model softmax_model(const VectorXd& w, Index p, Index K, bool intercept, Index n) {
  Model m;
  m.kind = ModelKind::kSoftmax;
  m.intercept = intercept;
  m.n_train = n;
  m.num_classes = K;
  m.weights = Eigen::Map<const MatrixXd>(w.data(), p, K);
  return m;
}

/// The rows of X (with a leading 1 for the intercept).
MatrixXd design(const Dataset& data, const std::vector<Index>& rows, bool intercept) {
  const Index n = static_cast<Index>(rows.size()), d = data.d(), first = intercept ? 1 : 0;
  MatrixXd Xt(n, d + first);
  if (intercept) Xt.col(0).setOnes();
  // Row-major X into the column-major design, 64 rows at a time: each pixel's 64 values are
  // written together, from 64 rows that stay in L1. Copying a whole row at a time wrote its 784
  // values to 784 columns, 5 ns a value (a third of the time of a fim step without public batches).
  constexpr Index kRows = 64;
  for (Index r0 = 0; r0 < n; r0 += kRows) {
    const Index count = std::min(kRows, n - r0);
    for (Index j = 0; j < d; ++j)
      for (Index i = 0; i < count; ++i) Xt(r0 + i, first + j) = data.X(rows[static_cast<std::size_t>(r0 + i)], j);
  }
  return Xt;
}

/// The mean cross-entropy gradient over `rows` at W (p x K), as a vector in the GLM's order.
VectorXd mean_gradient(const Dataset& data, const std::vector<Index>& rows, const MatrixXd& W, bool intercept) {
  // In pieces of 4,096 rows: the design of all of table 3.1's 30,000 public examples (fim's cosine
  // diagnostic, every private step) would be 188 MB at once; a batch is one piece.
  constexpr std::size_t kPiece = 4096;
  MatrixXd G = MatrixXd::Zero(W.rows(), W.cols());
  for (std::size_t start = 0; start < rows.size(); start += kPiece) {
    const std::vector<Index> piece(rows.begin() + static_cast<std::ptrdiff_t>(start),
                                   rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + kPiece)));
    MatrixXd Xt = design(data, piece, intercept);
    MatrixXd R = Xt * W;  // logits, then residuals softmax - onehot
    for (Index i = 0; i < R.rows(); ++i) {
      R.row(i).array() -= R.row(i).maxCoeff();
      R.row(i) = R.row(i).array().exp().matrix();
      R.row(i) /= R.row(i).sum();
      R(i, static_cast<Index>(data.y(piece[static_cast<std::size_t>(i)]))) -= 1.0;
    }
    G.noalias() += Xt.transpose() * R;
  }
  G /= static_cast<double>(rows.size());
  return Eigen::Map<const VectorXd>(G.data(), G.size());
}

/// The model trained: softmax regression (gradients and accuracy in closed form) or a network
/// (through LibTorch, networks.hpp). Either way the released-gradient backend differentiates its
/// plan (network_layers.hpp: softmax regression is the softmax plan, in the GLM's order).
class TrainedModel {
 public:
  TrainedModel(const Dataset& like, const DpSgdOptions& phase, Index K)
      : K_(K), intercept_(!phase.network && phase.intercept), init_scale_(phase.init_scale) {
    if (phase.network) {
      network_.emplace(*phase.network, like.d(), K, like.image);
      plan_ = network_->plan();
    } else {
      NetworkOptions softmax;
      softmax.architecture = NetworkArchitecture::kSoftmax;
      softmax.intercept = intercept_;
      plan_ = plan_network(builtin_network_layers(softmax, K), {like.d() + (intercept_ ? 1 : 0)}, K);
    }
  }
  Index parameter_count() const { return plan_.parameter_count; }
  const NetworkPlan& plan() const { return plan_; }
  bool intercept() const { return intercept_; }
  bool is_glm() const { return !network_; }
  Index p() const { return plan_.parameter_count / K_; }  // softmax: rows of W

  Model glm(const VectorXd& w, Index n) const { return softmax_model(w, p(), K_, intercept_, n); }

  VectorXd initial_parameters(std::mt19937_64& rng) const {
    if (network_) return network_->initial_parameters(rng);
    VectorXd w = VectorXd::Zero(parameter_count());
    if (init_scale_ > 0.0) {
      std::normal_distribution<double> unit_normal;
      for (Index i = 0; i < w.size(); ++i) w(i) = init_scale_ * unit_normal(rng);
    }
    return w;
  }

  /// Softmax with reference_logit: the last class's weights (W's last column), held at zero.
  /// Otherwise empty: nothing fixed.
  std::vector<bool> fixed_coordinates(bool reference_logit) const {
    if (!reference_logit) return {};
    std::vector<bool> fixed(static_cast<std::size_t>(parameter_count()), false);
    for (Index i = (K_ - 1) * p(); i < parameter_count(); ++i) fixed[static_cast<std::size_t>(i)] = true;
    return fixed;
  }

  /// The mean cross-entropy gradient over `rows` of `data` at w. A network's per-example gradients
  /// are summed a chunk of rows at a time: all the public rows at once (the cosine diagnostic)
  /// would be a rows x p matrix, 11 GB for 2,500 CIFAR-10 images and its ConvNet's 550,570.
  VectorXd mean_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w) const {
    if (!network_) return filkit::mean_gradient(data, rows, Eigen::Map<const MatrixXd>(w.data(), p(), K_), intercept_);
    VectorXd sum = VectorXd::Zero(parameter_count());
    for_each_chunk(rows, [&](const std::vector<Index>& piece, Index) {
      const Dataset batch = data.select_rows(piece);
      sum += network_->gradients(w, batch.X, batch.y).colwise().sum().transpose();
    });
    return sum / static_cast<double>(rows.size());
  }

  /// The rows a network differentiates at once (its chunk).
  Index rows_at_once() const { return network_ ? network_->options().chunk : 0; }

  double accuracy(const VectorXd& w, const Dataset& data) const {
    return network_ ? network_->accuracy(w, data.X, data.y) : filkit::accuracy(glm(w, data.n()), data);
  }

  /// Calls visit(piece, first) for consecutive pieces of `rows` of at most the network's chunk,
  /// `first` the position of the piece's first row in `rows`.
  template <class Visit>
  void for_each_chunk(const std::vector<Index>& rows, Visit&& visit) const {
    const auto chunk = static_cast<std::size_t>(network_->options().chunk);
    for (std::size_t start = 0; start < rows.size(); start += chunk) {
      const auto end = rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + chunk));
      visit(std::vector<Index>(rows.begin() + static_cast<std::ptrdiff_t>(start), end), static_cast<Index>(start));
    }
  }

  /// The per-example cross-entropy gradients of `rows` at w restricted to `released` (B x m).
  MatrixXd released_gradients(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                              const std::vector<Index>& released) const {
    const Index B = static_cast<Index>(rows.size()), m = static_cast<Index>(released.size());
    MatrixXd out(B, m);
    if (network_) {  // a chunk of rows at a time, as mean_gradient
      for_each_chunk(rows, [&](const std::vector<Index>& piece, Index first) {
        const Dataset batch = data.select_rows(piece);
        const MatrixXd G = network_->gradients(w, batch.X, batch.y);
        for (Index j = 0; j < m; ++j)
          out.block(first, j, G.rows(), 1) = G.col(released[static_cast<std::size_t>(j)]);
      });
      return out;
    }
    const MatrixXd Xt = design(data, rows, intercept_);
    const Eigen::Map<const MatrixXd> W(w.data(), p(), K_);
    for (Index b = 0; b < B; ++b) {
      VectorXd e = (Xt.row(b) * W).transpose();
      e.array() -= e.maxCoeff();
      e = e.array().exp().matrix();
      e /= e.sum();
      e(static_cast<Index>(data.y(rows[static_cast<std::size_t>(b)]))) -= 1.0;
      for (Index j = 0; j < m; ++j) {  // coordinate k p + i is x~_i e_k
        const Index coordinate = released[static_cast<std::size_t>(j)];
        out(b, j) = Xt(b, coordinate % p()) * e(coordinate / p());
      }
    }
    return out;
  }

 private:
  Index K_;
  bool intercept_;
  double init_scale_;
  std::optional<Network> network_;
  NetworkPlan plan_;
};

/// Pre-training's optimizer: Adam with its usual moment decays and epsilon (the thesis' jax
/// optimizers.adam), its bias corrections offset as the private phase's (the thesis' code calls
/// both alike); the step size is PlainTrainingOptions'.
DpSgdOptions pretraining_optimizer(const DpSgdOptions& private_phase) {
  DpSgdOptions adam;
  adam.optimizer = Optimizer::kAdam;
  adam.adam_bias_correction_offset = private_phase.adam_bias_correction_offset;
  return adam;
}

/// Non-private minibatch training on the mean cross-entropy (plus weight decay times w), from w, by
/// `optimizer` (its optimizer, momentum, Adam settings; o's step size). `fixed` (empty, or one flag
/// per coordinate): coordinates that keep their value (zero gradient).
VectorXd train_without_privacy(const TrainedModel& model, const Dataset& data, VectorXd w,
                               const PlainTrainingOptions& o, DpSgdOptions optimizer, std::uint64_t seed,
                               const std::vector<bool>& fixed) {
  if (o.steps == 0) return w;
  const Index n = data.n(), B = std::min(o.batch_size, n);
  std::mt19937_64 rng(seed);
  std::vector<Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  VectorXd m = VectorXd::Zero(w.size()), v = VectorXd::Zero(w.size());
  Index adam_steps = 0;
  optimizer.step_size = o.step_size;
  for (Index t = 1; t <= o.steps; ++t) {
    std::vector<Index> batch;
    if (o.sampling == BatchSampling::kShuffle) {
      batch = detail::epoch_batch(order, B, t, rng);
    } else {
      detail::shuffle_batch_to_front(order, B, rng);
      batch.assign(order.begin(), order.begin() + B);
    }
    VectorXd g = model.mean_gradient(data, batch, w) + o.weight_decay * w;
    for (Index i = 0; i < static_cast<Index>(fixed.size()); ++i)
      if (fixed[static_cast<std::size_t>(i)]) g(i) = 0.0;  // Adam then leaves them where they are
    detail::optimizer_step(optimizer, w, g, m, v, adam_steps);
  }
  if (!w.allFinite())
    throw std::runtime_error("training without privacy diverged: lower its step size (now " +
                             format_double(o.step_size) + ")");
  return w;
}

/// A resume file's list of `size` numbers at state[field] (NaN admitted where `nan`), or the
/// std::runtime_error naming the field.
/// Whether a saved list may hold negative numbers: sums of squares and norms may not (a resume file
/// with a valid CRC and a negative Fisher-term sum was taken; issue 50).
enum class Sign { kAny, kNonNegative };

VectorXd saved_numbers(const nlohmann::json& state, const std::string& name, Index size, bool nan,
                       const std::string& parent = "", Sign sign = Sign::kAny) {
  const std::string field = parent.empty() ? name : parent + "." + name;
  const auto found = state.find(name);
  if (found == state.end() || !found->is_array() || static_cast<Index>(found->size()) != size)
    throw std::runtime_error("'" + field + "' is missing or is not a list of " + std::to_string(size) + " numbers");
  VectorXd values(size);
  for (Index i = 0; i < size; ++i) {
    const nlohmann::json& value = (*found)[static_cast<std::size_t>(i)];
    if (!value.is_number()) throw std::runtime_error("'" + field + "[" + std::to_string(i) + "]' is not a number");
    values(i) = value.get<double>();
    if (std::isinf(values(i)) || (std::isnan(values(i)) && !nan))
      throw std::runtime_error("'" + field + "[" + std::to_string(i) + "]' is " + format_double(values(i)) +
                               ", expected a finite number");
    if (sign == Sign::kNonNegative && values(i) < 0)
      throw std::runtime_error("'" + field + "[" + std::to_string(i) + "]' is " + format_double(values(i)) +
                               ", expected a number >= 0 (a sum of squares or a norm)");
  }
  return values;
}

std::vector<double> as_list(const VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

double cosine(const VectorXd& a, const VectorXd& b) {
  const double denominator = a.norm() * b.norm();
  return denominator > 0.0 ? a.dot(b) / denominator : 0.0;
}

/// One run of dpsgd, prune or fim: the released vectors come from the plugin's backend.
class PublicDataModel final : public TrainableModel {
 public:
  PublicDataModel(const TrainedModel& model, const Dataset& public_part, const Dataset& private_part,
                  const DpSgdOptions& phase, const GradientModelOptions& gradient_model, PrivateTrainingMethod method,
                  VectorXd start, std::vector<bool> frozen, Index K, std::uint64_t run_seed, bool account_fil,
                  bool keep_public_records)
      : account_fil_(account_fil), keep_public_records_(keep_public_records), model_(model), public_(public_part), private_(private_part), phase_(phase), gradient_model_(gradient_model),
        method_(method), start_(std::move(start)), frozen_(std::move(frozen)) {
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
    backend_ = create_released_gradient_backend(spec);
    const std::uint64_t model_seed = splitmix64(run_seed ^ 0x6a09e667f3bcc908ULL);
    backend_->initialize(model_seed);
    if (fim && gradient_model.is_constant()) {
      constant_.emplace(gradient_model.kind, static_cast<Index>(released_.size()), gradient_model.hidden, model_seed,
                        gradient_model.state_precision);
      backend_->set_shift(constant_->perturbation());
    }
  }

  Index parameter_count() const override { return model_.parameter_count(); }
  VectorXd initial_parameters(std::mt19937_64&) const override { return start_; }
  bool is_glm() const override { return model_.is_glm(); }
  Model glm(const VectorXd& w) const override { return model_.glm(w, private_.n()); }
  double accuracy(const VectorXd& w, const Dataset& data) const override { return model_.accuracy(w, data); }
  std::string describe() const override { return model_.is_glm() ? std::string() : model_.plan().describe(); }
  const std::vector<bool>* frozen() const override { return &frozen_; }

  StepAccounting step(const VectorXd& w, const LocalBatch& local, std::uint64_t run_seed,
                      Index t) const override {
    const std::vector<Index>& batch = local.rows;  // one process: train_dpsgd_with_models does not shard
    const RowMatrix Xb = private_.select_rows(batch).X;
    VectorXd yb(static_cast<Index>(batch.size()));
    for (std::size_t b = 0; b < batch.size(); ++b) yb(static_cast<Index>(b)) = private_.y(batch[b]);
    if (method_ == PrivateTrainingMethod::kFim) {
      if (constant_) {
        train_constant_model(w, run_seed, t);
        record_constant_diagnostics(w, batch);
      } else {
        train_gradient_model(w, Xb, yb, run_seed, t);
      }
    }
    NetworkBatchAccounting a;
    if (account_fil_) {
      NetworkAccountingRequest request;
      request.trace = *phase_.trace;
      request.probes = *phase_.probes;
      a = backend_->account_batch(w, Xb, yb, request, derive_seed(run_seed, t, 1));
      add_thesis_traces(w, Xb, yb, batch, a.trace, derive_seed(run_seed, t, 0));
    } else {  // the release alone (the same vectors, no Jacobian)
      a.clipped_sum = backend_->released(w, Xb, yb).colwise().sum().transpose();
      a.trace = VectorXd::Zero(Xb.rows());
      a.spectral = VectorXd::Constant(Xb.rows(), std::nan(""));
    }
    StepAccounting out{VectorXd::Zero(parameter_count()), a.trace, a.spectral};
    for (std::size_t j = 0; j < released_.size(); ++j) out.clipped_sum(released_[j]) = a.clipped_sum(static_cast<Index>(j));
    return out;
  }

  /// The method, the gradient model's settings, the pre-trained start and frozen coordinates and
  /// the public part: a resume file made with any of them different is refused.
  nlohmann::json resume_fingerprint() const override {
    std::string bytes(reinterpret_cast<const char*>(start_.data()), sizeof(double) * static_cast<std::size_t>(start_.size()));
    for (bool frozen : frozen_) bytes.push_back(frozen ? '1' : '0');
    return {{"method", to_string(method_)},
            {"gradient_model", method_ == PrivateTrainingMethod::kFim ? settings_json(gradient_model_) : nlohmann::json()},
            {"start_sha256", sha256_hex(bytes)},
            {"public_hash", std::to_string(rows_hash(public_))},
            {"account_fil", account_fil_}};
  }

  /// fim's constant model (phi and Adam's moments), the diagnostics of the steps done and the
  /// thesis' trace sums: with the trainer's state, all that step t + 1 depends on.
  nlohmann::json resume_state() const override {
    nlohmann::json state = {{"cosine", cosine_},
                            {"loss", loss_},
                            {"thesis_trace", as_list(thesis_trace_)},
                            {"constant", nullptr}};
    for (const auto& [name, part] : {std::pair{"norms_base", &VectorNorms::base},
                                     std::pair{"norms_perturbation", &VectorNorms::perturbation},
                                     std::pair{"norms_released", &VectorNorms::released}}) {
      std::vector<double> values;
      for (const VectorNorms& n : norms_) values.push_back(n.*part);
      state[name] = values;
    }
    if (constant_) {
      const ConstantGradientModel::State c = constant_->state();
      state["constant"] = {{"parameters", as_list(c.parameters)},
                           {"first_moment", as_list(c.first_moment)},
                           {"second_moment", as_list(c.second_moment)},
                           {"updates", c.updates}};
    }
    return state;
  }

  void restore(const nlohmann::json& state, Index steps_done) const override {
    if (!state.is_object()) throw std::runtime_error("is not an object");
    const bool fim = method_ == PrivateTrainingMethod::kFim;
    const Index diagnostics = fim ? steps_done : 0;
    const VectorXd cosine = saved_numbers(state, "cosine", diagnostics, true);
    const VectorXd loss = saved_numbers(state, "loss", diagnostics, true);
    const Index norms = fim && constant_ ? steps_done : 0;
    const VectorXd base = saved_numbers(state, "norms_base", norms, true, "", Sign::kNonNegative);
    const VectorXd perturbation = saved_numbers(state, "norms_perturbation", norms, true, "", Sign::kNonNegative);
    const VectorXd released = saved_numbers(state, "norms_released", norms, true, "", Sign::kNonNegative);
    const VectorXd thesis = saved_numbers(state, "thesis_trace", account_fil_ && steps_done > 0 ? private_.n() : 0,
                                          false, "", Sign::kNonNegative);
    const auto found = state.find("constant");
    if (found == state.end() || found->is_object() != constant_.has_value() || (!constant_ && !found->is_null()))
      throw std::runtime_error(constant_ ? "'constant' is missing: the constant gradient model's state"
                                         : "'constant' is set for a method without the constant gradient model");
    if (constant_) {
      const Index count = constant_->parameters().size();
      ConstantGradientModel::State c;
      c.parameters = saved_numbers(*found, "parameters", count, false, "constant");
      c.first_moment = saved_numbers(*found, "first_moment", count, false, "constant");
      c.second_moment = saved_numbers(*found, "second_moment", count, false, "constant", Sign::kNonNegative);
      const auto updates = found->find("updates");
      if (updates == found->end() || !updates->is_number_integer() || updates->get<Index>() < 0)
        throw std::runtime_error("'constant.updates' is not a count");
      c.updates = updates->get<Index>();
      constant_->restore(c);
      backend_->set_shift(constant_->perturbation());
    }
    cosine_ = as_list(cosine);
    loss_ = as_list(loss);
    norms_.clear();
    for (Index i = 0; i < norms; ++i) norms_.push_back({base(i), perturbation(i), released(i)});
    thesis_trace_ = thesis;
  }

  const std::vector<double>& perturbation_cosine() const { return cosine_; }
  /// The thesis' accumulation, per private example (MethodResult::thesis_trace_sum).
  const VectorXd& thesis_trace_sum() const { return thesis_trace_; }
  const std::vector<double>& gradient_model_loss() const { return loss_; }
  const std::vector<VectorNorms>& vector_norms() const { return norms_; }

 private:
  static std::uint64_t derive_seed(std::uint64_t run_seed, Index t, std::uint64_t purpose) {
    return splitmix64(run_seed ^ splitmix64(static_cast<std::uint64_t>(t) * 4 + purpose));
  }

  /// The thesis' accountant (its accountant.py): each batch member's trace estimated with 2 Gaussian
  /// input-space probes, then sqrt(T + 1e-7) squared, NaN taken as 0. Equal to filkit's accounting
  /// when that uses 2 probes (the default here); otherwise its own 2 probes are drawn.
  void add_thesis_traces(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb, const std::vector<Index>& batch,
                         const VectorXd& accounted, std::uint64_t seed) const {
    if (thesis_trace_.size() == 0) thesis_trace_ = VectorXd::Zero(private_.n());
    VectorXd estimate;
    if (*phase_.trace == TraceMethod::kGaussian && *phase_.probes == kThesisProbes) {
      estimate = accounted;
    } else {
      NetworkAccountingRequest request;
      request.trace = TraceMethod::kGaussian;
      request.probes = kThesisProbes;
      estimate = backend_->account_batch(w, Xb, yb, request, seed).trace;
    }
    for (std::size_t b = 0; b < batch.size(); ++b) {
      const double T = estimate(static_cast<Index>(b));
      thesis_trace_(batch[b]) += (std::isnan(T) ? 0.0 : T) + kThesisTraceFloor;
    }
  }

  /// Before private step t, for the constant models: the thesis' training of c on public batches at
  /// w (epochs of a fresh permutation with a short last batch, or uniform batches), warm-started
  /// from the previous step's c, Adam's count restarted; then c is what the backend adds.
  void train_constant_model(const VectorXd& w, std::uint64_t run_seed, Index t) const {
    const GradientModelOptions& o = gradient_model_;
    const Index n = public_.n(), B = std::min(o.batch_size, n), d = public_.d();
    const Index S = o.trace == GradientTrace::kProbes ? o.probes : 0;
    ShiftObjectiveRequest request;  // its floor is the thesis' 1e-7
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
    ShiftObjectiveTerms step_terms;
    if (per_step) {
      step_probes = gaussian_probes(n, S, d, derive_seed(run_seed, t, 4));
      if (!closed_form) step_terms = backend_->shift_objective_terms(w, public_.X, public_.y, step_probes, o.precision);
    }
    // A network with the thesis' per-batch probes over epochs: every public example is in exactly
    // one batch an epoch and its terms do not depend on c, so an epoch's terms are computed before
    // its batches, from the records of the public examples kept for the whole step (each epoch
    // then costs only the probes' products), and each batch's objective follows from them.
    std::unique_ptr<ShiftObjectiveTermCache> epoch_cache;
    if (keep_public_records_ && fisher_term && S > 0 && !per_step && !closed_form && o.unit == ScheduleUnit::kEpochs)
      epoch_cache = backend_->shift_objective_term_cache(w, public_.X, public_.y, o.precision);
    RowMatrix epoch_probes, epoch_products;
    Index batch_count = 0;
    // The key of the next batch's probes (its position r draws from stream key + r).
    auto next_batch_key = [&] {
      return derive_seed(run_seed, t, 3) ^ splitmix64(static_cast<std::uint64_t>(batch_count++));
    };
    double last_value = std::nan("");
    auto train_on = [&](std::vector<Index> rows) {
      std::sort(rows.begin(), rows.end());
      const Index b_rows = static_cast<Index>(rows.size());
      if (!fisher_term) {
        const VectorXd& c = constant_->perturbation();
        const ShiftObjectiveValue value{c.squaredNorm(), 2.0 * c};
        apply_constant_update(value, t);
        last_value = value.value;
        return;
      }
      if (per_step && !closed_form) {
        const ShiftObjectiveValue value =
            shift_objective_from_terms(step_terms.gradients, step_terms.probe_products, rows,
                                       constant_->perturbation(), phase_.clip_norm, request.lambda, request.snr,
                                       request.floor);
        apply_constant_update(value, t);
        last_value = value.value;
        return;
      }
      const std::uint64_t key = next_batch_key();
      ShiftObjectiveValue value;
      if (closed_form && S > 0) {
        // The batch's rows gathered and its probes made (drawn, or this step's copied) block by
        // block inside the objective, where they are used: its B d pixels and B S d probes are
        // never written to memory and read back (the same values as the gathering below).
        const SoftmaxRelease::ProbeSource source = [&](Index first, Index count, double* out) {
          if (!per_step) {
            fill_gaussian_probes(key, first, count, S, d, out);
            return;
          }
          for (Index b = first; b < first + count; ++b)
            Eigen::Map<RowMatrix>(out + (b - first) * S * d, S, d) =
                step_probes.middleRows(rows[static_cast<std::size_t>(b)] * S, S);
        };
        value = closed_form->objective(public_.X, public_.y, rows, constant_->perturbation(), S, source,
                                       request.lambda, request.snr, request.floor);
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
        const RowMatrix probes = gaussian_probes(b_rows, S, d, key);
        value = closed_form ? closed_form_objective(*closed_form, Xb, yb, probes, request)
                            : backend_->shift_objective(w, Xb, yb, constant_->perturbation(), probes, request);
      }
      apply_constant_update(value, t);
      last_value = value.value;
    };
    // An epoch from the cache: its batches (rows sorted, as train_on sorts them) and their probes
    // drawn as train_on draws them, batch by batch (position r of a batch from stream key + r), then
    // every example's products at once, then the batches' objectives and updates in order.
    auto train_epoch_from_cache = [&](std::vector<std::vector<Index>> batches) {
      std::vector<std::uint64_t> keys;
      for (std::vector<Index>& rows : batches) {
        std::sort(rows.begin(), rows.end());
        keys.push_back(next_batch_key());
      }
      epoch_probes.resize(n * S, d);
      for (std::size_t k = 0; k < batches.size(); ++k) {
        const std::vector<Index>& rows = batches[k];
#pragma omp parallel for schedule(static)
        for (Index r = 0; r < static_cast<Index>(rows.size()); ++r)
          fill_gaussian_probes(keys[k], r, 1, S, d, epoch_probes.row(rows[static_cast<std::size_t>(r)] * S).data());
      }
      epoch_cache->probe_products(epoch_probes, epoch_products);
      for (const std::vector<Index>& rows : batches) {
        const ShiftObjectiveValue value =
            shift_objective_from_terms(epoch_cache->gradients(), epoch_products, rows, constant_->perturbation(),
                                       phase_.clip_norm, request.lambda, request.snr, request.floor);
        apply_constant_update(value, t);
        last_value = value.value;
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
      if (epoch_cache) {
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

  /// S standard normal probes of dimension d for each of `rows` examples (row r S + s), example r's
  /// from its own stream seeded by key + r: the same whatever the thread count.
  static RowMatrix gaussian_probes(Index rows, Index S, Index d, std::uint64_t key) {
    RowMatrix probes(rows * S, d);
#pragma omp parallel for schedule(static)
    for (Index r = 0; r < rows; ++r) fill_gaussian_probes(key, r, 1, S, d, probes.row(r * S).data());
    return probes;
  }

  /// gaussian_probes' rows of examples first, ..., first + count - 1 (count S x d) into `out`.
  static void fill_gaussian_probes(std::uint64_t key, Index first, Index count, Index S, Index d, double* out) {
    for (Index r = first; r < first + count; ++r)
      SplitMixStream(splitmix64(key + static_cast<std::uint64_t>(r))).normals(out + (r - first) * S * d, S * d);
  }

  /// One Adam update of the constant model from the objective's value and gradient on a batch.
  void apply_constant_update(const ShiftObjectiveValue& value, Index t) const {
    if (!std::isfinite(value.value) || !value.gradient.allFinite())
      throw std::runtime_error("the constant gradient model's objective is not finite before private step " +
                               std::to_string(t) + ": lower lambda or gradient_step_size");
    constant_->update_from_perturbation_gradient(value.gradient, gradient_model_.step_size, gradient_model_.weight_decay);
  }

  ShiftObjectiveValue closed_form_objective(const SoftmaxRelease& release, const RowMatrix& X, const VectorXd& y,
                                            const RowMatrix& probes, const ShiftObjectiveRequest& request) const {
    return release.objective(X, y, constant_->perturbation(), probes, request.lambda, request.snr, request.floor);
  }

  /// Figures 3.4 and A.1 of the thesis for the constant models: the cosine of c with the mean public
  /// gradient, and the mean norms over the private batch of M g_b, c and r_b.
  void record_constant_diagnostics(const VectorXd& w, const std::vector<Index>& batch) const {
    std::vector<Index> all(static_cast<std::size_t>(public_.n()));
    std::iota(all.begin(), all.end(), Index{0});
    const VectorXd full = model_.mean_gradient(public_, all, w);
    VectorXd mean_public(static_cast<Index>(released_.size()));
    for (std::size_t j = 0; j < released_.size(); ++j) mean_public(static_cast<Index>(j)) = full(released_[j]);
    const VectorXd& c = constant_->perturbation();
    cosine_.push_back(cosine(c, mean_public));
    const MatrixXd base = model_.released_gradients(private_, batch, w, released_);
    const Dataset members = private_.select_rows(batch);
    const MatrixXd released = backend_->released(w, members.X, members.y);
    norms_.push_back({base.rowwise().norm().mean(), c.norm(), released.rowwise().norm().mean()});
  }

  /// Before private step t: the gradient model's public steps at w, and the figure 3.4 diagnostic.
  void train_gradient_model(const VectorXd& w, const RowMatrix& Xb, const VectorXd& yb, std::uint64_t run_seed,
                            Index t) const {
    const GradientModelOptions& o = gradient_model_;
    const Index per_epoch = (public_.n() + o.batch_size - 1) / o.batch_size;  // the conditional model's batches are uniform
    const Index batches = o.steps_before(t) * (o.unit == ScheduleUnit::kEpochs ? per_epoch : 1);
    const GradientModelTraining trained = backend_->train(w, public_.X, public_.y, batches, derive_seed(run_seed, t, 2));
    loss_.push_back(trained.final_loss);
    std::vector<Index> all(static_cast<std::size_t>(public_.n()));
    std::iota(all.begin(), all.end(), Index{0});
    const VectorXd full = model_.mean_gradient(public_, all, w);
    VectorXd mean_public(static_cast<Index>(released_.size()));
    for (std::size_t j = 0; j < released_.size(); ++j) mean_public(static_cast<Index>(j)) = full(released_[j]);
    const MatrixXd perturbation = backend_->perturbation(w, Xb, yb);
    double sum = 0.0;
    for (Index b = 0; b < perturbation.rows(); ++b) sum += cosine(perturbation.row(b).transpose(), mean_public);
    cosine_.push_back(sum / static_cast<double>(perturbation.rows()));
  }

  bool account_fil_;
  bool keep_public_records_;  ///< ShiftObjectiveTermCache within max_memory (check_training_memory)
  const TrainedModel& model_;
  const Dataset& public_;
  const Dataset& private_;
  const DpSgdOptions& phase_;
  const GradientModelOptions& gradient_model_;
  PrivateTrainingMethod method_;
  VectorXd start_;
  std::vector<bool> frozen_;
  std::vector<Index> released_;
  std::unique_ptr<ReleasedGradientBackend> backend_;
  // The model is const to the trainer; its gradient model and diagnostics change as it trains.
  mutable std::optional<ConstantGradientModel> constant_;
  mutable std::vector<double> cosine_, loss_;
  mutable std::vector<VectorNorms> norms_;
  mutable VectorXd thesis_trace_;
};

/// What every method of a run starts from.
struct RunStart {
  VectorXd parameters;       ///< pre-trained (or initialised) on the public part
  std::vector<bool> frozen;  ///< the smallest-magnitude coordinates of `parameters`, and the fixed ones
};

RunStart pretrained_start(const TrainedModel& model, const Dataset& public_part,
                          const PublicDataTrainingOptions& options, const std::vector<bool>& fixed,
                          std::uint64_t run_seed) {
  std::mt19937_64 rng(run_seed);
  VectorXd initial = model.initial_parameters(rng);
  for (Index i = 0; i < static_cast<Index>(fixed.size()); ++i)
    if (fixed[static_cast<std::size_t>(i)]) initial(i) = 0.0;
  RunStart start;
  start.parameters = train_without_privacy(model, public_part, std::move(initial), options.pretrain,
                                           pretraining_optimizer(options.private_phase),
                                           splitmix64(run_seed ^ 0xbb67ae8584caa73bULL), fixed);
  start.frozen = smallest_magnitude_mask(start.parameters, options.freeze_fraction, fixed);
  return start;
}

/// Refuses, before pre-training, what training holds at once beyond phase.max_memory: a network
/// (estimate_network_memory) with a chunk of its per-example gradients (the mean gradients of
/// pre-training, sgd and fim's diagnostics form them a chunk of rows at a time, p doubles a row)
/// and fim's released gradients of a private batch (B x m), and fim's gradient model
/// (estimate_gradient_model_memory). Returns whether fim on a network keeps the public examples'
/// records for a private step (per-batch probes over epochs): where they fit beside the rest.
bool check_training_memory(const TrainedModel& trained, const PublicDataTrainingOptions& options,
                           const DpSgdOptions& phase, const Dataset& private_part, Index public_rows, Index trainable) {
  const Index private_rows = private_part.n();
  const bool fim = std::find(options.methods.begin(), options.methods.end(), PrivateTrainingMethod::kFim) !=
                   options.methods.end();
  const Index released = trainable - std::llround(options.freeze_fraction * static_cast<double>(trainable));
  const auto u = [](Index value) { return static_cast<std::uint64_t>(value); };
  std::uint64_t bytes = 0;
  Message what, shrink;
  if (phase.network) {
    const NetworkMemoryEstimate network = estimate_network_memory(trained.plan(), network_rows_in_flight(*phase.network));
    const Index rows = std::min(trained.rows_at_once(), std::max({std::min(options.pretrain.batch_size, public_rows),
                                                                  std::min(phase.batch_size, private_rows),
                                                                  fim ? public_rows : 0}));
    std::uint64_t gradients = saturating_product(u(rows) * sizeof(double), u(trained.parameter_count()));
    if (fim) gradients = saturating_sum(gradients, saturating_product(u(phase.batch_size) * sizeof(double), u(released)));
    bytes = saturating_sum(network.total(), gradients);
    what = "training " + network.describe() + " with " + readable_bytes(gradients) + " of per-example gradients";
    shrink = option_name("chunk") + ", " + option_name("batch_size") + ", " + option_name("pretrain_batch_size");
  }
  bool keep_records = false;
  if (fim) {
    const auto estimate = [&](const NetworkPlan* kept_records) {
      return estimate_gradient_model_memory(options.gradient_model, released, private_part.d(), private_part.image,
                                            public_rows, phase.network.has_value(), kept_records);
    };
    GradientModelMemoryEstimate model = estimate(nullptr);
    if (phase.network) {
      const GradientModelMemoryEstimate kept = estimate(&trained.plan());
      keep_records = kept.kept_records > 0 && saturating_sum(bytes, kept.total()) <= phase.max_memory.bytes;
      if (keep_records) model = kept;
    }
    bytes = saturating_sum(bytes, model.total());
    what += Message(phase.network ? " and " : "") + model.describe();
    shrink += Message(phase.network ? ", " : "") + "a narrower " + option_name("gradient_hidden") + ", a smaller " +
              option_name("gradient_batch_size") + " or fewer " + option_name("gradient_probes");
  }
  if (bytes > 0) check_memory(bytes, phase.max_memory, what + " (" + shrink + ")");
  return keep_records;
}

}  // namespace

PublicDataTrainingResult train_with_public_data(const Dataset& public_part, const Dataset& private_part,
                                                const Dataset& test, const PublicDataTrainingOptions& options,
                                                bool progress, CheckpointWhenDone when_done) {
  options.validate();
  public_part.validate();
  private_part.validate();
  if (public_part.n() == 0 || private_part.n() == 0)
    throw std::invalid_argument(std::string("the ") + (public_part.n() == 0 ? "public" : "private") +
                                " part is empty: public_fraction must leave examples on both sides");
  for (const Dataset* data : {&public_part, &test})
    if (data->n() > 0 && data->d() != private_part.d())
      throw std::invalid_argument("the " + std::string(data == &test ? "test" : "public") + " data has " +
                                  std::to_string(data->d()) + " features, the private part " +
                                  std::to_string(private_part.d()));
  if (options.gradient_model.batch_size > public_part.n() &&
      std::find(options.methods.begin(), options.methods.end(), PrivateTrainingMethod::kFim) != options.methods.end())
    option_error("gradient_batch_size", std::to_string(options.gradient_model.batch_size),
                 "must be <= the public part's " + std::to_string(public_part.n()) + " examples");
  const DpSgdOptions phase = resolved_private_phase(options, private_part.n());
  PublicDataTrainingResult result;
  result.n_public = public_part.n();
  result.n_private = private_part.n();
  result.num_classes = class_count({{public_part, "public"}, {private_part, "private"}, {test, "test"}});
  const Index K = result.num_classes;
  const TrainedModel trained(private_part, phase, K);
  const Index p = trained.parameter_count();
  result.parameter_count = p;
  const std::vector<bool> fixed = trained.fixed_coordinates(options.reference_logit);
  const Index trainable = p - static_cast<Index>(std::count(fixed.begin(), fixed.end(), true));
  const bool keep_public_records = check_training_memory(trained, options, phase, private_part, public_part.n(), trainable);

  const auto pretrain_begin = std::chrono::steady_clock::now();
  std::vector<RunStart> starts;
  for (int run = 0; run < phase.runs; ++run) {
    starts.push_back(pretrained_start(trained, public_part, options, fixed, dpsgd_run_seed(phase, run)));
    const VectorXd& w = starts.back().parameters;
    result.pretrain_train_accuracy.push_back(trained.accuracy(w, private_part));
    result.pretrain_test_accuracy.push_back(test.n() > 0 ? trained.accuracy(w, test) : std::nan(""));
    result.pretrain_parameters.push_back(w);
  }
  result.seconds["pretrain"] = seconds_since(pretrain_begin);

  for (PrivateTrainingMethod method : options.methods) {
    const auto begin = std::chrono::steady_clock::now();
    MethodResult m;
    m.method = method;
    if (method == PrivateTrainingMethod::kSgd) {
      DpSgdSnapshot snapshot;
      snapshot.step = phase.steps;
      // Shuffled epochs as the private phase samples them; else independent uniform batches, as before.
      const PlainTrainingOptions plain{phase.steps, phase.batch_size, phase.step_size, phase.weight_decay,
                                       phase.sampling == BatchSampling::kShuffle ? BatchSampling::kShuffle
                                                                                 : BatchSampling::kUniform};
      for (int run = 0; run < phase.runs; ++run) {
        // The private phase's optimizer (sgd with momentum or Adam, its settings), as dpsgd's.
        const VectorXd w = train_without_privacy(trained, private_part, starts[static_cast<std::size_t>(run)].parameters,
                                                 plain, phase, dpsgd_run_seed(phase, run), fixed);
        snapshot.train_accuracy.push_back(trained.accuracy(w, private_part));
        snapshot.test_accuracy.push_back(test.n() > 0 ? trained.accuracy(w, test) : std::nan(""));
        m.training.parameters.push_back(w);
      }
      m.training.n = private_part.n();
      m.training.num_classes = K;
      m.training.private_dims = private_part.d();
      m.training.parameter_count = p;
      snapshot.private_dims = private_part.d();
      m.training.snapshots.push_back(snapshot);
    } else {
      std::vector<std::unique_ptr<PublicDataModel>> models(static_cast<std::size_t>(phase.runs));
      const TrainableModelOfRun model_of_run = [&](int run, std::uint64_t seed) -> const TrainableModel& {
        auto& slot = models[static_cast<std::size_t>(run)];
        if (!slot) {
          const RunStart& start = starts[static_cast<std::size_t>(run)];
          std::vector<bool> frozen = method != PrivateTrainingMethod::kDpSgd ? start.frozen
                                     : fixed.empty() ? std::vector<bool>(static_cast<std::size_t>(p), false)
                                                     : fixed;
          slot = std::make_unique<PublicDataModel>(trained, public_part, private_part, phase, options.gradient_model,
                                                   method, start.parameters, std::move(frozen), K, seed,
                                                   options.account_fil, keep_public_records);
        }
        return *slot;
      };
      m.training = train_dpsgd_with_models(private_part, test, phase, model_of_run, progress, to_string(method),
                                           when_done);
      if (!m.training.complete) {  // stopped (stop_after): the state is in the checkpoint
        result.complete = false;
        result.methods.push_back(std::move(m));
        return result;
      }
      if (method != PrivateTrainingMethod::kDpSgd)  // pruned: the fixed coordinates are not counted
        m.frozen = std::count(starts[0].frozen.begin(), starts[0].frozen.end(), true) - (p - trainable);
      if (method == PrivateTrainingMethod::kFim) {
        for (const auto& model : models) {
          m.perturbation_cosine.push_back(model->perturbation_cosine());
          m.gradient_model_loss.push_back(model->gradient_model_loss());
          m.vector_norms.push_back(model->vector_norms());
        }
        const GradientModelOptions& g = options.gradient_model;
        if (phase.network && g.is_constant() && g.trace == GradientTrace::kProbes &&
            g.probe_draws == ProbeDraws::kBatch && g.unit == ScheduleUnit::kEpochs)
          m.objective_terms = keep_public_records ? kPublicRecordsKept : kPublicRecordsPerBatch;
      }
      for (const auto& model : models) m.thesis_trace_sum.push_back(model->thesis_trace_sum());
    }
    result.seconds[to_string(method)] = seconds_since(begin);
    result.methods.push_back(std::move(m));
  }
  return result;
}

VectorXd train_one_model(const Dataset& public_part, const Dataset& private_part,
                         const PublicDataTrainingOptions& options, PrivateTrainingMethod method) {
  if (options.private_phase.runs != 1)
    throw std::invalid_argument("train_one_model: runs = " + std::to_string(options.private_phase.runs) +
                                ": one model is trained (runs must be 1)");
  PublicDataTrainingOptions one = options;
  one.methods = {method};
  one.account_fil = false;
  return train_with_public_data(public_part, private_part, Dataset{}, one, false).methods.front().training.parameters.front();
}

nlohmann::json to_json(const PublicDataTrainingOptions& options) {
  nlohmann::json json;
  json["public_fraction"] = options.public_fraction;
  json["public_split"] = to_string(options.public_split);
  json["freeze_fraction"] = options.freeze_fraction;
  json["reference_logit"] = options.reference_logit;
  std::vector<std::string> methods;
  for (PrivateTrainingMethod m : options.methods) methods.push_back(to_string(m));
  json["methods"] = methods;
  json["pretrain"] = {{"steps", options.pretrain.steps},
                      {"batch_size", options.pretrain.batch_size},
                      {"step_size", options.pretrain.step_size},
                      {"weight_decay", options.pretrain.weight_decay},
                      {"sampling", to_string(options.pretrain.sampling)}};
  json["gradient_model"] = settings_json(options.gradient_model);
  json["gradient_model"]["normalisation"] =
      options.gradient_model.is_constant()
          ? "batch normalisation over a batch of one example (the thesis' code): the model is the constant c"
          : "layer (per example)";
  json["private_phase"] = to_json(options.private_phase);
  return json;
}

}  // namespace filkit
