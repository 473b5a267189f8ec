// fim's constant gradient models (constant_gradient_model.hpp).
#include "filkit/public_data/constant_gradient_model.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/initialisers.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"

#include "filkit/base/errors.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace filkit {

namespace {

constexpr Index kParallelParameters = 65536;  // below this an update is not worth a parallel region
constexpr Index kAdamBlock = 4096;            // entries of one thread's block of an update
constexpr Index kRowBlock = 64;               // output rows of one block of W_o^T dL/dc's sum

template <typename Scalar>
using RowMajor = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The last hidden layer at phi: a = W beta + b and h = gelu(a).
template <class Storage>
void refresh_hidden(Storage& s, Index width_in, Index width) {
  using Scalar = typename Storage::Vector::Scalar;
  const Eigen::Map<const RowMajor<Scalar>> W(s.phi.data() + width_in, width, width_in);
  s.preactivation = W * s.phi.head(width_in) + s.phi.segment(width_in + width * width_in, width);
  s.hidden = s.preactivation.unaryExpr([](Scalar t) { return static_cast<Scalar>(gelu(t)); });
}

/// c_r = W_o[r] . h + b_o[r]: the one formula of refresh() and of the fused update, so that the
/// two agree bit for bit.
template <class Storage>
double output_entry(const Storage& s, Index output, Index width, Index bias, Index r) {
  return static_cast<double>(s.phi.segment(output + r * width, width).dot(s.hidden) + s.phi(bias + r));
}

/// Row block k of W_o (rows k kRowBlock onwards, kRowBlock of them but the last): its part
/// sum_r dL/dc_r W_o[r] of W_o^T dL/dc into `sum` (a row vector), calling after_row(r) once row r's
/// term is read (the fused update changes the row there, while it is in L1). The blocks do not
/// depend on the thread count, and weighted_rows() adds their parts in block order: one
/// definition of W_o^T dL/dc for parameter_gradient() and the fused update, the same bits in both.
template <class Storage, class Sum, class AfterRow>
void output_block(Storage& s, const typename std::decay_t<Storage>::Vector& gc, Index output, Index width, Index k,
                  Sum&& sum, AfterRow&& after_row) {
  sum.setZero();
  for (Index r = k * kRowBlock; r < std::min(gc.size(), (k + 1) * kRowBlock); ++r) {
    sum += gc(r) * s.phi.segment(output + r * width, width).transpose();
    after_row(r);
  }
}

/// W_o^T dL/dc from the row blocks' parts (row k of `parts`), in block order.
template <typename Scalar>
Eigen::Matrix<Scalar, Eigen::Dynamic, 1> weighted_rows(const RowMajor<Scalar>& parts) {
  Eigen::Matrix<Scalar, Eigen::Dynamic, 1> weighted = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>::Zero(parts.cols());
  for (Index k = 0; k < parts.rows(); ++k) weighted += parts.row(k).transpose();
  return weighted;
}

/// The head's part of dL/dphi (beta, W and b: the entries before W_o) from W_o^T dL/dc, at phi.
template <class Storage>
void fill_head_gradient(const Storage& s, const typename Storage::Vector& weighted, typename Storage::Vector& g,
                        Index width_in, Index width) {
  using Scalar = typename Storage::Vector::Scalar;
  const Eigen::Map<const RowMajor<Scalar>> W(s.phi.data() + width_in, width, width_in);
  const typename Storage::Vector ga = weighted.cwiseProduct(
      s.preactivation.unaryExpr([](Scalar t) { return static_cast<Scalar>(gelu_derivative(t)); }));
  Eigen::Map<RowMajor<Scalar>>(g.data() + width_in, width, width_in) = ga * s.phi.head(width_in).transpose();
  g.segment(width_in + width * width_in, width) = ga;
  g.head(width_in) = W.transpose() * ga;
}

}  // namespace

template <typename F>
void ConstantGradientModel::visit_storage(F&& f) {
  if (precision_ == Precision::kFloat32) f(float32_);
  else f(float64_);
}

