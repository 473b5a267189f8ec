// Cutting a batch into pieces of consecutive examples that the plugin's backends (network.cpp,
// released_gradient.cpp) differentiate concurrently, one piece on each of LibTorch's threads, each
// on one thread. Per-example work then never waits for a fork and join inside small operations,
// a piece's temporaries stay small enough for the heap to reuse (network.cpp's mallopt), and the
// results do not depend on the number of threads (the pieces, and the order their sums are added
// in, depend only on the batch).
#pragma once

#include "filkit/base/types.hpp"

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

namespace filkit {

/// Consecutive examples of a batch: the first and how many.
struct Rows {
  Index first, count;
};

/// The examples of a piece when the per-example products of the networks' records are formed
/// (network.cpp, released_gradient.cpp's constant perturbation). On one thread, pieces of
/// 10 to 100 examples cost the same per example (the smaller fit the caches); with 25, the many
/// small operations of a step (per-example products of a few thousand flops, elementwise work on a
/// few hundred kB, per-example loops such as at::bmm's and im2col's) keep both threads busy.
constexpr Index kPieceRows = 25;

/// `rows` cut into pieces of at most `max_rows` (>= 1) examples, as equal as possible.
inline std::vector<Rows> pieces_of(Rows rows, Index max_rows) {
  const Index count = (rows.count + max_rows - 1) / max_rows;
  std::vector<Rows> pieces;
  Index first = rows.first;
  for (Index i = 0; i < count; ++i) {
    const Index size = rows.count / count + (i < rows.count % count ? 1 : 0);
    pieces.push_back({first, size});
    first += size;
  }
  return pieces;
}

/// body(i, pieces[i]) for every piece, concurrently on LibTorch's threads; inside, LibTorch and
/// OpenBLAS run single-threaded (they do not nest parallel regions).
template <class Body>
void for_each_piece(const std::vector<Rows>& pieces, const Body& body) {
  at::parallel_for(0, static_cast<std::int64_t>(pieces.size()), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) body(static_cast<std::size_t>(i), pieces[i]);
  });
}

}  // namespace filkit
