// The covariance's and the projection's kernels (covariance_kernels.hpp): hand-written FMA tiles
// for AVX-512 and AVX2, chosen at run time, and Eigen's rank update where neither is available.
#include "data/covariance_kernels.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FILKIT_X86_KERNELS 1
#else
#define FILKIT_X86_KERNELS 0
#endif

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace filkit::detail {

namespace {

// ---- The covariance: a symmetric rank-n update, a block of centred rows at a time ----------
//
// The library is built for baseline x86-64 (SSE2), where Eigen's rank update of 12000 x 784 rows
// takes 0.5 s on a core. Hand-written FMA tiles for AVX-512 and AVX2, chosen at run time, do
// the same sums about five (three) times faster. They add into a row-major d x d buffer whose
// rows i hold columns j <= i (tiles on the diagonal also fill some j > i); read as the
// column-major MatrixXd it is, that is the upper triangle.
//
// A block is packed in panels of 8 columns: row r of panel p holds columns 8p..8p+7 (zero
// beyond d) at packed[(p * m + r) * 8], so a tile streams two contiguous panels.
constexpr Index kPanel = 8;

Index panel_count(Index d) { return (d + kPanel - 1) / kPanel; }

// Packs block - mean (row by row) into panels.
void pack_centred(const Eigen::Ref<const RowMatrix>& block, const VectorXd& mean, std::vector<double>& packed) {
  const Index m = block.rows(), d = block.cols(), panels = panel_count(d);
  packed.resize(static_cast<std::size_t>(panels * m * kPanel));
  const double* centre = mean.data();
  for (Index r = 0; r < m; ++r) {
    const double* row = block.row(r).data();
    for (Index p = 0; p < panels; ++p) {
      double* out = packed.data() + (p * m + r) * kPanel;
      const Index first = p * kPanel, width = std::min(kPanel, d - first);
      for (Index j = 0; j < width; ++j) out[j] = row[first + j] - centre[first + j];
      std::fill(out + width, out + kPanel, 0.0);
    }
  }
}

#if FILKIT_X86_KERNELS

// Rows i0..i0+7 (the 8 columns of panel `a`) times columns j0.. of `kB` consecutive panels
// starting at `b`, summed over the block's m rows and added to C.
template <int kB>
__attribute__((target("avx512f"), always_inline)) inline void tile_avx512(const double* a, const double* b, Index m,
                                                                          Index i0, Index j0, Index d, double* C) {
  __m512d acc[kPanel][kB];
  for (int i = 0; i < kPanel; ++i)
    for (int q = 0; q < kB; ++q) acc[i][q] = _mm512_setzero_pd();
  for (Index r = 0; r < m; ++r) {
    __m512d bv[kB];
    for (int q = 0; q < kB; ++q) bv[q] = _mm512_loadu_pd(b + (q * m + r) * kPanel);
    for (int i = 0; i < kPanel; ++i) {
      const __m512d ai = _mm512_set1_pd(a[r * kPanel + i]);
      for (int q = 0; q < kB; ++q) acc[i][q] = _mm512_fmadd_pd(ai, bv[q], acc[i][q]);
    }
  }
  for (Index i = 0; i < kPanel && i0 + i < d; ++i) {
    for (int q = 0; q < kB; ++q) {
      double* out = C + (i0 + i) * d + j0 + q * kPanel;
      const Index width = std::min(kPanel, d - j0 - q * kPanel);
      if (width == kPanel) {
        _mm512_storeu_pd(out, _mm512_add_pd(_mm512_loadu_pd(out), acc[i][q]));
      } else {
        alignas(64) double sums[kPanel];
        _mm512_store_pd(sums, acc[i][q]);
        for (Index j = 0; j < width; ++j) out[j] += sums[j];
      }
    }
  }
}

__attribute__((target("avx512f"))) void gram_avx512(const double* packed, Index m, Index d, double* C) {
  const Index panels = panel_count(d);
  for (Index pj = 0; pj < panels; pj += 2) {
    const double* b = packed + pj * m * kPanel;
    tile_avx512<1>(b, b, m, pj * kPanel, pj * kPanel, d, C);  // the diagonal tile
    for (Index pi = pj + 1; pi < panels; ++pi) {
      const double* a = packed + pi * m * kPanel;
      if (pj + 1 < panels) tile_avx512<2>(a, b, m, pi * kPanel, pj * kPanel, d, C);
      else tile_avx512<1>(a, b, m, pi * kPanel, pj * kPanel, d, C);
    }
  }
}

// Rows i0..i0+3 (4 of the 8 columns of a panel, `a` already offset) times the 8 columns of
// panel `b`: 8 accumulators of the 16 AVX2 registers.
__attribute__((target("avx2,fma"), always_inline)) inline void tile_avx2(const double* a, const double* b, Index m,
                                                                         Index i0, Index j0, Index d, double* C) {
  constexpr int kRows = 4;
  __m256d acc[kRows][2];
  for (int i = 0; i < kRows; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_pd();
  for (Index r = 0; r < m; ++r) {
    const __m256d b0 = _mm256_loadu_pd(b + r * kPanel), b1 = _mm256_loadu_pd(b + r * kPanel + 4);
    for (int i = 0; i < kRows; ++i) {
      const __m256d ai = _mm256_broadcast_sd(a + r * kPanel + i);
      acc[i][0] = _mm256_fmadd_pd(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_pd(ai, b1, acc[i][1]);
    }
  }
  const Index width = std::min(kPanel, d - j0);
  for (Index i = 0; i < kRows && i0 + i < d; ++i) {
    alignas(32) double sums[kPanel];
    _mm256_store_pd(sums, acc[i][0]);
    _mm256_store_pd(sums + 4, acc[i][1]);
    double* out = C + (i0 + i) * d + j0;
    for (Index j = 0; j < width; ++j) out[j] += sums[j];
  }
}

__attribute__((target("avx2,fma"))) void gram_avx2(const double* packed, Index m, Index d, double* C) {
  const Index panels = panel_count(d);
  for (Index pj = 0; pj < panels; ++pj) {
    const double* b = packed + pj * m * kPanel;
    for (Index pi = pj; pi < panels; ++pi) {
      const double* a = packed + pi * m * kPanel;
      tile_avx2(a, b, m, pi * kPanel, pj * kPanel, d, C);
      tile_avx2(a + 4, b, m, pi * kPanel + 4, pj * kPanel, d, C);
    }
  }
}

// Integers in 0..255 (pixels) shifted by an integer centre stay within +-255, so each product
// is below 2^16 and the sum of 128 of them below 2^24: exact in single precision, where AVX-512
// does twice the multiply-adds. Each tile's exact sums are added to the double-precision C, so
// the covariance is exact up to the final centring correction (see covariance_upper).
constexpr Index kPanelF = 16;
static_assert(kBlockRows * 255 * 255 < (1 << 24), "a block's single-precision sums must stay exact");

void pack_shifted_f32(const Eigen::Ref<const RowMatrix>& block, const VectorXd& centre, std::vector<float>& packed) {
  const Index m = block.rows(), d = block.cols(), panels = (d + kPanelF - 1) / kPanelF;
  packed.resize(static_cast<std::size_t>(panels * m * kPanelF));
  for (Index r = 0; r < m; ++r) {
    const double* row = block.row(r).data();
    for (Index p = 0; p < panels; ++p) {
      float* out = packed.data() + (p * m + r) * kPanelF;
      const Index first = p * kPanelF, width = std::min(kPanelF, d - first);
      for (Index j = 0; j < width; ++j) out[j] = static_cast<float>(row[first + j] - centre[first + j]);
      std::fill(out + width, out + kPanelF, 0.0f);
    }
  }
}

// Rows i0..i0+7 (8 of the 16 columns of a panel, `a` already offset) times the columns of `kB`
// panels starting at `b`, added to C in double precision.
template <int kB>
__attribute__((target("avx512f"), always_inline)) inline void tile_avx512_f32(const float* a, const float* b, Index m,
                                                                              Index i0, Index j0, Index d, double* C) {
  constexpr int kRows = 8;
  __m512 acc[kRows][kB];
  for (int i = 0; i < kRows; ++i)
    for (int q = 0; q < kB; ++q) acc[i][q] = _mm512_setzero_ps();
  for (Index r = 0; r < m; ++r) {
    __m512 bv[kB];
    for (int q = 0; q < kB; ++q) bv[q] = _mm512_loadu_ps(b + (q * m + r) * kPanelF);
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[r * kPanelF + i]);
      for (int q = 0; q < kB; ++q) acc[i][q] = _mm512_fmadd_ps(ai, bv[q], acc[i][q]);
    }
  }
  for (Index i = 0; i < kRows && i0 + i < d; ++i) {
    for (int q = 0; q < kB; ++q) {
      alignas(64) float sums[kPanelF];
      _mm512_store_ps(sums, acc[i][q]);
      double* out = C + (i0 + i) * d + j0 + q * kPanelF;
      const Index width = std::min(kPanelF, d - j0 - q * kPanelF);
      for (Index j = 0; j < width; ++j) out[j] += static_cast<double>(sums[j]);
    }
  }
}

__attribute__((target("avx512f"))) void gram_avx512_f32(const float* packed, Index m, Index d, double* C) {
  const Index panels = (d + kPanelF - 1) / kPanelF;
  for (Index pj = 0; pj < panels; pj += 2) {
    const float* b = packed + pj * m * kPanelF;
    for (Index pi = pj; pi < panels; ++pi) {
      const float* a = packed + pi * m * kPanelF;
      for (Index offset = 0; offset < kPanelF; offset += 8) {
        const Index i0 = pi * kPanelF + offset, j0 = pj * kPanelF;
        // On the diagonal panel the second panel of b lies above the diagonal.
        if (pi > pj && pj + 1 < panels) tile_avx512_f32<2>(a + offset, b, m, i0, j0, d, C);
        else tile_avx512_f32<1>(a + offset, b, m, i0, j0, d, C);
      }
    }
  }
}

// ---- Projection on the components: out = (rows - mean) W, n x d times d x k --------------
//
// Eigen's baseline (SSE2) product takes 30 ms of a core for 12000 x 784 x 20; this one
// broadcasts each centred value against up to 24 columns of W held in 3 AVX-512 registers.
// W is row-major, padded with zero columns to a multiple of 8 (kp).
template <int kRows, int kV>
__attribute__((target("avx512f"), always_inline)) inline void project_tile_avx512(const double* X, Index d,
                                                                                  const double* W, Index kp, Index c0,
                                                                                  Index k, double* out, Index ldo) {
  __m512d acc[kRows][kV];
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kV; ++v) acc[i][v] = _mm512_setzero_pd();
  for (Index j = 0; j < d; ++j) {
    __m512d w[kV];
    for (int v = 0; v < kV; ++v) w[v] = _mm512_loadu_pd(W + j * kp + c0 + 8 * v);
    for (int i = 0; i < kRows; ++i) {
      const __m512d x = _mm512_set1_pd(X[i * d + j]);
      for (int v = 0; v < kV; ++v) acc[i][v] = _mm512_fmadd_pd(x, w[v], acc[i][v]);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    alignas(64) double sums[8 * kV];
    for (int v = 0; v < kV; ++v) _mm512_store_pd(sums + 8 * v, acc[i][v]);
    for (Index c = c0; c < std::min(k, c0 + 8 * kV); ++c) out[i * ldo + c] = sums[c - c0];
  }
}

template <int kV>
__attribute__((target("avx512f"))) void project_columns_avx512(const double* X, Index count, Index d, const double* W,
                                                               Index kp, Index c0, Index k, double* out, Index ldo) {
  Index r = 0;
  for (; r + 8 <= count; r += 8) project_tile_avx512<8, kV>(X + r * d, d, W, kp, c0, k, out + r * ldo, ldo);
  for (; r < count; ++r) project_tile_avx512<1, kV>(X + r * d, d, W, kp, c0, k, out + r * ldo, ldo);
}

// out (count x k, row-major with leading dimension ldo) = X (count x d, row-major, centred) W.
void project_avx512_kernel(const double* X, Index count, Index d, const double* W, Index kp, Index k, double* out,
                           Index ldo) {
  for (Index c0 = 0; c0 < k; c0 += 24) {
    const Index vectors = std::min<Index>(3, (k - c0 + 7) / 8);
    if (vectors == 3) project_columns_avx512<3>(X, count, d, W, kp, c0, k, out, ldo);
    else if (vectors == 2) project_columns_avx512<2>(X, count, d, W, kp, c0, k, out, ldo);
    else project_columns_avx512<1>(X, count, d, W, kp, c0, k, out, ldo);
  }
}

#endif  // FILKIT_X86_KERNELS

}  // namespace

bool has_avx512() {
#if FILKIT_X86_KERNELS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

GramKernel resolve_gram_kernel(GramKernel kernel, bool small_integers) {
#if FILKIT_X86_KERNELS
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (kernel == GramKernel::kAuto) {
    kernel = avx512 ? (small_integers ? GramKernel::kAvx512Float : GramKernel::kAvx512)
             : avx2 ? GramKernel::kAvx2
                    : GramKernel::kEigen;
  }
  if (kernel == GramKernel::kAvx512Float && !small_integers) kernel = GramKernel::kAvx512;
  const bool wants_avx512 = kernel == GramKernel::kAvx512Float || kernel == GramKernel::kAvx512;
  if (wants_avx512 && !avx512) return GramKernel::kEigen;
  if (kernel == GramKernel::kAvx2 && !avx2) return GramKernel::kEigen;
  return kernel;
#else
  (void)kernel;
  (void)small_integers;
  return GramKernel::kEigen;
#endif
}

// Adds (block - centre)^T (block - centre) to the upper triangle of C (column-major d x d).
void add_shifted_gram(const Eigen::Ref<const RowMatrix>& block, const VectorXd& centre, GramKernel kernel,
                      GramWorkspace& work, MatrixXd& C) {
#if FILKIT_X86_KERNELS
  if (kernel == GramKernel::kAvx512Float) {
    pack_shifted_f32(block, centre, work.packed_f32);
    gram_avx512_f32(work.packed_f32.data(), block.rows(), block.cols(), C.data());
    return;
  }
  if (kernel == GramKernel::kAvx512 || kernel == GramKernel::kAvx2) {
    pack_centred(block, centre, work.packed);
    if (kernel == GramKernel::kAvx512) gram_avx512(work.packed.data(), block.rows(), block.cols(), C.data());
    else gram_avx2(work.packed.data(), block.rows(), block.cols(), C.data());
    return;
  }
#endif
  work.centred.noalias() = block.rowwise() - centre.transpose();
  C.selfadjointView<Eigen::Upper>().rankUpdate(work.centred.transpose());
}
void project_avx512(const double* X, Index count, Index d, const double* W, Index kp, Index k, double* out, Index ldo) {
#if FILKIT_X86_KERNELS
  project_avx512_kernel(X, count, d, W, kp, k, out, ldo);
#else
  (void)X, (void)count, (void)d, (void)W, (void)kp, (void)k, (void)out, (void)ldo;
  throw std::logic_error("project_avx512: built without the x86 kernels (has_avx512() is false)");
#endif
}

}  // namespace filkit::detail
