// Parallel loops in blocks of fixed size: every index visited once, sums in block order and the
// same bits on any number of threads, where OpenMP's own reduction differs.
#include "base/parallel_blocks.hpp"

#include "test_util.hpp"

#include <cmath>
#include <random>
#include <vector>

namespace filkit {
namespace {

// Values over many orders of magnitude, so that every change of summation order shows.
VectorXd spread_values(Index n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  VectorXd values(n);
  for (Index i = 0; i < n; ++i) values(i) = normal(rng) * std::exp(4.0 * normal(rng));
  return values;
}

double sum_in_blocks(const VectorXd& values, Index block) {
  double total = 0.0;
  detail::reduce_blocks_in_order(
      values.size(), block, 0.0,
      [&](double& partial, Index start, Index count) {
        for (Index i = start; i < start + count; ++i) partial += values(i);
      },
      [&](double partial) { total += partial; });
  return total;
}

TEST(ForEachBlock, VisitsEveryIndexOnceIncludingAShortLastBlock) {
  for (const Index total : {0, 1, 99, 100, 101, 1000}) {
    std::vector<int> visits(static_cast<std::size_t>(total), 0);
    testing::with_threads(3, [&] {
      detail::for_each_block(total, 100, [&](Index start, Index count) {
        EXPECT_EQ(start % 100, 0);
        EXPECT_EQ(count, std::min<Index>(100, total - start));
        for (Index i = start; i < start + count; ++i) ++visits[static_cast<std::size_t>(i)];
      });
      return 0;
    });
    EXPECT_EQ(visits, std::vector<int>(static_cast<std::size_t>(total), 1)) << total << " indices";
  }
}

TEST(ReduceBlocksInOrder, AddsTheBlockSumsInBlockOrder) {
  const VectorXd values = spread_values(1050, 1);
  double expected = 0.0;
  for (Index start = 0; start < values.size(); start += 100) {
    double block = 0.0;
    for (Index i = start; i < std::min<Index>(start + 100, values.size()); ++i) block += values(i);
    expected += block;
  }
  EXPECT_TRUE(testing::same_bits(testing::with_threads(3, [&] { return sum_in_blocks(values, 100); }), expected));
}

TEST(ReduceBlocksInOrder, GivesTheSameBitsOnAnyNumberOfThreadsWhereAnOpenMpReductionDoesNot) {
  const VectorXd values = spread_values(100000, 2);
  testing::expect_same_for_any_thread_count(
      [&] { return sum_in_blocks(values, 1000); },
      [](double one, double more) { EXPECT_TRUE(testing::same_bits(one, more)); });
  // The check itself catches a sum whose order follows the threads.
  const auto openmp_sum = [&] {
    double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (Index i = 0; i < values.size(); ++i) total += values(i);
    return total;
  };
  EXPECT_FALSE(testing::same_bits(testing::with_threads(1, openmp_sum), testing::with_threads(2, openmp_sum)));
}

TEST(ProductInColumnBlocks, IsTheProductWithTheSameBitsOnAnyNumberOfThreads) {
  const MatrixXd A = MatrixXd::Random(70, 90), B = MatrixXd::Random(90, 100);
  const MatrixXd expected = A * B;
  testing::expect_same_for_any_thread_count([&] { return detail::product_in_column_blocks(A, B); },
                                            [&](const MatrixXd& one, const MatrixXd& more) {
                                              EXPECT_TRUE(testing::same_bits(one, more));
                                              EXPECT_LT((one - expected).cwiseAbs().maxCoeff(), 1e-12);
                                            });
}

}  // namespace
}  // namespace filkit
