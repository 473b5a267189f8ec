#include "filkit/leakage/learned_reconstruction.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/first_exception.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/timing.hpp"
#include "base/adam_step.hpp"
#include "base/parallel_blocks.hpp"
#include "base/seeding.hpp"
#include "base/splitmix_stream.hpp"

#include <Eigen/Cholesky>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace filkit {

namespace {

/// 0, 1, ..., n - 1 in a seeded Fisher-Yates order (the same on every platform).
std::vector<Index> seeded_permutation(Index n, std::uint64_t seed) {
  std::vector<Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  SplitMixStream stream(seed);
  for (Index i = n - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(stream.below(static_cast<std::uint64_t>(i) + 1))]);
  return order;
}

}  // namespace

void LearnedReconstructionOptions::validate() const {
  require_positive("train_shadow_models", train_shadow_models);
  require_positive("target_shadow_models", target_shadow_models);
  require_positive("fixed_size", fixed_size);
  // Each count bounded alone first, so that the sums formed from them (the rows drawn, fixed_size
  // + 1) cannot overflow; then the loops they form.
  bounded_iterations({{"fixed_size", fixed_size}}, "examples in D_fixed");
  bounded_iterations({{"train_shadow_models", train_shadow_models}}, "shadow models");
  bounded_iterations({{"target_shadow_models", target_shadow_models}}, "shadow models");
  for (Index width : attacker_hidden) require_positive("attacker_hidden", width);
  require_non_negative("ridge", ridge);
  require_positive("attacker_epochs", attacker_epochs);
  require_positive("attacker_batch_size", attacker_batch_size);
  // The attacker takes ceil(train_shadow_models / attacker_batch_size) steps an epoch.
  bounded_iterations({{"attacker_epochs", attacker_epochs},
                      {"ceil(" + option_name("train_shadow_models") + " / " + option_name("attacker_batch_size") + ")",
                       (train_shadow_models - 1) / attacker_batch_size + 1}},
                     "attacker steps");
  require_positive("attacker_step_size", attacker_step_size);
  require_non_negative("attacker_weight_decay", attacker_weight_decay);
}

AttackData draw_attack_data(const Dataset& data, const LearnedReconstructionOptions& options, Index public_size) {
  options.validate();
  require_non_negative("public_size", public_size);
  const Index candidates = options.train_shadow_models + options.target_shadow_models;
  const Index needed = public_size + options.fixed_size + candidates;
  if (data.n() < needed)
    throw OptionError::with_text("public_size",
                                 "the learned attack needs public_size + fixed_size + train_shadow_models + "
                                 "target_shadow_models = " +
                                     std::to_string(needed) + " rows, and the data (" + data.source + ") has " +
                                     std::to_string(data.n()));
  const std::vector<Index> order = seeded_permutation(data.n(), splitmix64(options.seed ^ 0x5eedf1c5ULL));
  const auto rows = [&](Index start, Index count, bool sorted) {
    std::vector<Index> part(order.begin() + start, order.begin() + start + count);
    if (sorted) std::sort(part.begin(), part.end());
    return data.select_rows(part);
  };
  return {rows(0, public_size, true), rows(public_size, options.fixed_size, true),
          rows(public_size + options.fixed_size, candidates, false)};
}

Dataset with_candidate(const Dataset& fixed, const Dataset& candidates, Index candidate) {
  Dataset train = fixed;
  train.X.conservativeResize(fixed.n() + 1, Eigen::NoChange);
  train.X.row(fixed.n()) = candidates.X.row(candidate);
  train.y.conservativeResize(fixed.n() + 1);
  train.y(fixed.n()) = candidates.y(candidate);
  return train;
}

// ---- SSIM -----------------------------------------------------------------------------------

