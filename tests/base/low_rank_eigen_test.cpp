// The diagonal-plus-low-rank eigensolver against dense eigenvalues.
#include "filkit/base/low_rank_eigen.hpp"

#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

namespace filkit {
namespace {

TEST(LargestEigenvalue, MatchesDenseEigenvaluesIncludingClustersAndIndefiniteUpdates) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 2000; ++trial) {
    const Index p = 3 + trial % 60, k = 1 + trial % 3;
    VectorXd D(p);
    for (Index j = 0; j < p; ++j) D(j) = std::abs(normal(rng));
    if (trial % 4 == 0) D.head(p / 2).setConstant(D.maxCoeff() + 0.1);  // a repeated top value
    if (trial % 7 == 0) D.setZero();                                    // no diagonal part
    std::sort(D.data(), D.data() + p, std::greater<double>());
    MatrixXd U(p, k), S(k, k);
    for (Index j = 0; j < p * k; ++j) U.data()[j] = normal(rng);
    if (trial % 5 == 0) U.topRows(p / 3).setZero();  // leave some of D untouched
    for (Index j = 0; j < k * k; ++j) S.data()[j] = normal(rng);
    S = (S + S.transpose()).eval();
    const MatrixXd A = MatrixXd(D.asDiagonal()) + U * S * U.transpose();
    const double reference = Eigen::SelfAdjointEigenSolver<MatrixXd>(A).eigenvalues().maxCoeff();
    const double fast = largest_eigenvalue_diagonal_plus_low_rank(D, U, S);
    EXPECT_NEAR(fast, reference, 1e-11 * std::max(1.0, std::abs(reference))) << "trial " << trial;
  }
}

}  // namespace
}  // namespace filkit
