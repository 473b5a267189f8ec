#include "filkit/public_data/constant_perturbation.hpp"
#include "filkit/base/communicator.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"

#include "public_data/public_data_model.hpp"
#include "test_util.hpp"

#include <algorithm>
#include <atomic>
#include <iomanip>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>

namespace filkit {
namespace {

// An independent, dense route: r_b from its definition (softmax, the p x K gradient, the
// released entries, the clip) and J_b by central differences of that function in x.
struct Problem {
  MatrixXd W;
  bool intercept;
  std::vector<bool> frozen;
  std::vector<Index> released;
  double clip;
  RowMatrix X;
  VectorXd y, c;
};

VectorXd dense_release(const Problem& pr, const VectorXd& x, Index label, const VectorXd& c, double clip) {
  const Index d = x.size(), p = pr.W.rows(), K = pr.W.cols();
  VectorXd design(p);
  if (pr.intercept) design << 1.0, x;
  else design = x;
  VectorXd scores = pr.W.transpose() * design;
  scores.array() -= scores.maxCoeff();
  VectorXd e = scores.array().exp();
  e /= e.sum();
  e(label) -= 1.0;
  VectorXd u(pr.released.size());
  for (std::size_t i = 0; i < pr.released.size(); ++i) {
    const Index k = pr.released[i] / p, j = pr.released[i] % p;
    u(static_cast<Index>(i)) = design(j) * e(k) + c(static_cast<Index>(i));
  }
  (void)d;
  (void)K;
  return u / (gelu(u.norm() / clip - 1.0) + 1.0);
}

MatrixXd dense_jacobian(const Problem& pr, Index b, const VectorXd& c, double h = 1e-5) {
  const VectorXd x = pr.X.row(b).transpose();
  const Index label = static_cast<Index>(pr.y(b));
  MatrixXd J(static_cast<Index>(pr.released.size()), x.size());
  for (Index j = 0; j < x.size(); ++j) {
    VectorXd plus = x, minus = x;
    plus(j) += h;
    minus(j) -= h;
    J.col(j) = (dense_release(pr, plus, label, c, pr.clip) - dense_release(pr, minus, label, c, pr.clip)) / (2.0 * h);
  }
  return J;
}

// Random weights, about half the coordinates frozen, a random c, and a clip norm at the median
// ||u|| so that examples are both below and above it.
Problem make_problem(Index B, Index d, Index K, bool intercept, unsigned seed, bool freeze = true,
                     double c_scale = 0.3) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::bernoulli_distribution coin(0.5);
  Problem pr;
  const Index p = d + (intercept ? 1 : 0);
  pr.W.resize(p, K);
  for (Index i = 0; i < pr.W.size(); ++i) pr.W(i) = 0.7 * normal(rng);
  pr.intercept = intercept;
  pr.frozen.resize(static_cast<std::size_t>(p * K));
  for (Index i = 0; i < p * K; ++i) {
    pr.frozen[static_cast<std::size_t>(i)] = freeze && coin(rng);
    if (!pr.frozen[static_cast<std::size_t>(i)]) pr.released.push_back(i);
  }
  pr.X.resize(B, d);
  for (Index i = 0; i < pr.X.size(); ++i) pr.X.data()[i] = normal(rng);
  pr.y.resize(B);
  std::uniform_int_distribution<Index> cls(0, K - 1);
  for (Index b = 0; b < B; ++b) pr.y(b) = static_cast<double>(cls(rng));
  pr.c.resize(static_cast<Index>(pr.released.size()));
  for (Index i = 0; i < pr.c.size(); ++i) pr.c(i) = c_scale * normal(rng);
  // ||u|| with no clip (C huge): r = u / (GELU(-1) + 1).
  std::vector<double> norms;
  for (Index b = 0; b < B; ++b)
    norms.push_back(dense_release(pr, pr.X.row(b).transpose(), static_cast<Index>(pr.y(b)), pr.c, 1e300).norm() *
                    (gelu(-1.0) + 1.0));
  std::nth_element(norms.begin(), norms.begin() + B / 2, norms.end());
  pr.clip = norms[static_cast<std::size_t>(B / 2)];
  return pr;
}

SoftmaxRelease release_of(const Problem& pr) { return SoftmaxRelease(pr.W, pr.intercept, pr.frozen, pr.clip); }

RowMatrix gaussian_probes(Index rows, Index d, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  RowMatrix V(rows, d);
  for (Index i = 0; i < V.size(); ++i) V.data()[i] = normal(rng);
  return V;
}

// L(c) by the dense route: J_b from differences, T_b from the probes or ||J_b||_F^2.
double dense_objective(const Problem& pr, const VectorXd& c, const RowMatrix& probes, double lambda, bool snr,
                       double floor) {
  const Index B = pr.X.rows(), S = probes.rows() / B;
  double sum = 0.0;
  for (Index b = 0; b < B; ++b) {
    const MatrixXd J = dense_jacobian(pr, b, c);
    double T = 0.0;
    if (S == 0) T = J.squaredNorm();
    for (Index s = 0; s < S; ++s) T += (J * probes.row(b * S + s).transpose()).squaredNorm() / static_cast<double>(S);
    const double D =
        snr ? dense_release(pr, pr.X.row(b).transpose(), static_cast<Index>(pr.y(b)), c, pr.clip).squaredNorm() : 1.0;
    sum += c.squaredNorm() + lambda * (T + floor) / D;
  }
  return sum / static_cast<double>(B);
}

std::string scientific(double x) {  // observed errors, recorded in the test's XML output
  std::ostringstream out;
  out << std::scientific << std::setprecision(2) << x;
  return out.str();
}

double relative_error(const Eigen::Ref<const MatrixXd>& a, const Eigen::Ref<const MatrixXd>& b) {
  return (a - b).norm() / b.norm();
}

// body(probes or no rows, snr, name) for the four objectives: probes or exact, with or without snr.
template <class Body>
void for_each_variant(const RowMatrix& probes, const Body& body) {
  const RowMatrix none;
  for (bool snr : {false, true})
    for (const RowMatrix* V : {&probes, &none}) {
      const std::string variant = std::string(snr ? "snr_" : "") + (V->rows() ? "probes" : "exact");
      SCOPED_TRACE(variant);
      body(V, snr, variant);
    }
}

struct Case {
  Index K;
  bool intercept;
  friend void PrintTo(const Case& c, std::ostream* out) { *out << "K = " << c.K << (c.intercept ? ", intercept" : ""); }
};

class ConstantPerturbationDense : public ::testing::TestWithParam<Case> {
 protected:
  // The case's problem with B examples of 5 features and S probes each.
  void make(Index B, Index S, unsigned seed) {
    pr_ = make_problem(B, 5, GetParam().K, GetParam().intercept, seed + static_cast<unsigned>(GetParam().K));
    release_.emplace(release_of(pr_));
    probes_ = gaussian_probes(B * S, 5, seed);
  }
  Problem pr_;
  std::optional<SoftmaxRelease> release_;
  RowMatrix probes_;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "K" + std::to_string(info.param.K) + (info.param.intercept ? "_intercept" : "_no_intercept");
}

TEST_P(ConstantPerturbationDense, ReleasedAndExactTraceMatchTheDenseRoute) {
  const Case cs = GetParam();
  const Problem pr = make_problem(9, 6, cs.K, cs.intercept, 11 + static_cast<unsigned>(cs.K));
  const SoftmaxRelease release = release_of(pr);
  ASSERT_EQ(release.released_count(), static_cast<Index>(pr.released.size()));
  ASSERT_LT(release.released_count(), release.num_classes() * (pr.W.rows()));  // some frozen
  const MatrixXd r = release.released(pr.X, pr.y, pr.c);
  const SoftmaxRelease::Accounting acc = release.account(pr.X, pr.y, pr.c);
  double worst_trace = 0.0;
  for (Index b = 0; b < pr.X.rows(); ++b) {
    const VectorXd expected = dense_release(pr, pr.X.row(b).transpose(), static_cast<Index>(pr.y(b)), pr.c, pr.clip);
    EXPECT_LT(relative_error(r.row(b).transpose(), expected), 1e-13) << "example " << b;
    const double dense_trace = dense_jacobian(pr, b, pr.c).squaredNorm();
    worst_trace = std::max(worst_trace, std::abs(acc.trace(b) - dense_trace) / dense_trace);
    EXPECT_NEAR(acc.trace(b), dense_trace, 1e-7 * dense_trace) << "example " << b;
  }
  RecordProperty("worst_trace_error", scientific(worst_trace));
  EXPECT_LT(relative_error(acc.clipped_sum, r.colwise().sum().transpose()), 1e-13);
}

TEST_P(ConstantPerturbationDense, ObjectiveValueMatchesTheDenseRoute) {
  make(7, 2, 23);
  const Problem& pr = pr_;
  const SoftmaxRelease& release = *release_;
  for_each_variant(probes_, [&](const RowMatrix* V, bool snr, const std::string& variant) {
    const double lambda = 0.8, floor = 1e-7;
    const double value = release.objective(pr.X, pr.y, pr.c, *V, lambda, snr, floor).value;
    const double expected = dense_objective(pr, pr.c, *V, lambda, snr, floor);
    EXPECT_NEAR(value, expected, 1e-8 * std::abs(expected));
    RecordProperty("value_error_" + variant,
                   scientific(std::abs(value - expected) / std::abs(expected - pr.c.squaredNorm())));
    // The lambda part alone, so that the ||c||^2 term cannot hide an error in it.
    EXPECT_NEAR(value - pr.c.squaredNorm(), expected - pr.c.squaredNorm(), 1e-7 * (expected - pr.c.squaredNorm()));
  });
}

TEST_P(ConstantPerturbationDense, GradientMatchesCentralDifferences) {
  make(8, 3, 37);
  const double lambda = 1.3, floor = 1e-7;
  const Problem& pr = pr_;
  const SoftmaxRelease& release = *release_;
  for_each_variant(probes_, [&](const RowMatrix* V, bool snr, const std::string& variant) {
    const auto L = [&](const VectorXd& c) { return release.objective(pr.X, pr.y, c, *V, lambda, snr, floor).value; };
    const VectorXd gradient = release.objective(pr.X, pr.y, pr.c, *V, lambda, snr, floor).gradient;
    // Differences of L - ||c||^2 against the gradient less 2c: the lambda part alone.
    VectorXd differences(pr.c.size());
    const double h = 1e-5;
    for (Index i = 0; i < pr.c.size(); ++i) {
      VectorXd plus = pr.c, minus = pr.c;
      plus(i) += h;
      minus(i) -= h;
      differences(i) = (L(plus) - plus.squaredNorm() - L(minus) + minus.squaredNorm()) / (2.0 * h);
    }
    const VectorXd lambda_part = gradient - 2.0 * pr.c;
    EXPECT_LT(relative_error(lambda_part, differences), 1e-6);
    RecordProperty("gradient_error_" + variant, scientific(relative_error(lambda_part, differences)));
    EXPECT_GT(differences.norm(), 1e-3 * (2.0 * pr.c).norm());  // the lambda part is not negligible
  });
}

// The objective from each example's terms (the route of probes drawn once a step) is the closed
// form's, value and gradient, on the whole batch and on a subset of its rows: the terms are M g_b
// (the release at c = 0 with no clip) and M J_g v by central differences of it.
TEST_P(ConstantPerturbationDense, ObjectiveFromTermsIsTheClosedForms) {
  make(9, 2, 53);
  const Problem& pr = pr_;
  const SoftmaxRelease& release = *release_;
  const Index B = pr.X.rows(), S = 2, m = pr.c.size();
  const VectorXd zero = VectorXd::Zero(m);
  const auto unclipped = [&](const VectorXd& x, Index label) {
    return VectorXd(dense_release(pr, x, label, zero, 1e300) * (gelu(-1.0) + 1.0));
  };
  RowMatrix gradients(B, m), products(B * S, m);
  for (Index b = 0; b < B; ++b) {
    const VectorXd x = pr.X.row(b).transpose();
    const Index label = static_cast<Index>(pr.y(b));
    gradients.row(b) = unclipped(x, label).transpose();
    const double h = 1e-5;
    for (Index s = 0; s < S; ++s) {
      const VectorXd v = probes_.row(b * S + s).transpose();
      products.row(b * S + s) = ((unclipped(x + h * v, label) - unclipped(x - h * v, label)) / (2.0 * h)).transpose();
    }
  }
  std::vector<Index> all(static_cast<std::size_t>(B));
  std::iota(all.begin(), all.end(), Index{0});
  const std::vector<Index> some = {6, 1, 3};
  for (const bool snr : {false, true}) {
    SCOPED_TRACE(snr ? "snr" : "plain");
    const double lambda = 1.7, floor = 1e-7;
    for (const std::vector<Index>* rows : {static_cast<const std::vector<Index>*>(&all), &some}) {
      RowMatrix X(static_cast<Index>(rows->size()), pr.X.cols()), V(static_cast<Index>(rows->size()) * S, pr.X.cols());
      VectorXd y(static_cast<Index>(rows->size()));
      for (std::size_t i = 0; i < rows->size(); ++i) {
        const Index r = (*rows)[i], at = static_cast<Index>(i);
        X.row(at) = pr.X.row(r);
        y(at) = pr.y(r);
        V.middleRows(at * S, S) = probes_.middleRows(r * S, S);
      }
      const PerturbationObjectiveValue expected = release.objective(X, y, pr.c, V, lambda, snr, floor);
      const PerturbationObjectiveValue terms =
          perturbation_objective_from_terms(gradients, products, *rows, pr.c, pr.clip, lambda, snr, floor);
      const double lambda_part = expected.value - pr.c.squaredNorm();
      EXPECT_NEAR(terms.value - pr.c.squaredNorm(), lambda_part, 1e-8 * lambda_part);
      EXPECT_LT(relative_error(terms.gradient - 2.0 * pr.c, expected.gradient - 2.0 * pr.c), 1e-7);
    }
  }
  EXPECT_INVALID_ARGUMENT(perturbation_objective_from_terms(gradients, products, {B}, pr.c, pr.clip, 1.0, true, 0.0),
                          "row " + std::to_string(B));
  EXPECT_INVALID_ARGUMENT(perturbation_objective_from_terms(gradients, products, {}, pr.c, pr.clip, 1.0, true, 0.0),
                          "empty batch");
  EXPECT_INVALID_ARGUMENT(
      perturbation_objective_from_terms(gradients, products.topRows(B * S - 1), all, pr.c, pr.clip, 1.0, true, 0.0),
      "do not fit");
}

INSTANTIATE_TEST_SUITE_P(ConstantPerturbation, ConstantPerturbationDense,
                         ::testing::Values(Case{2, true}, Case{2, false}, Case{5, true}, Case{5, false}), case_name);

TEST(ConstantPerturbationTrace, IsTheMeanOfProbeEstimates) {
  // The exact-trace objective is the expectation of the probe objective (no snr, no floor):
  // with many probes the two agree within a few standard errors.
  const Problem pr = make_problem(3, 4, 3, true, 41);
  const SoftmaxRelease release = release_of(pr);
  const Index S = 4000;
  const RowMatrix V = gaussian_probes(3 * S, 4, 43), none;
  const double exact = release.objective(pr.X, pr.y, pr.c, none, 1.0, false, 0.0).value - pr.c.squaredNorm();
  const double estimate = release.objective(pr.X, pr.y, pr.c, V, 1.0, false, 0.0).value - pr.c.squaredNorm();
  // ||J v||^2 with v ~ N(0, I) has variance 2 ||J^T J||_F^2 <= 2 Tr(J^T J)^2.
  double variance = 0.0;
  for (Index b = 0; b < 3; ++b) {
    const MatrixXd J = dense_jacobian(pr, b, pr.c);
    variance += 2.0 * (J.transpose() * J).squaredNorm() / static_cast<double>(S);
  }
  const double standard_error = std::sqrt(variance) / 3.0;
  EXPECT_NEAR(estimate, exact, 4.0 * standard_error);
  RecordProperty("standard_errors_apart", scientific(std::abs(estimate - exact) / standard_error));
  EXPECT_GT(standard_error, 0.0);
}

TEST(ConstantPerturbationTrace, ZeroPerturbationAndNothingFrozenIsTheClippedGradient) {
  const Problem pr = make_problem(10, 6, 4, true, 51, /*freeze=*/false, /*c_scale=*/0.0);
  const SoftmaxRelease release = release_of(pr);
  const ClippedGradientStep step(ModelKind::kSoftmax, pr.W, true, pr.clip, LabelPrivacy::kPublic);
  const MatrixXd r = release.released(pr.X, pr.y, pr.c);
  const VectorXd trace = release.account(pr.X, pr.y, pr.c).trace;
  double worst = 0.0;
  for (Index b = 0; b < pr.X.rows(); ++b) {
    const ClippedGlmGradient g(step, pr.X.row(b).transpose(), step.label_vector(pr.y(b)));
    EXPECT_LT(relative_error(r.row(b).transpose(), g.clipped_gradient()), 1e-12) << "example " << b;
    EXPECT_NEAR(trace(b), g.jacobian_trace(), 1e-12 * g.jacobian_trace()) << "example " << b;
    worst = std::max({worst, relative_error(r.row(b).transpose(), g.clipped_gradient()),
                      std::abs(trace(b) - g.jacobian_trace()) / g.jacobian_trace()});
  }
  RecordProperty("worst_error", scientific(worst));
}

TEST(ConstantPerturbationTrace, ResultsDoNotDependOnTheThreadCount) {
  const Problem pr = make_problem(150, 8, 3, true, 61);  // several blocks of examples
  const SoftmaxRelease release = release_of(pr);
  const RowMatrix V = gaussian_probes(300, 8, 63);
  testing::expect_same_for_any_thread_count(
      [&] {
        const auto objective = release.objective(pr.X, pr.y, pr.c, V, 0.5, true, 1e-7);
        const auto accounting = release.account(pr.X, pr.y, pr.c);
        return std::make_tuple(objective.value, objective.gradient, accounting.trace, accounting.clipped_sum);
      },
      [](const auto& one, const auto& more) {
        EXPECT_TRUE(testing::same_bits(std::get<0>(one), std::get<0>(more)));
        EXPECT_TRUE(testing::same_bits(std::get<1>(one), std::get<1>(more)));
        EXPECT_TRUE(testing::same_bits(std::get<2>(one), std::get<2>(more)));
        EXPECT_TRUE(testing::same_bits(std::get<3>(one), std::get<3>(more)));
      });
}

TEST(ConstantPerturbationTrace, RowsAndProbesGatheredBlockByBlockGiveTheObjectiveOfTheGatheredBatch) {
  // A batch of 150 of 200 rows, in a shuffled order: blocks of 64, 64 and 22, each gathering its
  // rows and asking the source for its own probes.
  const Problem pr = make_problem(200, 8, 3, true, 61);
  const SoftmaxRelease release = release_of(pr);
  std::vector<Index> rows(200);
  std::iota(rows.begin(), rows.end(), Index{0});
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(5));
  rows.resize(150);
  RowMatrix X(150, 8);
  VectorXd y(150);
  for (Index b = 0; b < 150; ++b) {
    X.row(b) = pr.X.row(rows[static_cast<std::size_t>(b)]);
    y(b) = pr.y(rows[static_cast<std::size_t>(b)]);
  }
  const Index S = 2;
  const RowMatrix V = gaussian_probes(150 * S, 8, 65);
  std::atomic<Index> asked{0};
  const SoftmaxRelease::ProbeSource source = [&](Index first, Index count, double* out) {
    Eigen::Map<RowMatrix>(out, count * S, 8) = V.middleRows(first * S, count * S);
    asked += count;
  };
  testing::expect_same_for_any_thread_count(
      [&] {
        asked = 0;
        const auto made = release.objective(pr.X, pr.y, rows, pr.c, S, source, 0.5, true, 1e-7);
        EXPECT_EQ(asked.load(), 150) << "every example's probes once";
        return made;
      },
      [&](const auto& one, const auto& more) {
        const auto matrix = release.objective(X, y, pr.c, V, 0.5, true, 1e-7);
        EXPECT_TRUE(testing::same_bits(one.value, matrix.value));
        EXPECT_TRUE(testing::same_bits(one.gradient, matrix.gradient));
        EXPECT_TRUE(testing::same_bits(more.value, matrix.value));
        EXPECT_TRUE(testing::same_bits(more.gradient, matrix.gradient));
      });
}

