// What every trainer of the dpsgd layer shares, written once: a uniform batch without replacement
// (a partial Fisher-Yates shuffle of a kept permutation), a slice of a shuffled epoch, and one
// bias-corrected Adam step
// (base/adam_step.hpp). DP-SGD's trainer (trainer.hpp) and non-private pre-training
// (public_data_training.cpp) draw and step through these, so the two cannot drift apart.
#pragma once

#include "base/adam_step.hpp"
#include "filkit/base/types.hpp"

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

}  // namespace filkit::detail
