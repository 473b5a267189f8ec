// What every trainer of the dpsgd layer shares, written once: a uniform batch without replacement
// (a partial Fisher-Yates shuffle of a kept permutation) and one bias-corrected Adam step
// (Kingma and Ba 2015). DP-SGD's trainer (trainer.hpp) and non-private pre-training
// (public_data_training.cpp) draw and step through these, so the two cannot drift apart.
#pragma once

#include "filkit/base/types.hpp"

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

/// One Adam step on w with gradient g: m, v the moment estimates, `steps` the count before this step.
inline void adam_step(VectorXd& w, const VectorXd& g, VectorXd& m, VectorXd& v, Index& steps, double step_size,
                      double beta1, double beta2, double epsilon) {
  const Index t = ++steps;
  m = beta1 * m + (1.0 - beta1) * g;
  v = beta2 * v + (1.0 - beta2) * g.cwiseAbs2();
  const double c1 = 1.0 - std::pow(beta1, t), c2 = 1.0 - std::pow(beta2, t);
  w.array() -= step_size * (m.array() / c1) / ((v.array() / c2).sqrt() + epsilon);
}

}  // namespace filkit::detail
