// What every trainer of the dpsgd layer shares, written once: a uniform batch without replacement
// (a partial Fisher-Yates shuffle of a kept permutation) and one bias-corrected Adam step
// (base/adam_step.hpp). DP-SGD's trainer (trainer.hpp) and non-private pre-training
// (public_data_training.cpp) draw and step through these, so the two cannot drift apart.
#pragma once

#include "base/adam_step.hpp"
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

}  // namespace filkit::detail