template <typename F>
void ConstantGradientModel::visit_storage(F&& f) const {
  if (precision_ == Precision::kFloat32) f(float32_);
  else f(float64_);
}

ConstantGradientModel::ConstantGradientModel(GradientModelKind kind, Index released, const std::vector<Index>& hidden,
                                             std::uint64_t seed, Precision precision)
    : kind_(kind), precision_(precision), m_(released) {
  if (kind == GradientModelKind::kConditional)
    throw DataError("ConstantGradientModel: gradient_model = conditional is not a constant model");
  if (released < 1) throw DataError("ConstantGradientModel: no released coordinate");
  VectorXd phi;
  if (kind == GradientModelKind::kVector) {
    phi = VectorXd::Zero(m_);
  } else {
    if (hidden.size() < 2) option_error("gradient_hidden", "the constant gradient model needs at least two widths");
    width_in_ = hidden[hidden.size() - 2];
    width_ = hidden.back();
    if (width_in_ < 1 || width_ < 1) option_error("gradient_hidden", "widths must be >= 1");
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> bias(0.0, 1e-2);
    phi = VectorXd::Zero(width_in_ + width_ * width_in_ + width_ + m_ * width_ + m_);
    Index k = width_in_;  // beta = 0 (the normalisation's shift starts at zero)
    for (Index i = 0; i < width_ * width_in_; ++i) phi(k++) = glorot_normal(rng, width_in_, width_);
    for (Index i = 0; i < width_; ++i) phi(k++) = bias(rng);
    for (Index i = 0; i < m_ * width_; ++i) phi(k++) = glorot_normal(rng, width_, m_);
    for (Index i = 0; i < m_; ++i) phi(k++) = bias(rng);
  }
  visit_storage([&](auto& s) {
    using Vector = typename std::decay_t<decltype(s)>::Vector;
    s.phi = phi.cast<typename Vector::Scalar>();
    s.first_moment = Vector::Zero(phi.size());
    s.second_moment = Vector::Zero(phi.size());
  });
  refresh();
}

Index ConstantGradientModel::parameter_count() const {
  return precision_ == Precision::kFloat32 ? float32_.phi.size() : float64_.phi.size();
}

VectorXd ConstantGradientModel::parameters() const {
  VectorXd phi;
  visit_storage([&](const auto& s) { phi = s.phi.template cast<double>(); });
  return phi;
}

void ConstantGradientModel::set_parameters(const VectorXd& phi) {
  if (phi.size() != parameter_count())
    throw DataError("ConstantGradientModel::set_parameters: " + std::to_string(phi.size()) + " values for " +
                    std::to_string(parameter_count()) + " parameters");
  visit_storage([&](auto& s) { s.phi = phi.cast<typename std::decay_t<decltype(s)>::Vector::Scalar>(); });
  refresh();
}

ConstantGradientModel::State ConstantGradientModel::state() const {
  State state;
  visit_storage([&](const auto& s) {
    state = {s.phi.template cast<double>(), s.first_moment.template cast<double>(),
             s.second_moment.template cast<double>(), updates_};
  });
  return state;
}

void ConstantGradientModel::restore(const State& state) {
  for (const VectorXd* v : {&state.parameters, &state.first_moment, &state.second_moment})
    if (v->size() != parameter_count())
      throw DataError("ConstantGradientModel::restore: " + std::to_string(v->size()) + " values for " +
                      std::to_string(parameter_count()) + " parameters");
  if (state.updates < 0) throw DataError("ConstantGradientModel::restore: a negative update count");
  visit_storage([&](auto& s) {
    using Scalar = typename std::decay_t<decltype(s)>::Vector::Scalar;
    s.first_moment = state.first_moment.cast<Scalar>();
    s.second_moment = state.second_moment.cast<Scalar>();
  });
  updates_ = state.updates;
  set_parameters(state.parameters);
}

