// Parallel loops whose results do not depend on the thread count. The range [0, total) is cut
// into blocks of a fixed size (the last one shorter) that never depends on how many threads
// run; each block is computed by the same code whichever thread takes it, and sums over blocks
// are formed in block order. The results are therefore bitwise identical for any thread count.
//
// Eigen's own parallel product splits a GEMM by the number of threads and picks its depth
// blocking for that number, so its rounding changes with the thread count: filkit is built with
// EIGEN_DONT_PARALLELIZE (CMakeLists.txt) and parallelises its large products here instead.
#pragma once

#include "filkit/base/types.hpp"

#include <algorithm>

namespace filkit::detail {

inline Index block_count(Index total, Index block) { return (total + block - 1) / block; }

/// Calls body(start, count) for every block [start, start + count) of [0, total), blocks in
/// parallel unless `parallel` is false (for work too small to share; the result is the same).
/// Blocks must write disjoint outputs.
template <class Body>
void for_each_block(Index total, Index block, const Body& body, bool parallel = true) {
  const Index blocks = block_count(total, block);
#pragma omp parallel for schedule(dynamic, 1) if (parallel && blocks > 1)
  for (Index b = 0; b < blocks; ++b) body(b * block, std::min(block, total - b * block));
}

/// Sums over the blocks of [0, total): add_block(partial, start, count) adds the contribution of
/// block [start, start + count) to `partial`, which is a copy of `zero` before every block, and
/// merge(partial) takes it into the caller's total, one block at a time in block order. Blocks
/// are computed in parallel unless `parallel` is false (for work too small to share; the result
/// is the same). add_block is copied once per thread, so a mutable lambda may keep scratch space
/// in its captures; neither function may throw.
template <class Partial, class AddBlock, class Merge>
void reduce_blocks_in_order(Index total, Index block, const Partial zero, const AddBlock& add_block, const Merge& merge,
                            bool parallel = true) {  // zero by value: merge may change its source
  const Index blocks = block_count(total, block);
#pragma omp parallel if (parallel && blocks > 1)
  {
    AddBlock add = add_block;
    Partial partial = zero;
#pragma omp for ordered schedule(static, 1)
    for (Index b = 0; b < blocks; ++b) {
      partial = zero;
      add(partial, b * block, std::min(block, total - b * block));
#pragma omp ordered
      merge(partial);
    }
  }
}

/// A B, its columns computed in parallel in blocks of `block_columns`.
inline MatrixXd product_in_column_blocks(const Eigen::Ref<const MatrixXd>& A, const Eigen::Ref<const MatrixXd>& B,
                                         Index block_columns = 32) {
  MatrixXd product(A.rows(), B.cols());
  for_each_block(B.cols(), block_columns, [&](Index start, Index count) {
    product.middleCols(start, count).noalias() = A * B.middleCols(start, count);
  });
  return product;
}

}  // namespace filkit::detail
