// A user's program against the installed filkit: fits ridge regression on six examples and
// measures each example's FIL, then checks both against their closed forms written here with Eigen
// alone (docs/mathematics.md, sections 1-2): w* = H^-1 X^T y with H = X^T X + n lambda I, and the
// Jacobian of w* in the example z_i = (x_i, y_i), J_i = -H^-1 B_i with B_i's columns
// r_i e_j + w*_j x_i (the features; r_i = w*.x_i - y_i) and -x_i (the label), so that
// eta_i = ||J_i||_2 / sigma and dFIL_i = ||J_i||_F / (sigma sqrt(d + 1)). Exits 1 on a mismatch.
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

#include <Eigen/Dense>

#include <cmath>
#include <cstdio>

int main() {
  filkit::Dataset data;
  data.X.resize(6, 2);
  data.X << 0.5, -1.0, 1.5, 0.25, -0.75, 2.0, 1.0, 1.0, -2.0, 0.5, 0.3, -0.6;
  data.y.resize(6);
  data.y << 0.7, 2.1, -1.3, 1.9, -2.4, 0.2;
  filkit::FitOptions fit_options;
  fit_options.kind = filkit::ModelKind::kLeastSquares;
  fit_options.regression = true;
  fit_options.l2 = 0.1;
  const filkit::Model model = filkit::fit(data, fit_options);
  filkit::FilOptions fil_options;
  fil_options.sigma = 0.5;
  const filkit::PerExampleFil fil =
      filkit::FisherInformationLoss(model, data, Eigen::VectorXd(), fil_options).per_example();

  const Eigen::MatrixXd X = data.X;
  const Eigen::Index n = X.rows(), d = X.cols();
  const Eigen::MatrixXd H = X.transpose() * X + n * 0.1 * Eigen::MatrixXd::Identity(d, d);
  const Eigen::VectorXd w = H.ldlt().solve(X.transpose() * data.y);
  int failures = 0;
  const auto expect_close = [&](const char* what, double found, double expected) {
    const bool close = std::abs(found - expected) <= 1e-10 * std::abs(expected);
    std::printf("%-10s filkit %.15g, closed form %.15g%s\n", what, found, expected, close ? "" : "  MISMATCH");
    failures += close ? 0 : 1;
  };
  for (Eigen::Index j = 0; j < d; ++j) expect_close("w*", model.weights(j, 0), w(j));
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::VectorXd x = X.row(i).transpose();
    Eigen::MatrixXd B(d, d + 1);
    for (Eigen::Index j = 0; j < d; ++j) B.col(j) = (w.dot(x) - data.y(i)) * Eigen::VectorXd::Unit(d, j) + w(j) * x;
    B.col(d) = -x;
    const Eigen::MatrixXd J = -H.ldlt().solve(B);
    expect_close("eta", fil.eta(i), Eigen::JacobiSVD<Eigen::MatrixXd>(J).singularValues()(0) / 0.5);
    expect_close("dFIL", fil.dfil(i), J.norm() / (0.5 * std::sqrt(static_cast<double>(d + 1))));
  }
  std::printf("filkit %s: %s\n", FILKIT_VERSION, failures == 0 ? "every value agrees" : "values differ");
  return failures == 0 ? 0 : 1;
}
