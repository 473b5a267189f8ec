// The kernels under PCA's fit and projection (data/preprocessing.cpp): the covariance as a
// symmetric rank update, a block of centred rows at a time, and the projection of rows on the
// components. The library is built for the machine's instruction sets or for baseline x86-64;
// the AVX-512 and AVX2 tiles are chosen at run time, so that one binary runs anywhere.
#pragma once

#include "filkit/base/types.hpp"
#include "filkit/data/preprocessing.hpp"

#include <vector>

namespace filkit::detail {

/// Rows of a block, the unit of every pass over the data: no scaled or centred n x d copy of the
/// training data is ever held (the raw 12000 x 784 pixels alone are 75 MB). 128 rows of 784
/// columns are 0.8 MB: a block and its packed copy stay in L2. The exact single-precision
/// kernel needs a block's sums of pixel products below 2^24.
inline constexpr Index kBlockRows = 128;

/// Whether this processor has AVX-512 (F).
bool has_avx512();

/// The kernel `kernel` runs as on this processor: kAuto picks the fastest, a kernel the processor
/// lacks becomes Eigen's, kAvx512Float only for `small_integers` (pixels 0..255, else kAvx512).
GramKernel resolve_gram_kernel(GramKernel kernel, bool small_integers);

/// Scratch space of one thread's blocks.
struct GramWorkspace {
  RowMatrix scratch, centred;
  std::vector<double> packed;
  std::vector<float> packed_f32;
};

/// Adds (block - centre)^T (block - centre) to the upper triangle of C (column-major d x d) by a
/// resolved `kernel`.
void add_shifted_gram(const Eigen::Ref<const RowMatrix>& block, const VectorXd& centre, GramKernel kernel,
                      GramWorkspace& work, MatrixXd& C);

/// out (count x k, row-major with leading dimension ldo) = X (count x d, row-major, centred) W,
/// W row-major with kp >= k columns, zero beyond k, kp a multiple of 8. Only where has_avx512().
void project_avx512(const double* X, Index count, Index d, const double* W, Index kp, Index k, double* out, Index ldo);

}  // namespace filkit::detail