TEST(ConstantPerturbationTrace, GeluSecondDerivativeMatchesDifferences) {
  for (double t : {-3.0, -1.0, -0.2, 0.0, 0.4, 1.5, 4.0}) {
    const double h = 1e-5;
    const double expected = (gelu_derivative(t + h) - gelu_derivative(t - h)) / (2.0 * h);
    EXPECT_NEAR(gelu_second_derivative(t), expected, 1e-9) << "t = " << t;
  }
}

TEST(ConstantPerturbationArguments, BadArgumentsAreRejectedByName) {
  const Problem pr = make_problem(4, 3, 3, true, 71);
  const SoftmaxRelease release = release_of(pr);
  const auto expect_error = [](const auto& call, const std::string& word) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << word;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  expect_error([&] { SoftmaxRelease(pr.W, true, pr.frozen, 0.0); }, "clip_norm");
  expect_error([&] { SoftmaxRelease(pr.W, true, std::vector<bool>(3), 1.0); }, "frozen");
  expect_error([&] { SoftmaxRelease(MatrixXd::Ones(4, 1), true, std::vector<bool>(4), 1.0); }, "K >= 2");
  const RowMatrix none;
  expect_error([&] { release.account(pr.X.leftCols(2), pr.y, pr.c); }, "X has 2 features");
  expect_error([&] { release.account(pr.X, pr.y.head(3), pr.c); }, "y has 3 labels");
  VectorXd bad_y = pr.y;
  bad_y(1) = 3.0;
  expect_error([&] { release.account(pr.X, bad_y, pr.c); }, "y[1]");
  bad_y(1) = 0.5;
  expect_error([&] { release.released(pr.X, bad_y, pr.c); }, "y[1]");
  expect_error([&] { release.objective(pr.X, pr.y, pr.c.head(1), none, 1.0, true, 1e-7); }, "c has 1 entries");
  expect_error([&] { release.objective(pr.X, pr.y, pr.c, gaussian_probes(6, 3, 1), 1.0, true, 1e-7); },
               "not a multiple of the batch size");
  expect_error([&] { release.objective(pr.X, pr.y, pr.c, gaussian_probes(8, 2, 1), 1.0, true, 1e-7); },
               "probes have 2 columns");
  expect_error([&] { release.objective(pr.X, pr.y, pr.c, none, -1.0, true, 1e-7); }, "lambda");
  expect_error([&] { release.objective(pr.X, pr.y, pr.c, none, 1.0, true, -1.0); }, "floor");
  expect_error([&] { release.objective(RowMatrix(0, 3), VectorXd(0), pr.c, none, 1.0, true, 1e-7); }, "empty batch");
  const SoftmaxRelease::ProbeSource source = [](Index, Index, double*) {};
  const std::vector<Index> rows{0, 2};
  expect_error([&] { release.objective(pr.X, pr.y, rows, pr.c, 0, source, 1.0, true, 1e-7); }, "S >= 1");
  expect_error([&] { release.objective(pr.X, pr.y, rows, pr.c, 2, nullptr, 1.0, true, 1e-7); }, "a function");
  expect_error([&] { release.objective(pr.X, pr.y, rows, pr.c, 2, source, -1.0, true, 1e-7); }, "lambda");
  expect_error([&] { release.objective(pr.X, pr.y, {}, pr.c, 2, source, 1.0, true, 1e-7); }, "empty batch");
  expect_error([&] { release.objective(pr.X, pr.y, {0, 4}, pr.c, 2, source, 1.0, true, 1e-7); }, "batch row 4");
  bad_y(1) = 7.0;
  expect_error([&] { release.objective(pr.X, bad_y, {0, 1}, pr.c, 2, source, 1.0, true, 1e-7); }, "y[1]");
  EXPECT_NO_THROW(release.objective(
      pr.X, bad_y, {0, 2}, pr.c, 2, [](Index, Index count, double* out) { std::fill(out, out + count * 2 * 3, 0.5); },
      1.0, true, 1e-7))
      << "only the batch's labels are checked";
}