double ssim(const VectorXd& x, const VectorXd& y, const ImageShape& shape, double data_range) {
  constexpr Index kWindow = 7;
  // Shapes fixed by the attack's own setup: a bug otherwise.
  if (x.size() != shape.size() || y.size() != shape.size())
    throw std::logic_error("ssim: images of " + std::to_string(x.size()) + " and " + std::to_string(y.size()) +
                           " values for the shape " + to_string(shape) + " (" + std::to_string(shape.size()) + ")");
  if (shape.height < kWindow || shape.width < kWindow)
    throw DataError("ssim: the image shape " + to_string(shape) + " is smaller than the 7 x 7 window");
  const double c1 = std::pow(0.01 * data_range, 2), c2 = std::pow(0.03 * data_range, 2);
  constexpr double n = kWindow * kWindow;
  double total = 0;
  for (Index c = 0; c < shape.channels; ++c) {
    const Index plane = c * shape.height * shape.width;
    const auto at = [&](const VectorXd& image, Index h, Index w) { return image(plane + h * shape.width + w); };
    for (Index top = 0; top + kWindow <= shape.height; ++top)
      for (Index left = 0; left + kWindow <= shape.width; ++left) {
        double sx = 0, sy = 0;
        for (Index h = top; h < top + kWindow; ++h)
          for (Index w = left; w < left + kWindow; ++w) sx += at(x, h, w), sy += at(y, h, w);
        const double mx = sx / n, my = sy / n;
        double vx = 0, vy = 0, cxy = 0;  // centred sums: no cancellation for flat windows
        for (Index h = top; h < top + kWindow; ++h)
          for (Index w = left; w < left + kWindow; ++w) {
            const double dx = at(x, h, w) - mx, dy = at(y, h, w) - my;
            vx += dx * dx, vy += dy * dy, cxy += dx * dy;
          }
        vx /= n - 1, vy /= n - 1, cxy /= n - 1;
        total += (2 * mx * my + c1) * (2 * cxy + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2));
      }
  }
  const Index windows = (shape.height - kWindow + 1) * (shape.width - kWindow + 1) * shape.channels;
  return total / static_cast<double>(windows);
}

// ---- the attacker ---------------------------------------------------------------------------

namespace {

/// The one-hot labels' column means and scales over the fitted shadow models (a class absent from
/// them has scale 1, as a constant parameter column).
void fit_label_standardisation(Attacker& mlp, const VectorXd& labels, Index num_classes) {
  VectorXd share = VectorXd::Zero(num_classes);
  for (Index i = 0; i < labels.size(); ++i)
    share(static_cast<Index>(labels(i))) += 1.0 / static_cast<double>(labels.size());
  mlp.label_mean = share;
  mlp.label_scale = (share.array() * (1.0 - share.array())).sqrt();
  for (Index k = 0; k < num_classes; ++k)
    if (!(mlp.label_scale(k) > 1e-12)) mlp.label_scale(k) = 1.0;
}

/// Standardised parameters followed by the standardised one-hot label.
RowMatrix mlp_inputs(const RowMatrix& standardised, const VectorXd& labels, const Attacker& mlp) {
  const Index num_classes = mlp.label_mean.size();
  RowMatrix inputs(standardised.rows(), standardised.cols() + num_classes);
  inputs.leftCols(standardised.cols()) = standardised;
  for (Index i = 0; i < labels.size(); ++i)
    for (Index k = 0; k < num_classes; ++k)
      inputs(i, standardised.cols() + k) =
          ((static_cast<Index>(labels(i)) == k ? 1.0 : 0.0) - mlp.label_mean(k)) / mlp.label_scale(k);
  return inputs;
}

MatrixXd relu(const MatrixXd& z) { return z.cwiseMax(0.0); }

/// A B, in parallel column blocks when large enough to pay for a parallel region (the choice
/// depends on the sizes only, so the result does not depend on the thread count).
MatrixXd product(const MatrixXd& a, const MatrixXd& b) {
  constexpr double kParallelMultiplyAdds = 1 << 21;
  if (static_cast<double>(a.rows()) * static_cast<double>(a.cols()) * static_cast<double>(b.cols()) <
      kParallelMultiplyAdds)
    return a * b;
  return detail::product_in_column_blocks(a, b);
}

/// Activations of every layer for the rows of `inputs` (layer 0: the inputs), rows as examples.
std::vector<MatrixXd> forward(const Attacker& mlp, const MatrixXd& inputs) {
  std::vector<MatrixXd> activations{inputs};
  for (std::size_t l = 0; l < mlp.weights.size(); ++l) {
    MatrixXd z = product(activations.back(), mlp.weights[l].transpose());
    z.rowwise() += mlp.biases[l].transpose();
    activations.push_back(l + 1 < mlp.weights.size() ? relu(z) : z);
  }
  return activations;
}

Attacker zeros_like(const Attacker& mlp) {
  Attacker zero = mlp;
  for (MatrixXd& w : zero.weights) w.setZero();
  for (VectorXd& b : zero.biases) b.setZero();
  return zero;
}

/// Adam (base/adam_step.hpp) with L2 weight decay added to the gradient, as torch.optim.Adam.
struct Adam {
  Attacker first, second;
  Index step = 0;
  double step_size, weight_decay;
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;

