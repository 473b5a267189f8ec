// Shared helpers of the test suite: small synthetic datasets, temporary files, tolerances.
#pragma once

#include "filkit/data.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace filkit::testing {

/// A fresh temporary directory, removed when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("filkit_test_" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `content` to `name` inside the directory and returns the path.
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream out(file(name), std::ios::binary);
    out << content;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

/// n examples in d dimensions with Gaussian features scaled into the unit ball and labels from a
/// noisy linear rule: y in {0,1} (classification) or {0..classes-1}.
inline Dataset random_classification(Index n, Index d, int classes, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Dataset data;
  data.X.resize(n, d);
  data.y.resize(n);
  RowMatrix directions(classes, d);
  for (Index k = 0; k < classes; ++k)
    for (Index j = 0; j < d; ++j) directions(k, j) = normal(rng);
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < d; ++j) data.X(i, j) = normal(rng);
    data.X.row(i) /= std::sqrt(static_cast<double>(d)) * 1.5;
    Eigen::VectorXd scores = directions * data.X.row(i).transpose();
    for (Index k = 0; k < classes; ++k) scores(k) += 0.5 * normal(rng);
    Index best;
    scores.maxCoeff(&best);
    data.y(i) = static_cast<double>(best);
  }
  data.source = "random_classification";
  return data;
}

}  // namespace filkit::testing
