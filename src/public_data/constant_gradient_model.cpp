// fim's constant gradient models (constant_gradient_model.hpp).
#include "filkit/public_data/constant_gradient_model.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace filkit {

namespace {

/// jax's glorot_normal for a (fan_in x fan_out) kernel: a normal truncated to +-2 standard
/// deviations, scaled so that the variance is 2 / (fan_in + fan_out).
double glorot_normal(std::mt19937_64& rng, Index fan_in, Index fan_out) {
  const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)) / 0.87962566103423978;
  std::normal_distribution<double> unit;
  for (;;) {
    const double z = unit(rng);
    if (std::abs(z) <= 2.0) return stddev * z;
  }
}

}  // namespace

ConstantGradientModel::ConstantGradientModel(GradientModelKind kind, Index released, const std::vector<Index>& hidden,
                                             std::uint64_t seed)
    : kind_(kind), m_(released) {
  if (kind == GradientModelKind::kConditional)
    throw std::invalid_argument("ConstantGradientModel: gradient_model = conditional is not a constant model");
  if (released < 1) throw std::invalid_argument("ConstantGradientModel: no released coordinate");
  if (kind == GradientModelKind::kVector) {
    phi_ = VectorXd::Zero(m_);
  } else {
    if (hidden.size() < 2)
      throw std::invalid_argument("gradient_hidden: the constant gradient model needs at least two widths");
    width_in_ = hidden[hidden.size() - 2];
    width_ = hidden.back();
    if (width_in_ < 1 || width_ < 1) throw std::invalid_argument("gradient_hidden: widths must be >= 1");
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> bias(0.0, 1e-2);
    phi_ = VectorXd::Zero(width_in_ + width_ * width_in_ + width_ + m_ * width_ + m_);
    Index k = width_in_;  // beta = 0 (the normalisation's shift starts at zero)
    for (Index i = 0; i < width_ * width_in_; ++i) phi_(k++) = glorot_normal(rng, width_in_, width_);
    for (Index i = 0; i < width_; ++i) phi_(k++) = bias(rng);
    for (Index i = 0; i < m_ * width_; ++i) phi_(k++) = glorot_normal(rng, width_, m_);
    for (Index i = 0; i < m_; ++i) phi_(k++) = bias(rng);
  }
  first_moment_ = VectorXd::Zero(phi_.size());
  second_moment_ = VectorXd::Zero(phi_.size());
  refresh();
}

void ConstantGradientModel::set_parameters(const VectorXd& phi) {
  if (phi.size() != phi_.size())
    throw std::invalid_argument("ConstantGradientModel::set_parameters: " + std::to_string(phi.size()) +
                                " values for " + std::to_string(phi_.size()) + " parameters");
  phi_ = phi;
  refresh();
}

void ConstantGradientModel::restore(const State& state) {
  for (const VectorXd* v : {&state.parameters, &state.first_moment, &state.second_moment})
    if (v->size() != phi_.size())
      throw std::invalid_argument("ConstantGradientModel::restore: " + std::to_string(v->size()) + " values for " +
                                  std::to_string(phi_.size()) + " parameters");
  if (state.updates < 0) throw std::invalid_argument("ConstantGradientModel::restore: a negative update count");
  first_moment_ = state.first_moment;
  second_moment_ = state.second_moment;
  updates_ = state.updates;
  set_parameters(state.parameters);
}

void ConstantGradientModel::refresh() {
  if (kind_ == GradientModelKind::kVector) {
    c_ = phi_;
    return;
  }
  const auto beta = phi_.segment(0, width_in_);
  const Eigen::Map<const RowMatrix> W(phi_.data() + width_in_, width_, width_in_);
  const auto b = phi_.segment(width_in_ + width_ * width_in_, width_);
  const Index output = width_in_ + width_ * width_in_ + width_;
  const Eigen::Map<const RowMatrix> Wo(phi_.data() + output, m_, width_);
  const auto bo = phi_.segment(output + m_ * width_, m_);
  preactivation_ = W * beta + b;
  hidden_ = preactivation_.unaryExpr([](double t) { return gelu(t); });
  c_ = Wo * hidden_ + bo;
}

VectorXd ConstantGradientModel::parameter_gradient(const VectorXd& gc) const {
  if (gc.size() != m_)
    throw std::invalid_argument("ConstantGradientModel::parameter_gradient: " + std::to_string(gc.size()) +
                                " values for " + std::to_string(m_) + " released coordinates");
  if (kind_ == GradientModelKind::kVector) return gc;
  VectorXd g(phi_.size());
  fill_parameter_gradient(gc, g, true);
  return g;
}