TEST(ConstantPerturbationObjective, ABatchCutIntoTheRanksPartsGivesTheWholeBatchsObjective) {
  // One run on 3 ranks (docs/distributed.md): a sorted batch of 150 of 200 public rows, each rank
  // taking its members among its shard of the rows (67, 67, 66), with the whole batch's probes of
  // its members (the source asked from the position of its first member); each part's objective
  // (a mean) times its members, added and divided by 150, is the whole batch's objective to
  // rounding (the sums formed in another order).
  const Problem pr = make_problem(200, 8, 3, true, 71);
  const SoftmaxRelease release = release_of(pr);
  std::vector<Index> batch(200);
  std::iota(batch.begin(), batch.end(), Index{0});
  std::shuffle(batch.begin(), batch.end(), std::mt19937_64(7));
  batch.resize(150);
  std::sort(batch.begin(), batch.end());
  const Index S = 2, B = 150, m = release.released_count();
  const RowMatrix V = gaussian_probes(B * S, 8, 73);
  const auto source_from = [&](Index position) -> SoftmaxRelease::ProbeSource {
    return [&V, position, S](Index first, Index count, double* out) {
      Eigen::Map<RowMatrix>(out, count * S, 8) = V.middleRows((position + first) * S, count * S);
    };
  };
  for (bool snr : {false, true}) {
    SCOPED_TRACE(snr ? "snr" : "no snr");
    const auto whole = release.objective(pr.X, pr.y, batch, pr.c, S, source_from(0), 0.5, snr, 1e-7);
    double value = 0.0;
    VectorXd gradient = VectorXd::Zero(m);
    Index members_seen = 0;
    for (int rank = 0; rank < 3; ++rank) {
      const RowShard shard = RowShard::of(200, rank, 3);
      const auto first = std::lower_bound(batch.begin(), batch.end(), shard.begin);
      const auto last = std::lower_bound(first, batch.end(), shard.end);
      const std::vector<Index> members(first, last);
      ASSERT_FALSE(members.empty());
      const auto part =
          release.objective(pr.X, pr.y, members, pr.c, S, source_from(first - batch.begin()), 0.5, snr, 1e-7);
      // On one process objective_over_ranks is the part itself, bit for bit.
      const auto alone = objective_over_ranks(part, std::ssize(members), B, m, Communicator::local());
      EXPECT_TRUE(testing::same_bits(alone.value, part.value));
      EXPECT_TRUE(testing::same_bits(alone.gradient, part.gradient));
      const auto count = static_cast<double>(members.size());
      value += part.value * count;  // what objective_over_ranks adds over the ranks
      gradient += part.gradient * count;
      members_seen += std::ssize(members);
    }
    EXPECT_EQ(members_seen, B);
    EXPECT_NEAR(value / B, whole.value, 1e-13 * std::abs(whole.value));
    EXPECT_LT(relative_error(gradient / B, whole.gradient), 1e-13);
    // A wrong split (probes from each part's own position 0) is caught.
    const RowShard middle = RowShard::of(200, 1, 3);
    const auto first = std::lower_bound(batch.begin(), batch.end(), middle.begin);
    const std::vector<Index> members(first, std::lower_bound(first, batch.end(), middle.end));
    EXPECT_NE(
        release.objective(pr.X, pr.y, members, pr.c, S, source_from(0), 0.5, snr, 1e-7).value,
        release.objective(pr.X, pr.y, members, pr.c, S, source_from(first - batch.begin()), 0.5, snr, 1e-7).value);
  }
}

}  // namespace
}  // namespace filkit