  Adam(const Attacker& mlp, double step_size_, double weight_decay_)
      : first(zeros_like(mlp)), second(zeros_like(mlp)), step_size(step_size_), weight_decay(weight_decay_) {}

  template <class Matrix>
  void update(Matrix& w, Matrix g, Matrix& m, Matrix& v) const {
    g += weight_decay * w;
    detail::adam_update(w, g, m, v, step, step_size, kBeta1, kBeta2, kEpsilon);
  }

  void apply(Attacker& mlp, const Attacker& gradient) {
    ++step;
    for (std::size_t l = 0; l < mlp.weights.size(); ++l) {
      update(mlp.weights[l], gradient.weights[l], first.weights[l], second.weights[l]);
      update(mlp.biases[l], gradient.biases[l], first.biases[l], second.biases[l]);
    }
  }
};

Attacker fit_mlp(const RowMatrix& inputs, const RowMatrix& outputs, const LearnedReconstructionOptions& options,
                 bool progress) {
  Attacker mlp = initial_mlp(inputs.cols(), options.attacker_hidden, outputs.cols(), splitmix64(options.seed + 1),
                             options.attacker_initialisation);
  Adam adam(mlp, options.attacker_step_size, options.attacker_weight_decay);
  const Index m = inputs.rows(), batch = std::min(options.attacker_batch_size, m);
  Progress bar("attacker epochs", options.attacker_epochs, !progress);
  Attacker gradient = zeros_like(mlp);
  for (Index epoch = 0; epoch < options.attacker_epochs; ++epoch) {
    const std::vector<Index> order =
        seeded_permutation(m, splitmix64(options.seed + 2 + static_cast<std::uint64_t>(epoch)));
    for (Index start = 0; start < m; start += batch) {
      const Index count = std::min(batch, m - start);
      RowMatrix x(count, inputs.cols()), y(count, outputs.cols());
      for (Index i = 0; i < count; ++i) {
        x.row(i) = inputs.row(order[static_cast<std::size_t>(start + i)]);
        y.row(i) = outputs.row(order[static_cast<std::size_t>(start + i)]);
      }
      mlp_loss_and_gradient(mlp, x, y, &gradient);
      adam.apply(mlp, gradient);
    }
    bar.advance();
  }
  bar.finish();
  return mlp;
}

/// Least squares from [parameters, 1] to the outputs over the rows of one label; the ridge is not
/// applied to the intercept.
MatrixXd fit_linear_map(const RowMatrix& parameters, const RowMatrix& outputs, double ridge) {
  const Index m = parameters.rows(), p = parameters.cols();
  MatrixXd design(m, p + 1);
  design.leftCols(p) = parameters;
  design.col(p).setOnes();
  MatrixXd gram = detail::product_in_column_blocks(design.transpose(), design) / static_cast<double>(m);
  gram.diagonal().head(p).array() += ridge;
  const MatrixXd right =
      detail::product_in_column_blocks(design.transpose(), MatrixXd(outputs)) / static_cast<double>(m);
  return gram.ldlt().solve(right);
}

Attacker fit_linear(const RowMatrix& standardised, const VectorXd& labels, const RowMatrix& outputs, double ridge,
                    Index num_classes) {
  Attacker linear;
  linear.linear = true;
  for (Index k = 0; k < num_classes; ++k) {
    std::vector<Index> rows;
    for (Index i = 0; i < labels.size(); ++i)
      if (labels(i) == static_cast<double>(k)) rows.push_back(i);
    if (rows.empty()) {  // no training model with this label: no map (predict refuses it)
      linear.weights.emplace_back();
      continue;
    }
    linear.weights.push_back(fit_linear_map(standardised(rows, Eigen::all), outputs(rows, Eigen::all), ridge));
  }
  return linear;
}

}  // namespace