void ConstantGradientModel::refresh() {
  visit_storage([&](auto& s) {
    if (kind_ == GradientModelKind::kVector) {
      c_ = s.phi.template cast<double>();
      return;
    }
    refresh_hidden(s, width_in_, width_);
    c_.resize(m_);
    const Index output = output_offset(), bias = output_bias_offset();
#pragma omp parallel for schedule(static) if (parameter_count() > kParallelParameters)
    for (Index r = 0; r < m_; ++r) c_(r) = output_entry(s, output, width_, bias, r);
  });
}

VectorXd ConstantGradientModel::parameter_gradient(const VectorXd& gc) const {
  if (gc.size() != m_)
    throw DataError("ConstantGradientModel::parameter_gradient: " + std::to_string(gc.size()) + " values for " +
                    std::to_string(m_) + " released coordinates");
  if (kind_ == GradientModelKind::kVector) return gc;
  VectorXd g;
  visit_storage([&](const auto& s) {
    using Vector = typename std::decay_t<decltype(s)>::Vector;
    using Scalar = typename Vector::Scalar;
    const Vector gcs = gc.cast<Scalar>();
    const Index output = output_offset(), blocks = (m_ + kRowBlock - 1) / kRowBlock;
    Vector out(parameter_count());
    Eigen::Map<RowMajor<Scalar>>(out.data() + output, m_, width_) = gcs * s.hidden.transpose();
    out.segment(output_bias_offset(), m_) = gcs;
    RowMajor<Scalar> parts(blocks, width_);
    for (Index k = 0; k < blocks; ++k) output_block(s, gcs, output, width_, k, parts.row(k), [](Index) {});
    fill_head_gradient(s, weighted_rows(parts), out, width_in_, width_);
    g = out.template cast<double>();
  });
  return g;
}

void ConstantGradientModel::restart() { updates_ = 0; }

/// The thesis' Adam (jax's optimizers.adam defaults) with the coupled L2 decay, on a block of
/// parameters, in the storage's precision. Written over Eigen arrays so that the square root and
/// divisions are vectorised (a scalar std::sqrt is not, as it may set errno); every operation is
/// IEEE-exact elementwise, so the bits are those of the scalar update in any block split.
struct ConstantGradientModel::AdamStep {
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
  // jax's x - step m^ / (sqrt(v^) + eps), m^ = m / (1 - b1^i), v^ = v / (1 - b2^i), written with
  // the corrections folded into two scalars: one division and one square root an entry (three
  // divisions before; the pass is half arithmetic at AVX-512 widths), the same value to rounding.
  double weight_decay, scaled_step, inverse_root_correction2;
  /// `gradient`: an array expression of the block's `length` entries; the state starts at `offset`.
  template <class Storage, typename Gradient>
  void operator()(const Gradient& gradient, Storage& s, Index offset, Index length) const {
    using Scalar = typename Storage::Vector::Scalar;
    using Array = Eigen::Array<Scalar, Eigen::Dynamic, 1>;
    Eigen::Map<Array> phi(s.phi.data() + offset, length), m(s.first_moment.data() + offset, length),
        v(s.second_moment.data() + offset, length);
    const Scalar b1 = kBeta1, b2 = kBeta2, eps = kEpsilon, decay = static_cast<Scalar>(weight_decay),
                 step = static_cast<Scalar>(scaled_step), root = static_cast<Scalar>(inverse_root_correction2);
    // g = gradient + decay * phi is formed twice rather than stored: it needs no buffer, and both
    // moments read phi before it changes.
    m = b1 * m + (Scalar(1) - b1) * (gradient + decay * phi);
    v = b2 * v + (Scalar(1) - b2) * (gradient + decay * phi).square();
    phi -= step * m / (v.sqrt() * root + eps);
  }
};

