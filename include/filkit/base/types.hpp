// Common types of filkit: matrices with one example a row, and the version string.
#pragma once

#include <Eigen/Dense>

#include <limits>
#include <string>

namespace filkit {

/// A dense matrix with one example a row (row-major, so a row is contiguous).
using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

/// Not a number: a quantity that is undefined where it is written (a spread of one trial).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The library version ("0.1.0"), recorded in every output.
std::string version();
/// The compiler and the instruction sets the library was built for ("gcc 12.2.0, instruction sets:
/// native (AVX-512)"):
/// results may differ in the last bits between builds for other instruction sets.
std::string build();

}  // namespace filkit