Attacker initial_mlp(Index inputs, const std::vector<Index>& hidden, Index outputs, std::uint64_t seed,
                     NetworkInitialisation initialisation) {
  SplitMixStream stream(seed);
  std::mt19937_64 rng(seed);  // jax's: glorot_normal takes a standard engine
  Attacker mlp;
  Index in = inputs;
  std::vector<Index> widths = hidden;
  widths.push_back(outputs);
  for (Index out : widths) {
    MatrixXd w(out, in);
    VectorXd b(out);
    if (initialisation == NetworkInitialisation::kPyTorch) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      const auto draw = [&] { return bound * (2.0 * stream.uniform() - 1.0); };
      for (Index j = 0; j < in; ++j)
        for (Index i = 0; i < out; ++i) w(i, j) = draw();
      for (Index i = 0; i < out; ++i) b(i) = draw();
    } else {
      for (Index j = 0; j < in; ++j)
        for (Index i = 0; i < out; ++i) w(i, j) = glorot_normal(rng, in, out);
      std::normal_distribution<double> bias(0.0, kJaxDenseBiasStddev);
      for (Index i = 0; i < out; ++i) b(i) = bias(rng);
    }
    mlp.weights.push_back(std::move(w));
    mlp.biases.push_back(std::move(b));
    in = out;
  }
  return mlp;
}

double mlp_loss_and_gradient(const Attacker& mlp, const RowMatrix& inputs, const RowMatrix& outputs,
                             Attacker* gradient) {
  const std::vector<MatrixXd> a = forward(mlp, MatrixXd(inputs));
  const MatrixXd residual = a.back() - MatrixXd(outputs);
  const double scale = 1.0 / static_cast<double>(residual.rows());
  const double loss = residual.squaredNorm() * scale;
  if (gradient == nullptr) return loss;
  MatrixXd delta = 2.0 * scale * residual;  // d loss / d z of the last layer
  for (std::size_t l = mlp.weights.size(); l-- > 0;) {
    gradient->weights[l] = product(delta.transpose(), a[l]);
    gradient->biases[l] = delta.colwise().sum().transpose();
    if (l == 0) break;
    delta = product(delta, mlp.weights[l]);
    delta.array() *= (a[l].array() > 0.0).cast<double>();  // ReLU's derivative
  }
  return loss;
}

RowMatrix Attacker::predict(const RowMatrix& standardised, const VectorXd& labels) const {
  if (!linear) {
    const Index num_classes = weights.front().cols() - standardised.cols();
    for (Index i = 0; i < labels.size(); ++i)
      if (!(labels(i) >= 0 && labels(i) < static_cast<double>(num_classes)))
        throw DataError("learned attack: label " + shown_value(labels(i)) + " beyond the attacker's " +
                        std::to_string(num_classes) + " classes");
    return forward(*this, MatrixXd(mlp_inputs(standardised, labels, *this))).back();
  }
  RowMatrix predictions(standardised.rows(), weights.front().cols());
  for (Index i = 0; i < standardised.rows(); ++i) {
    const auto k = static_cast<std::size_t>(labels(i));
    if (k >= weights.size() || weights[k].size() == 0)
      throw DataError("learned attack: no training shadow model has label " + shown_value(labels(i)) +
                      ", so the linear attacker has no map for it");
    const MatrixXd& map = weights[k];
    const Index p = map.rows() - 1;
    predictions.row(i) = standardised.row(i) * map.topRows(p) + map.row(p);
  }
  return predictions;
}

Attacker fit_attacker(const RowMatrix& standardised, const VectorXd& labels, const RowMatrix& outputs,
                      Index num_classes, const LearnedReconstructionOptions& options, bool progress) {
  if (options.attacker_hidden.empty()) return fit_linear(standardised, labels, outputs, options.ridge, num_classes);
  Attacker labels_only;
  fit_label_standardisation(labels_only, labels, num_classes);
  Attacker mlp = fit_mlp(mlp_inputs(standardised, labels, labels_only), outputs, options, progress);
  mlp.label_mean = std::move(labels_only.label_mean);
  mlp.label_scale = std::move(labels_only.label_scale);
  return mlp;
}