ConstantGradientModel::AdamStep ConstantGradientModel::next_adam_step(double step_size, double weight_decay) {
  const double count = static_cast<double>(++updates_ + 1);  // the thesis passes i = 1, 2, ...; Adam uses i + 1
  const double correction1 = 1.0 - std::pow(AdamStep::kBeta1, count),
               correction2 = 1.0 - std::pow(AdamStep::kBeta2, count);
  return {weight_decay, step_size / correction1, 1.0 / std::sqrt(correction2)};
}

void ConstantGradientModel::update(const VectorXd& objective_gradient, double step_size, double weight_decay) {
  if (objective_gradient.size() != parameter_count())
    throw DataError("ConstantGradientModel::update: " + std::to_string(objective_gradient.size()) +
                    " gradient values for " + std::to_string(parameter_count()) + " parameters");
  const AdamStep step = next_adam_step(step_size, weight_decay);
  // One pass over the ~10^6 parameters (the output layer's) in blocks: the update is memory-bound,
  // and elementwise, so any thread count gives the same bits.
  const Index size = parameter_count(), blocks = (size + kAdamBlock - 1) / kAdamBlock;
  visit_storage([&](auto& s) {
    using Scalar = typename std::decay_t<decltype(s)>::Vector::Scalar;
#pragma omp parallel for schedule(static) if (size > kParallelParameters)
    for (Index b = 0; b < blocks; ++b) {
      const Index begin = b * kAdamBlock, length = std::min(kAdamBlock, size - begin);
      step(objective_gradient.segment(begin, length).array().template cast<Scalar>(), s, begin, length);
    }
  });
  refresh();
}

void ConstantGradientModel::update_from_perturbation_gradient(const VectorXd& gc, double step_size,
                                                              double weight_decay) {
  if (gc.size() != m_)
    throw DataError("ConstantGradientModel::update_from_perturbation_gradient: " + std::to_string(gc.size()) +
                    " values for " + std::to_string(m_) + " released coordinates");
  if (kind_ == GradientModelKind::kVector) return update(gc, step_size, weight_decay);
  const AdamStep step = next_adam_step(step_size, weight_decay);
  const Index output = output_offset(), bias = output_bias_offset(), size = parameter_count(), width = width_;
  const Index row_blocks = (m_ + kRowBlock - 1) / kRowBlock, head_blocks = (output + kAdamBlock - 1) / kAdamBlock;
  visit_storage([&](auto& s) {
    using Vector = typename std::decay_t<decltype(s)>::Vector;
    using Scalar = typename Vector::Scalar;
    const Vector gcs = gc.cast<Scalar>();
    RowMajor<Scalar> parts(row_blocks, width);  // row k: block k's part of W_o^T dL/dc
    Vector head(output);                        // the head's gradient
    const auto hidden = s.hidden.array();       // h at phi, until the rows are done
#pragma omp parallel if (size > kParallelParameters)
    {
      // The output layer, the ~10^6-parameter pass (memory-bound): each row's term of W_o^T dL/dc
      // is read just before the row changes, and dL/dW_o[r] = dL/dc_r h is made where Adam uses it.
#pragma omp for schedule(static)
      for (Index k = 0; k < row_blocks; ++k)
        output_block(s, gcs, output, width, k, parts.row(k),
                     [&](Index r) { step(gcs(r) * hidden, s, output + r * width, width); });
#pragma omp single
      fill_head_gradient(s, weighted_rows(parts), head, width_in_, width);
      // The head, and b_o (dL/db_o = dL/dc).
#pragma omp for schedule(static)
      for (Index k = 0; k <= head_blocks; ++k) {
        if (k == head_blocks) {
          step(gcs.array(), s, bias, m_);
        } else {
          const Index begin = k * kAdamBlock, length = std::min(kAdamBlock, output - begin);
          step(head.segment(begin, length).array(), s, begin, length);
        }
      }
#pragma omp single
      refresh_hidden(s, width_in_, width);
      // c at the new phi while the threads are up: refresh() without its single-threaded tail.
#pragma omp for schedule(static)
      for (Index r = 0; r < m_; ++r) c_(r) = output_entry(s, output, width, bias, r);
    }
  });
}

}  // namespace filkit