void ConstantGradientModel::fill_parameter_gradient(const VectorXd& gc, VectorXd& g, bool output_layer) const {
  const Index output = output_offset();
  const Eigen::Map<const RowMatrix> W(phi_.data() + width_in_, width_, width_in_);
  const Eigen::Map<const RowMatrix> Wo(phi_.data() + output, m_, width_);
  // c = Wo h + bo, h = gelu(a), a = W beta + b.
  if (output_layer) Eigen::Map<RowMatrix>(g.data() + output, m_, width_) = gc * hidden_.transpose();
  g.segment(output + m_ * width_, m_) = gc;
  const VectorXd ga = (Wo.transpose() * gc).cwiseProduct(preactivation_.unaryExpr([](double t) { return gelu_derivative(t); }));
  Eigen::Map<RowMatrix>(g.data() + width_in_, width_, width_in_) = ga * phi_.segment(0, width_in_).transpose();
  g.segment(width_in_ + width_ * width_in_, width_) = ga;
  g.segment(0, width_in_) = W.transpose() * ga;
}

void ConstantGradientModel::restart() { updates_ = 0; }

/// The thesis' Adam (jax's optimizers.adam defaults) with the coupled L2 decay, on a block of
/// parameters. Written over Eigen arrays so that the square root and divisions are vectorised (a
/// scalar std::sqrt is not, as it may set errno); every operation is IEEE-exact elementwise, so the
/// bits are those of the scalar update in any block split.
struct ConstantGradientModel::AdamStep {
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
  // jax's x - step m^ / (sqrt(v^) + eps), m^ = m / (1 - b1^i), v^ = v / (1 - b2^i), written with
  // the corrections folded into two scalars: one division and one square root an entry (three
  // divisions before; the pass is half arithmetic at AVX-512 widths), the same value to rounding.
  double weight_decay, scaled_step, inverse_root_correction2;
  /// `gradient`: an array expression of the block's `length` entries; the state starts at `offset`.
  template <typename Gradient>
  void operator()(const Gradient& gradient, ConstantGradientModel& model, Index offset, Index length) const {
    Eigen::Map<Eigen::ArrayXd> phi(model.phi_.data() + offset, length), m(model.first_moment_.data() + offset, length),
        v(model.second_moment_.data() + offset, length);
    // g = gradient + weight_decay * phi is formed twice rather than stored: it needs no buffer, and
    // both moments read phi before it changes.
    m = kBeta1 * m + (1.0 - kBeta1) * (gradient + weight_decay * phi);
    v = kBeta2 * v + (1.0 - kBeta2) * (gradient + weight_decay * phi).square();
    phi -= scaled_step * m / (v.sqrt() * inverse_root_correction2 + kEpsilon);
  }
};

ConstantGradientModel::AdamStep ConstantGradientModel::next_adam_step(double step_size, double weight_decay) {
  const double count = static_cast<double>(++updates_ + 1);  // the thesis passes i = 1, 2, ...; Adam uses i + 1
  const double correction1 = 1.0 - std::pow(AdamStep::kBeta1, count), correction2 = 1.0 - std::pow(AdamStep::kBeta2, count);
  return {weight_decay, step_size / correction1, 1.0 / std::sqrt(correction2)};
}

namespace {
constexpr Index kParallelParameters = 65536;  // below this an update is not worth a parallel region
constexpr Index kAdamBlock = 4096;            // entries of one thread's block of an update
}  // namespace

void ConstantGradientModel::update(const VectorXd& objective_gradient, double step_size, double weight_decay) {
  if (objective_gradient.size() != phi_.size())
    throw std::invalid_argument("ConstantGradientModel::update: " + std::to_string(objective_gradient.size()) +
                                " gradient values for " + std::to_string(phi_.size()) + " parameters");
  const AdamStep step = next_adam_step(step_size, weight_decay);
  // One pass over the ~10^6 parameters (the output layer's) in blocks: the update is memory-bound,
  // and elementwise, so any thread count gives the same bits.
  const Index size = phi_.size(), blocks = (size + kAdamBlock - 1) / kAdamBlock;
#pragma omp parallel for schedule(static) if (size > kParallelParameters)
  for (Index b = 0; b < blocks; ++b) {
    const Index begin = b * kAdamBlock, length = std::min(kAdamBlock, size - begin);
    step(objective_gradient.segment(begin, length).array(), *this, begin, length);
  }
  refresh();
}

void ConstantGradientModel::update_from_perturbation_gradient(const VectorXd& gc, double step_size, double weight_decay) {
  if (gc.size() != m_)
    throw std::invalid_argument("ConstantGradientModel::update_from_perturbation_gradient: " + std::to_string(gc.size()) +
                                " values for " + std::to_string(m_) + " released coordinates");
  if (kind_ == GradientModelKind::kVector) return update(gc, step_size, weight_decay);
  VectorXd g(phi_.size());  // the output block's pages are never touched
  fill_parameter_gradient(gc, g, false);
  const AdamStep step = next_adam_step(step_size, weight_decay);
  const Index output = output_offset(), after = output + m_ * width_, size = phi_.size(), width = width_;
  const auto hidden = hidden_.array();
#pragma omp parallel if (size > kParallelParameters)
  {
#pragma omp single nowait
    step(g.head(output).array(), *this, 0, output);
#pragma omp for schedule(static) nowait
    for (Index r = 0; r < m_; ++r) step(gc(r) * hidden, *this, output + r * width, width);
#pragma omp single
    step(g.tail(size - after).array(), *this, after, size - after);
  }
  refresh();
}

}  // namespace filkit