// ---- the attack -----------------------------------------------------------------------------

Index check_attack_inputs(const Dataset& fixed, const Dataset& candidates,
                          const LearnedReconstructionOptions& options) {
  options.validate();
  if (fixed.n() == 0)
    throw OptionError::with_text("fixed_size", "learned attack: D_fixed is empty (fixed_size must be >= 1)");
  const Index needed = options.train_shadow_models + options.target_shadow_models;
  if (candidates.n() < needed)
    throw OptionError::with_text(
        "train_shadow_models",
        "learned attack: train_shadow_models + target_shadow_models = " + std::to_string(needed) +
            " shadow models need as many candidates, and there are " + std::to_string(candidates.n()));
  if (fixed.d() != candidates.d())
    throw DataError("learned attack: D_fixed has " + std::to_string(fixed.d()) + " features and the candidates " +
                    std::to_string(candidates.d()));
  if (fixed.image != candidates.image)
    throw DataError("learned attack: D_fixed and the candidates have different image shapes");
  if (!fixed.class_names.empty() && !candidates.class_names.empty() && fixed.class_names != candidates.class_names)
    throw DataError("learned attack: D_fixed and the candidates have different class names");
  std::vector<bool> in_fixed(static_cast<std::size_t>(class_count({{fixed, "D_fixed"}}, 0)), false);
  for (Index i = 0; i < fixed.n(); ++i) in_fixed[static_cast<std::size_t>(fixed.y(i))] = true;
  const Index num_classes =
      std::max<Index>(class_count({{candidates, "candidate"}}, 0), static_cast<Index>(in_fixed.size()));
  for (Index i = 0; i < needed; ++i) {
    const auto k = static_cast<std::size_t>(candidates.y(i));
    if (k >= in_fixed.size() || !in_fixed[k])
      throw DataError("learned attack: candidate " + std::to_string(i) + " has label " + std::to_string(k) +
                      ", which no example of D_fixed has (labels must match)");
  }
  return num_classes;
}

namespace {

/// Standardises every column by the mean and standard deviation of the first `fitted` rows; a
/// column constant on them (e.g. a frozen parameter) is only centred. With `clip`, the later rows
/// are clipped to the range each column takes on the first ones.
RowMatrix standardise(const RowMatrix& parameters, Index fitted, bool clip) {
  const auto fit = parameters.topRows(fitted);
  const Eigen::RowVectorXd mean = fit.colwise().mean();
  Eigen::RowVectorXd sd = ((fit.rowwise() - mean).colwise().squaredNorm() / static_cast<double>(fitted)).cwiseSqrt();
  for (Index j = 0; j < sd.size(); ++j)
    if (!(sd(j) > 1e-12 * std::max(1.0, std::abs(mean(j))))) sd(j) = 1.0;
  RowMatrix standardised = (parameters.rowwise() - mean).array().rowwise() / sd.array();
  if (!clip) return standardised;
  const Eigen::RowVectorXd low = standardised.topRows(fitted).colwise().minCoeff();
  const Eigen::RowVectorXd high = standardised.topRows(fitted).colwise().maxCoeff();
  for (Index i = fitted; i < standardised.rows(); ++i)
    standardised.row(i) = standardised.row(i).cwiseMax(low).cwiseMin(high);
  return standardised;
}

double mse(const VectorXd& a, const VectorXd& b) { return (a - b).squaredNorm() / static_cast<double>(a.size()); }

/// Shadow models a rank trains a wave, per OpenMP thread (of the rank with the most): every thread
/// has a few to take in turn, and rank 0 gathers (and a store saves) every few models' time.
constexpr Index kWaveModelsPerThread = 8;

/// The parameter count of the shadow models, from the first model rank 0 holds.
struct ParameterCount {
  Index count = -1, model = -1;  ///< -1: no model yet
};

/// A shadow model's parameters as rank 0 receives them: checked, then kept.
void check_shadow_model(Index model, const VectorXd& w, ParameterCount& expected) {
  if (expected.count < 0) expected = {w.size(), model};
  // Shapes fixed by the attack's own setup: a bug otherwise.
  if (w.size() != expected.count)
    throw std::logic_error("learned attack: shadow model " + std::to_string(model) + " has " +
                           std::to_string(w.size()) + " parameters and model " + std::to_string(expected.model) +
                           " has " + std::to_string(expected.count));
  if (!w.allFinite())
    throw NumericalError("learned attack: shadow model " + std::to_string(model) + " has non-finite parameters");
}

}  // namespace

