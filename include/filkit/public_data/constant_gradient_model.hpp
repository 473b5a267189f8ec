// fim's constant gradient models (gradient_model.hpp, GradientModelKind::kConstant and kVector;
// docs/mathematics.md, section 11.3): the learned perturbation c added to every example's released
// gradient, its parameterisation and the thesis' optimiser.
//
// Why a constant: the thesis' code (Edmunds 2024; its repository's trainer.py and utils.py) runs
// its gradient model on a batch of one example (every input is expanded to a batch of one and the
// gradient vmapped over examples), and the model's layers after the concatenation of its branches
// start with a batch normalisation over axis 0. Over one example the normalised value is 0, so the
// layer outputs its shift beta whatever the input: the model is
//   c(phi) = W_o gelu(W beta + b) + b_o,
// beta the shift of the last normalisation (the width of the last-but-one hidden layer), W, b the
// last hidden layer and W_o, b_o the output layer onto the released coordinates. Every layer
// before the last normalisation gets a zero gradient, so only these are parameters here.
// Initialisation as the thesis' (jax stax): beta = 0, W and W_o Glorot normal (truncated at two
// standard deviations), b and b_o normal with standard deviation 1e-2.
//
// c depends only on public data and on the released parameters, so the DP guarantee and the
// per-example accounting of training.hpp hold as they are: r_b = clip(M g_b + c) depends on z_b
// only through g_b, and J_b = d r_b / d x_b is what the accountant adds.
#pragma once

#include "filkit/base/types.hpp"
#include "filkit/networks/gradient_model.hpp"

#include <cstdint>
#include <vector>

namespace filkit {

class ConstantGradientModel {
 public:
  /// `released` = m coordinates; hidden: the thesis' widths (kConstant uses the last two). The
  /// parameters are drawn from `seed` (kVector: c = 0). `precision`: the arithmetic and storage of
  /// phi, Adam's moments and c(phi); float32 (the thesis' jax) starts from the float64 draws
  /// rounded, and halves the memory traffic of the update, which is memory-bound.
  ConstantGradientModel(GradientModelKind kind, Index released, const std::vector<Index>& hidden, std::uint64_t seed,
                        Precision precision = Precision::kFloat64);

  GradientModelKind kind() const { return kind_; }
  Precision precision() const { return precision_; }
  /// c(phi) (m), widened to float64 in float32.
  const VectorXd& perturbation() const { return c_; }
  /// phi, flattened: beta, W (row-major), b, W_o (row-major), b_o; or c for kVector. Widened to
  /// float64 in float32.
  VectorXd parameters() const;
  /// In float32, `phi` is rounded to it.
  void set_parameters(const VectorXd& phi);
  /// d L / d phi from d L / d c (the chain rule through c(phi)).
  VectorXd parameter_gradient(const VectorXd& perturbation_gradient) const;

  /// The thesis' Adam on phi for one private step's training: restart() before the step's first
  /// update (the count restarts, the moments carry over); each update feeds g + weight_decay phi to
  /// Adam with the bias corrections of count i + 1 at its i-th update (jax's optimizers.adam as the
  /// thesis' code calls it, i from 1).
  void restart();
  void update(const VectorXd& objective_gradient, double step_size, double weight_decay);

  /// Everything an update depends on (a resume file keeps it between private steps); float32 state
  /// is widened exactly, so restore() of it in float32 gives the same model bit for bit.
  struct State {
    VectorXd parameters, first_moment, second_moment;
    Index updates = 0;
  };
  State state() const;
  /// Throws a DataError when a vector's size is not this model's parameter count or
  /// `updates` is negative.
  void restore(const State& state);
  /// update(parameter_gradient(perturbation_gradient), ...) to the last bit, without forming the
  /// output layer's m x width gradient (its entries dL/dc_r h_j are made where Adam uses them: the
  /// ~10^6-parameter pass is memory-bound, and this saves a write and a read of it).
  void update_from_perturbation_gradient(const VectorXd& perturbation_gradient, double step_size, double weight_decay);

 private:
  // phi, Adam's moments and the last hidden layer at phi (its preactivation W beta + b and the
  // GELU of it), in the model's precision; the member of the other precision stays empty.
  template <typename Scalar>
  struct Storage {
    using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
    Vector phi, first_moment, second_moment, preactivation, hidden;
  };
  // Calls f(float64_) or f(float32_), the model's precision's.
  template <typename F>
  void visit_storage(F&& f);
  template <typename F>
  void visit_storage(F&& f) const;

  void refresh();  // the hidden layer and c from phi
  Index parameter_count() const;
  Index output_offset() const { return width_in_ + width_ * width_in_ + width_; }  // W_o's first entry in phi
  Index output_bias_offset() const { return output_offset() + m_ * width_; }       // b_o's first entry
  struct AdamStep;  // one update's constants (constant_gradient_model.cpp)
  AdamStep next_adam_step(double step_size, double weight_decay);  // counts the update

  GradientModelKind kind_;
  Precision precision_;
  Index m_ = 0, width_in_ = 0, width_ = 0;  // beta's width, the last hidden width
  Storage<double> float64_;
  Storage<float> float32_;
  VectorXd c_;
  Index updates_ = 0;  // since restart()
};

}  // namespace filkit
