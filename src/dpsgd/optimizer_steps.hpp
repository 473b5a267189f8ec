// What every trainer of the dpsgd layer shares, written once: a uniform batch without replacement
// (a partial Fisher-Yates shuffle of a kept permutation), a slice of a shuffled epoch, and one step of
// the private phase's optimizer (sgd with momentum, or Adam: base/adam_step.hpp). DP-SGD's trainer
// (trainer.hpp) and non-private training (public_data_training.cpp: pre-training and the sgd
// baseline) draw and step through these, so they cannot drift apart.
#pragma once

#include "filkit/base/types.hpp"
#include "filkit/dpsgd/training.hpp"
#include "base/adam_step.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

namespace filkit::detail {

/// Moves a uniformly random B-subset of `order` to its front (the rest stays a permutation).
inline void shuffle_batch_to_front(std::vector<Index>& order, Index batch_size, std::mt19937_64& generator) {
  const Index n = static_cast<Index>(order.size());
  for (Index j = 0; j < batch_size; ++j) {
    std::uniform_int_distribution<Index> pick(j, n - 1);
    std::swap(order[static_cast<std::size_t>(j)], order[static_cast<std::size_t>(pick(generator))]);
  }
}

/// Step t's batch (t = 1, 2, ...) of epochs of ceil(n / B) consecutive slices of a permutation of
/// `order` (all n rows), the last slice short: the permutation is redrawn at each epoch's first step,
/// so every row is in exactly one batch of an epoch (the thesis' get_datastream). Increasing order.
inline std::vector<Index> epoch_batch(std::vector<Index>& order, Index batch_size, Index t,
                                      std::mt19937_64& generator) {
  const Index n = static_cast<Index>(order.size());
  const Index per_epoch = (n + batch_size - 1) / batch_size;
  const Index slice = (t - 1) % per_epoch;
  if (slice == 0) shuffle_batch_to_front(order, n, generator);
  const Index first = slice * batch_size, last = std::min(n, first + batch_size);
  std::vector<Index> batch(order.begin() + first, order.begin() + last);
  std::sort(batch.begin(), batch.end());
  return batch;
}

/// The step of optimizer_step in Real's arithmetic.
template <class Real>
void optimizer_step_in(const DpSgdOptions& o, Eigen::Matrix<Real, Eigen::Dynamic, 1>& w,
                       const Eigen::Matrix<Real, Eigen::Dynamic, 1>& g, Eigen::Matrix<Real, Eigen::Dynamic, 1>& m,
                       Eigen::Matrix<Real, Eigen::Dynamic, 1>& v, Index& adam_steps) {
  if (o.optimizer == Optimizer::kSgd) {
    m = static_cast<Real>(o.momentum) * m + g;
    w -= static_cast<Real>(o.step_size) * m;
    return;
  }
  ++adam_steps;
  adam_update(w, g, m, v, adam_steps + o.adam_bias_correction_offset, o.step_size, o.adam_beta1, o.adam_beta2,
              o.adam_epsilon);
}

/// w (and any vector the optimiser keeps) rounded to float: the state of a float32 run
/// (DpSgdOptions::precision), held in double exactly.
inline void round_to_float(VectorXd& w) { w = w.cast<float>().cast<double>(); }

/// One step of `o.optimizer` on w with gradient g (weight decay already added): sgd with momentum
/// (m the velocity; v and adam_steps unused) or Adam with o's moment decays and epsilon, its bias
/// corrections at the count adam_steps + o.adam_bias_correction_offset. In o.precision: float32
/// rounds g to float and steps in float's arithmetic, w, m and v (float already, as round_to_float
/// leaves them) staying float.
inline void optimizer_step(const DpSgdOptions& o, VectorXd& w, const VectorXd& g, VectorXd& m, VectorXd& v,
                           Index& adam_steps) {
  if (o.precision == Precision::kFloat64) return optimizer_step_in<double>(o, w, g, m, v, adam_steps);
  Eigen::VectorXf w32 = w.cast<float>(), m32 = m.cast<float>(), v32 = v.cast<float>();
  optimizer_step_in<float>(o, w32, g.cast<float>(), m32, v32, adam_steps);
  w = w32.cast<double>();
  m = m32.cast<double>();
  v = v32.cast<double>();
}

}  // namespace filkit::detail