RowMatrix train_shadow_models(const Dataset& fixed, const Dataset& candidates, Index count, const ShadowTrainer& train,
                              bool progress, const KeptShadowModels& kept, const Communicator& comm) {
  const bool root = comm.is_root();
  std::vector<VectorXd> parameters(static_cast<std::size_t>(root ? count : 0));
  // Which models are kept (rank 0 knows), told to every rank: the others are to be trained.
  VectorXd is_kept = VectorXd::Zero(count);
  if (root && kept.find)
    for (Index i = 0; i < count; ++i)
      if (std::optional<VectorXd> w = kept.find(i)) {
        parameters[static_cast<std::size_t>(i)] = *std::move(w);
        is_kept(i) = 1.0;
      }
  comm.broadcast(is_kept);
  std::vector<Index> missing;
  for (Index i = 0; i < count; ++i)
    if (is_kept(i) == 0.0) missing.push_back(i);
  const Index todo = static_cast<Index>(missing.size());
  Progress bar("shadow models", count, !(progress && root));
  bar.resume_at(count - todo);
  ParameterCount parameter_count;  // rank 0's
  for (Index i = 0; root && i < count; ++i)
    if (is_kept(i) != 0.0) check_shadow_model(i, parameters[static_cast<std::size_t>(i)], parameter_count);
  const Index wave = kWaveModelsPerThread * comm.max(static_cast<Index>(omp_get_max_threads())) * comm.size();
  Index gathered = 0;
  for (Index first = 0; first < todo; first += wave) {
    // This rank's contiguous share of the wave's models, one a thread at a time.
    const RowShard share = comm.shard(std::min(wave, todo - first));
    std::vector<VectorXd> trained(static_cast<std::size_t>(share.size()));
    FirstException failure;
    detail::for_each_block(share.size(), 1, [&](Index k, Index) {
      const Index model = missing[static_cast<std::size_t>(first + share.begin + k)];
      try {
        trained[static_cast<std::size_t>(k)] = train(with_candidate(fixed, candidates, model), model);
      } catch (...) {
        failure.capture();
      }
      bar.advance();
    });
    stop_all_if_any_failed(failure.first(), comm, kept.save, [gathered](const std::string& messages) {
      return "learned attack: training a shadow model failed on another rank (" + messages + "); rank 0 had " +
             "gathered " + std::to_string(gathered) + " shadow models, kept by --shadow-models if given";
    });
    // Rank 0 gathers the wave in model order (the shares are contiguous, in rank order), each
    // model as its parameter count and its parameters.
    Index size = 0;
    for (const VectorXd& w : trained) size += 1 + w.size();
    VectorXd packed(size);
    Index at = 0;
    for (const VectorXd& w : trained) {
      packed(at) = static_cast<double>(w.size());
      packed.segment(at + 1, w.size()) = w;
      at += 1 + w.size();
    }
    const VectorXd all = comm.gather(packed);
    if (!root) continue;
    bar.advance(std::min(wave, todo - first) - share.size());
    at = 0;
    for (Index k = first; k < std::min(first + wave, todo); ++k) {
      const Index model = missing[static_cast<std::size_t>(k)];
      const auto length = static_cast<Index>(all(at));
      VectorXd w = all.segment(at + 1, length);
      at += 1 + length;
      check_shadow_model(model, w, parameter_count);
      if (kept.add) kept.add(model, w);
      parameters[static_cast<std::size_t>(model)] = std::move(w);
      ++gathered;
    }
  }
  bar.finish();
  if (!root) return {};
  RowMatrix rows(count, parameter_count.count);
  for (Index i = 0; i < count; ++i) rows.row(i) = parameters[static_cast<std::size_t>(i)].transpose();
  return rows;
}

LearnedReconstructionResult run_learned_reconstruction(const Dataset& fixed, const Dataset& candidates,
                                                       const ShadowTrainer& train,
                                                       const LearnedReconstructionOptions& options, bool progress,
                                                       const KeptShadowModels& kept, const Communicator& comm) {
  const Index num_classes = check_attack_inputs(fixed, candidates, options);
  const Index m = options.train_shadow_models, targets = options.target_shadow_models;
  LearnedReconstructionResult result;
  result.num_classes = num_classes;
  result.features = fixed.d();
  result.has_ssim = fixed.image.has_value() && fixed.image->height >= 7 && fixed.image->width >= 7;
  const auto start = std::chrono::steady_clock::now();
  const RowMatrix parameters = train_shadow_models(fixed, candidates, m + targets, train, progress, kept, comm);
  const double shadow_seconds = seconds_since(start);
  if (!comm.is_root()) {  // the attacker is fitted at rank 0, on every shadow model
    result.shadow_seconds = shadow_seconds;
    return result;
  }
  result = attack_shadow_models(parameters, fixed, candidates, options, progress);
  result.shadow_seconds = shadow_seconds;
  return result;
}

LearnedReconstructionResult attack_shadow_models(const RowMatrix& parameters, const Dataset& fixed,
                                                 const Dataset& candidates, const LearnedReconstructionOptions& options,
                                                 bool progress) {
  const Index num_classes = check_attack_inputs(fixed, candidates, options);
  const Index m = options.train_shadow_models, targets = options.target_shadow_models;
  if (parameters.rows() != m + targets)
    throw std::logic_error("attack_shadow_models: " + std::to_string(parameters.rows()) + " shadow models for " +
                           std::to_string(m) + " + " + std::to_string(targets));
  LearnedReconstructionResult result;
  result.num_classes = num_classes;
  result.features = fixed.d();
  result.has_ssim = fixed.image.has_value() && fixed.image->height >= 7 && fixed.image->width >= 7;
  result.parameter_count = parameters.cols();
  check_attacker_memory(options, parameters.cols(), num_classes, fixed.d());

  const auto start = std::chrono::steady_clock::now();
  const RowMatrix standardised = standardise(parameters, m, options.clip_inputs);
  const VectorXd labels = candidates.y.head(m + targets);
  const Attacker attacker =
      fit_attacker(standardised.topRows(m), labels.head(m), candidates.X.topRows(m), num_classes, options, progress);
  const RowMatrix reconstructions = attacker.predict(standardised.middleRows(m, targets), labels.tail(targets));
  result.attacker_seconds = seconds_since(start);

  result.class_means.assign(static_cast<std::size_t>(num_classes), VectorXd::Zero(fixed.d()));
  std::vector<Index> counts(static_cast<std::size_t>(num_classes), 0);
  for (Index i = 0; i < m; ++i) {
    const auto k = static_cast<std::size_t>(labels(i));
    result.class_means[k] += candidates.X.row(i).transpose();
    ++counts[k];
  }
  for (std::size_t k = 0; k < counts.size(); ++k)
    if (counts[k] > 0) result.class_means[k] /= static_cast<double>(counts[k]);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (Index t = 0; t < targets; ++t) {
    TargetReconstruction target;
    target.candidate = m + t;
    target.label = labels(m + t);
    target.reconstruction = reconstructions.row(t).transpose();
    const VectorXd truth = candidates.X.row(m + t).transpose();
    const VectorXd& baseline = result.class_means[static_cast<std::size_t>(target.label)];
    target.mse = mse(target.reconstruction, truth);
    target.baseline_mse = mse(baseline, truth);
    target.ssim = result.has_ssim ? ssim(target.reconstruction, truth, *fixed.image) : nan;
    target.baseline_ssim = result.has_ssim ? ssim(baseline, truth, *fixed.image) : nan;
    result.targets.push_back(std::move(target));
  }
  return result;
}

}  // namespace filkit
