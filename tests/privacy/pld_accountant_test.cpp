// The PLD accountant and the incremental accountant API (privacy/pld_accountant.hpp,
// privacy/privacy_accountant.hpp) against closed forms, the RDP accountant and a finer grid.
//
// Stated error. Connect-the-dots keeps delta exact at the grid losses (up to the truncated mass,
// which only adds), so for ONE step eps_true <= eps_pld <= eps_true + h. For k composed steps the
// discrete PLD is stochastically below the PLD with every loss rounded up to the grid, whose sum
// exceeds the true one by at most k h: eps_true <= eps_pld <= eps_true + k h. These are the
// tolerances below; the observed errors are far smaller and printed.
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"

#include "expect_invalid_argument.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <tuple>

namespace filkit {
namespace {

constexpr double kH = 1e-4;

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// delta(eps) of the Gaussian mechanism with noise s per unit of sensitivity (Balle, Wang 2018,
// "Improving the Gaussian Mechanism for Differential Privacy", Theorem 8).
double gaussian_delta(double s, double eps) {
  return normal_cdf(-eps * s + 1 / (2 * s)) - std::exp(eps) * normal_cdf(-eps * s - 1 / (2 * s));
}

// One Poisson subsampled step, each direction, in closed form at the loss eps: x* solves
// L(x*) = eps, and delta = P(L > eps) - e^eps Q(L > eps).
double subsampled_delta(double s, double q, double eps, bool remove) {
  const double l = remove ? eps : -eps;
  const double v = std::expm1(l) + q;
  if (v <= 0) return remove ? 1 - std::exp(eps) : 0.0;  // (remove: every loss exceeds eps)
  const double x = 0.5 + s * s * (std::log(v) - std::log(q));
  const double n0_above = normal_cdf(-x / s), n1_above = normal_cdf(-(x - 1) / s);
  if (remove) return (1 - q) * n0_above + q * n1_above - std::exp(eps) * n0_above;
  return (1 - n0_above) - std::exp(eps) * ((1 - q) * (1 - n0_above) + q * (1 - n1_above));
}

// The eps where a decreasing delta(eps) meets delta, by bisection on [0, high].
double invert(const std::function<double(double)>& delta_of, double delta, double high = 100) {
  double low = 0;
  if (delta_of(0) <= delta) return 0;
  for (int k = 0; k < 200; ++k) {
    const double middle = 0.5 * (low + high);
    (delta_of(middle) > delta ? low : high) = middle;
  }
  return high;
}

double pld_eps(double sigma, double q, std::int64_t steps, double delta, double h = kH,
               NeighbouringRelation relation = NeighbouringRelation::kAddRemove) {
  PldAccountant accountant(relation, {h});
  accountant.step(sigma, q, steps);
  return accountant.epsilon(delta);
}

TEST(PldAccountant, GaussianMechanismMatchesClosedFormToOneGridStep) {
  double worst = 0;
  for (double s : {0.5, 1.0, 2.0, 5.0}) {
    for (double delta : {1e-3, 1e-5, 1e-8}) {
      const double exact = invert([&](double e) { return gaussian_delta(s, e); }, delta);
      const double eps = pld_eps(s, 1.0, 1, delta);
      EXPECT_GE(eps, exact - 1e-12) << "s = " << s << ", delta = " << delta;
      EXPECT_LE(eps, exact + kH) << "s = " << s << ", delta = " << delta;
      worst = std::max(worst, eps - exact);
    }
    // delta at given eps: exact at grid losses, above the exact value in between; round-off
    // (1e-13 relative) and the truncated mass aside (at L = inf: <= 5e-16 from the
    // discretisation and from each of the two compositions into the accountant's PLD).
    PldAccountant accountant(NeighbouringRelation::kAddRemove, {kH});
    accountant.step(s, 1.0);
    for (double eps : {0.0, 0.3, 1.0, 2.5}) {
      const double exact = gaussian_delta(s, eps);
      EXPECT_GE(accountant.delta(eps), exact * (1 - 1e-13));
      EXPECT_LE(accountant.delta(eps), gaussian_delta(s, eps - kH) * (1 + 1e-13) + 1.5e-15);
    }
  }
  std::printf("[ observed ] Gaussian, one step: eps - exact <= %.3g (stated h = %.0e)\n", worst, kH);
}

// Small noise without subsampling: the losses reach +-800, where e^u underflowed in
// log(1 - q + q e^u) at q = 1 (a loss of -inf: "needs inf grid points for noise 0.03"). The
// closed form in logs, since e^eps and Phi(-38) are near the ends of double's range.
TEST(PldAccountant, SmallNoiseWithoutSubsamplingMatchesClosedForm) {
  const auto log_normal_tail = [](double a) {
    return std::log(0.5) + log_erfc(a / std::numbers::sqrt2);
  };  // log Phi(-a)
  for (double s : {0.03, 0.05}) {
    const auto delta_of = [&](double eps) {
      return std::exp(log_normal_tail(eps * s - 1 / (2 * s))) - std::exp(eps + log_normal_tail(eps * s + 1 / (2 * s)));
    };
    const double h = 1e-3, exact = invert(delta_of, 1e-5, 1e4);
    const double eps = pld_eps(s, 1.0, 1, 1e-5, h);
    EXPECT_GE(eps, exact - 1e-9 * exact) << "s = " << s;
    EXPECT_LE(eps, exact + h) << "s = " << s;
  }
}

TEST(PldAccountant, SubsampledStepMatchesClosedFormInBothDirections) {
  for (double q : {0.01, 0.2}) {
    for (double s : {0.8, 2.0}) {
      for (bool remove : {true, false}) {
        const DiscretePld pld = gaussian_pld(s, q, remove ? PldDirection::kRemove : PldDirection::kAdd, {kH});
        for (double delta : {1e-3, 1e-6}) {
          const double exact = invert([&](double e) { return subsampled_delta(s, q, e, remove); }, delta);
          const double eps = pld_epsilon(pld, kH, delta);
          EXPECT_GE(eps, exact - 1e-12) << "q " << q << " s " << s << " remove " << remove;
          EXPECT_LE(eps, exact + kH) << "q " << q << " s " << s << " remove " << remove;
        }
      }
    }
  }
}

TEST(PldAccountant, CompositionOfGaussiansIsOneGaussianWithSigmaOverSqrtK) {
  double worst = 0;
  for (std::int64_t k : {4, 25, 100}) {
    const double sigma = 3.0;
    for (double delta : {1e-5, 1e-7}) {
      const double exact =
          invert([&](double e) { return gaussian_delta(sigma / std::sqrt(static_cast<double>(k)), e); }, delta);
      const double eps = pld_eps(sigma, 1.0, k, delta);
      EXPECT_GE(eps, exact - 1e-9) << "k = " << k;
      EXPECT_LE(eps, exact + static_cast<double>(k) * kH) << "k = " << k;
      worst = std::max(worst, (eps - exact) / (static_cast<double>(k) * kH));
    }
  }
  std::printf("[ observed ] k Gaussians: eps - exact <= %.3g of the stated k h\n", worst);
}

TEST(PldAccountant, NeverAboveRdpOnAGrid) {
  for (double q : {0.001, 0.01, 0.1}) {
    for (double sigma : {0.8, 2.0}) {
      for (std::int64_t steps : {1, 300}) {
        for (NeighbouringRelation relation : {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
          RdpAccountant rdp(rdp_orders(OrderGrid::kOpacus), relation);
          rdp.step(sigma, q, steps);
          const double pld = pld_eps(sigma, q, steps, 1e-5, kH, relation);
          EXPECT_LE(pld, rdp.epsilon(1e-5))
              << "q " << q << " sigma " << sigma << " steps " << steps << " " << to_string(relation);
          EXPECT_GT(pld, 0.0);
        }
      }
    }
  }
}

TEST(PldAccountant, WithinStatedErrorOfAFinerGrid) {
  double worst = 0;
  for (auto [q, sigma, steps] :
       {std::tuple{0.01, 1.1, 1000}, std::tuple{0.1, 2.0, 100}, std::tuple{0.004, 0.9, 3000}}) {
    const double coarse = pld_eps(sigma, q, steps, 1e-5, 1e-3);
    const double fine = pld_eps(sigma, q, steps, 1e-5, 1e-4);
    // Both are upper bounds on the same eps; the coarse one exceeds the truth by at most steps h.
    EXPECT_GE(coarse, fine - 1e-4 * static_cast<double>(steps));
    EXPECT_LE(coarse - fine, 1e-3 * static_cast<double>(steps));
    worst = std::max(worst, std::abs(coarse - fine));
  }
  std::printf("[ observed ] h = 1e-3 vs 1e-4: |eps difference| <= %.3g\n", worst);
}

TEST(PldAccountant, SelfCompositionByOneTransformEqualsRepeatedSquaring) {
  // Two algorithms for the same composition: delta agrees to round-off plus the difference of the
  // tail mass each moved to L = inf (truncation and FFT round-off below the noise floor).
  const PldSettings settings{1e-3};
  double worst = 0;
  for (auto [s, q, k] : {std::tuple{1.1, 0.01, std::int64_t{10000}}, std::tuple{0.55, 0.01, std::int64_t{3000}},
                         std::tuple{2.0, 0.2, std::int64_t{37}}, std::tuple{1.0, 1.0, std::int64_t{2}}}) {
    for (PldDirection direction : {PldDirection::kRemove, PldDirection::kAdd}) {
      const DiscretePld one = gaussian_pld(s, q, direction, settings);
      const DiscretePld fast = self_compose(one, k, settings.truncation_mass);
      const DiscretePld reference = self_compose_by_squaring(one, k, settings.truncation_mass);
      for (double eps : {0.0, 0.5, 1.0, 2.0, 4.0}) {
        const double a = pld_delta(fast, settings.discretization, eps);
        const double b = pld_delta(reference, settings.discretization, eps);
        // Repeated squaring moves more of the top tail (below its noise floor) to L = inf, and its
        // low tail up; the rest is FFT round-off, grown k-fold by the k-th power (~1e-12 k).
        EXPECT_NEAR(a, b, std::abs(fast.infinity_mass - reference.infinity_mass) + 1e-8 * b + 5e-14)
            << "s " << s << " q " << q << " k " << k << " eps " << eps;
        if (b > 1e-12) worst = std::max(worst, std::abs(a - b) / b);
      }
    }
  }
  std::printf("[ observed ] one transform vs repeated squaring: relative delta difference <= %.3g\n", worst);
}

TEST(PldAccountant, WithoutReplacementUsesSensitivityTwo) {
  // q = 1: no sampling, so replace-one is the Gaussian with sigma / 2.
  const double exact = invert([&](double e) { return gaussian_delta(3.0 / 2, e); }, 1e-5);
  const double eps = pld_eps(3.0, 1.0, 1, 1e-5, kH, NeighbouringRelation::kReplaceOne);
  EXPECT_GE(eps, exact - 1e-12);
  EXPECT_LE(eps, exact + kH);
}

TEST(PrivacyAccountant, IncrementalStepsEqualOneShotComposition) {
  for (AccountantKind kind : {AccountantKind::kRdp, AccountantKind::kPld}) {
    auto make = [&]() -> std::unique_ptr<PrivacyAccountant> {
      if (kind == AccountantKind::kRdp) return std::make_unique<RdpAccountant>();
      return std::make_unique<PldAccountant>();
    };
    auto incremental = make(), one_shot = make();
    for (int k = 0; k < 50; ++k) incremental->step(1.1, 0.02);
    for (int k = 0; k < 20; ++k) incremental->step(2.0, 0.05);
    one_shot->step(1.1, 0.02, 50);
    one_shot->step(2.0, 0.05, 20);
    EXPECT_NEAR(incremental->epsilon(1e-5), one_shot->epsilon(1e-5), 1e-12 * one_shot->epsilon(1e-5));
    EXPECT_NEAR(incremental->delta(1.0), one_shot->delta(1.0), 1e-12 * one_shot->delta(1.0));
    // The state restores the same accountant.
    auto restored = make();
    restored->load_state_dict(nlohmann::json::parse(incremental->state_dict().dump()));
    EXPECT_EQ(restored->epsilon(1e-5), incremental->epsilon(1e-5)) << to_string(kind);
    EXPECT_EQ(restored->history().size(), 2u);
  }
  // RDP: step() adds to the curve as compose() does.
  RdpAccountant stepped, composed;
  for (int k = 0; k < 30; ++k) stepped.step(1.3, 0.01);
  composed.compose(1.3, 0.01, 30);
  for (std::size_t k = 0; k < stepped.rdp().size(); ++k)
    EXPECT_NEAR(stepped.rdp()[k], composed.rdp()[k], 1e-13 * composed.rdp()[k]);
}

// The state names the neighbouring relation ("neighbouring_relation": "add-remove" /
// "replace-one"); a state of the previous version, which named the batch sampling ("sampling":
// "poisson", "uniform" or "without-replacement"), still loads, as the same accountant.
TEST(PrivacyAccountant, StateDictsOfThePreviousVersionLoad) {
  const std::pair<const char*, NeighbouringRelation> former[] = {
      {"poisson", NeighbouringRelation::kAddRemove},
      {"uniform", NeighbouringRelation::kReplaceOne},
      {"without-replacement", NeighbouringRelation::kReplaceOne}};
  const nlohmann::json history =
      nlohmann::json::parse(R"([{"noise_multiplier": 1.1, "sample_rate": 0.02, "steps": 50}])");
  for (const auto& [sampling, relation] : former) {
    RdpAccountant rdp_now(rdp_orders(OrderGrid::kOpacus), relation);
    rdp_now.step(1.1, 0.02, 50);
    nlohmann::json state = rdp_now.state_dict();
    EXPECT_EQ(state["neighbouring_relation"], to_string(relation));
    EXPECT_FALSE(state.contains("sampling"));
    state.erase("neighbouring_relation");
    state["sampling"] = sampling;
    RdpAccountant rdp_then(rdp_orders(OrderGrid::kOpacus), NeighbouringRelation::kAddRemove);
    rdp_then.load_state_dict(state);
    EXPECT_EQ(rdp_then.relation(), relation) << sampling;
    EXPECT_EQ(rdp_then.epsilon(1e-5), rdp_now.epsilon(1e-5)) << sampling;

    PldAccountant pld_now(relation, {1e-3});
    pld_now.step(1.1, 0.02, 50);
    const nlohmann::json pld_then_state = {{"accountant", "pld"},
                                           {"sampling", sampling},
                                           {"discretization", 1e-3},
                                           {"truncation_mass", 1e-15},
                                           {"history", history}};
    PldAccountant pld_then;
    pld_then.load_state_dict(pld_then_state);
    EXPECT_EQ(pld_then.relation(), relation) << sampling;
    EXPECT_EQ(pld_then.epsilon(1e-5), pld_now.epsilon(1e-5)) << sampling;
    EXPECT_EQ(pld_now.state_dict()["neighbouring_relation"], to_string(relation));
  }
  nlohmann::json shuffled = PldAccountant().state_dict();
  shuffled.erase("neighbouring_relation");
  shuffled["sampling"] = "shuffle";
  expect_invalid_argument_naming([&] { PldAccountant().load_state_dict(shuffled); }, "no accountant covers");
  shuffled.erase("sampling");
  expect_invalid_argument_naming([&] { PldAccountant().load_state_dict(shuffled); }, "accountant state");
}

TEST(PrivacyAccountant, EmptyAccountantReportsZero) {
  RdpAccountant rdp;
  PldAccountant pld;
  for (const PrivacyAccountant* accountant :
       {static_cast<const PrivacyAccountant*>(&rdp), static_cast<const PrivacyAccountant*>(&pld)}) {
    EXPECT_EQ(accountant->epsilon(1e-5), 0.0);
    EXPECT_EQ(accountant->delta(0.0), 0.0);
  }
  // q = 0 releases nothing either.
  pld.step(1.0, 0.0, 100);
  EXPECT_EQ(pld.epsilon(1e-5), 0.0);
}

TEST(PrivacyAccountant, DeltaAndEpsilonAreInverse) {
  PldAccountant pld;
  pld.step(1.0, 0.01, 500);
  const double eps = pld.epsilon(1e-5);
  EXPECT_NEAR(pld.delta(eps), 1e-5, 1e-9);
  RdpAccountant rdp;
  rdp.step(1.0, 0.01, 500);
  EXPECT_NEAR(rdp.delta(rdp.epsilon(1e-5)), 1e-5, 1e-9);
}

TEST(PrivacyAccountant, NoiseMultiplierForTargetEpsilon) {
  // h = 1e-3 keeps the search quick; any h gives an upper bound.
  const auto make_pld = [] {
    return std::unique_ptr<PrivacyAccountant>(new PldAccountant(NeighbouringRelation::kAddRemove, {1e-3}));
  };
  const auto make_rdp = [] { return std::unique_ptr<PrivacyAccountant>(new RdpAccountant()); };
  const double sigma_pld = noise_multiplier_for_epsilon(make_pld, 2.0, 1e-5, 0.01, 1000).noise_multiplier;
  const double sigma_rdp = noise_multiplier_for_epsilon(make_rdp, 2.0, 1e-5, 0.01, 1000).noise_multiplier;
  EXPECT_LE(pld_eps(sigma_pld, 0.01, 1000, 1e-5, 1e-3), 2.0);
  EXPECT_GE(pld_eps(sigma_pld, 0.01, 1000, 1e-5, 1e-3), 2.0 * (1 - 1e-4));
  // The tighter accountant needs less noise for the same eps.
  EXPECT_LT(sigma_pld, sigma_rdp);
}

// Issue 50: from about 2e15 steps the Chernoff window lost every digit to round-off and
// collapsed to one point, whose FFT crashed (SIGSEGV); every count up to the largest is now
// refused by the grid check with the points it would need.
TEST(PldAccountant, HugeStepCountsAreRefusedByTheGridCheckNotCrashed) {
  for (std::int64_t steps : {std::int64_t{1'000'000'000'000'000}, std::int64_t{2'000'000'000'000'000},
                             std::int64_t{100'000'000'000'000'000}, std::numeric_limits<std::int64_t>::max()}) {
    PldAccountant accountant;
    accountant.step(1.0, 0.01, steps);
    expect_invalid_argument_naming([&] { accountant.epsilon(1e-5); }, "grid points (at most");
  }
  PldAccountant moderate;  // the window's widening leaves ordinary counts as they were
  moderate.step(1.0, 0.01, 1000);
  RdpAccountant rdp;
  rdp.step(1.0, 0.01, 1000);
  EXPECT_LT(moderate.epsilon(1e-5), rdp.epsilon(1e-5));
  EXPECT_GT(moderate.epsilon(1e-5), 1.5);
}

// Issue 50: the grids grew until the machine's memory was gone (--target-eps 1e9 searches down to
// tiny noise). Every grid, one step's, a self-composition's and a composition's, is estimated and
// refused beyond max_memory before it is allocated; the estimate is what the FFT takes.
TEST(PldAccountant, GridsBeyondMaxMemoryAreRefusedWithTheEstimate) {
  // One step at noise 0.05 spans losses of +-362: 7.2e6 points at h = 1e-4, 116 MB.
  PldSettings small;
  small.max_memory = ByteSize{std::uint64_t{64} << 20};
  PldAccountant one_step(NeighbouringRelation::kAddRemove, small);
  one_step.step(0.05, 1.0, 1);
  EXPECT_MEMORY_LIMIT(one_step.epsilon(1e-5), "the PLD of one step at noise 0.05", "a loss grid of",
                      "a coarser discretization or fewer steps", "max_memory = 64M");
  // 1000 steps at q = 0.5: each step fits, the composition's FFT (3.1e6 points, 280 MiB) does not.
  PldAccountant composed(NeighbouringRelation::kAddRemove, small);
  composed.step(1.0, 0.5, 1000);
  EXPECT_MEMORY_LIMIT(composed.epsilon(1e-5), "the composition of 1000 steps", "a loss grid of");
  // Within the budget the answer is the default budget's.
  PldAccountant within(NeighbouringRelation::kAddRemove, small), unlimited;
  within.step(1.0, 0.01, 1000);
  unlimited.step(1.0, 0.01, 1000);
  EXPECT_EQ(within.epsilon(1e-5), unlimited.epsilon(1e-5));
  // The estimate: 16 bytes a grid point alone, 64 an FFT point and 8 an output point.
  EXPECT_EQ(pld_grid_bytes(1000, 0), 16000u);
  EXPECT_EQ(pld_grid_bytes(1000, 1024), 64u * 1024 + 8000);
  EXPECT_EQ(pld_grid_bytes(UINT64_MAX, 0), UINT64_MAX);
}

// Issue 50: at q = 1e-19 (or 1e-300) log(1 - q + q e^u) cancelled to round-off below 0 at the top
// of the grid, putting a third of P's mass at an infinite loss (eps = inf), while 1e-17 gave 0.
TEST(PldAccountant, TinySampleRatesGiveTheSmallEpsilonOfAlmostNoSampling) {
  for (double q : {1e-300, 1e-19, 1e-17, 1e-12}) {
    PldAccountant accountant;
    accountant.step(1.0, q, 1000);
    RdpAccountant rdp;
    rdp.step(1.0, q, 1000);
    const double eps = accountant.epsilon(1e-5);
    EXPECT_GE(eps, 0.0) << q;
    EXPECT_LT(eps, 1e-3) << q;  // at most a grid step or two (h = 1e-4 per step, losses of order q)
    EXPECT_LE(eps, rdp.epsilon(1e-5)) << q;
    EXPECT_LT(accountant.composed(PldDirection::kRemove).infinity_mass, 1e-12) << q;
  }
}

TEST(PrivacyAccountant, BadInputsNameTheValue) {
  for (AccountantKind kind : {AccountantKind::kRdp, AccountantKind::kPld}) {
    auto make = [&]() -> std::unique_ptr<PrivacyAccountant> {
      if (kind == AccountantKind::kRdp) return std::make_unique<RdpAccountant>();
      return std::make_unique<PldAccountant>();
    };
    expect_invalid_argument_naming([&] { make()->step(1.0, 1.5); }, "sample_rate = 1.5");
    expect_invalid_argument_naming([&] { make()->step(1.0, -0.1); }, "sample_rate = -0.1");
    expect_invalid_argument_naming([&] { make()->step(0.0, 0.1); }, "noise_multiplier = 0");
    expect_invalid_argument_naming([&] { make()->step(-1.0, 0.1); }, "noise_multiplier = -1");
    expect_invalid_argument_naming([&] { make()->step(1.0, 0.1, -1); }, "steps = -1");
    expect_invalid_argument_naming([&] { make()->epsilon(0.0); }, "delta = 0");
    expect_invalid_argument_naming([&] { make()->epsilon(1.0); }, "delta = 1");
    expect_invalid_argument_naming([&] { make()->delta(-1.0); }, "epsilon = -1");
    expect_invalid_argument_naming([&] { make()->load_state_dict(nlohmann::json::object()); }, "accountant state");
  }
  expect_invalid_argument_naming([] { PldAccountant(NeighbouringRelation::kAddRemove, {0.0}); }, "discretization = 0");
  expect_invalid_argument_naming([] { PldAccountant(NeighbouringRelation::kAddRemove, {-1e-4}); },
                                 "discretization = -0.0001");
  // A grid coarser than a nat rounds every loss up by up to h: 1000 reported eps = inf (issue 50).
  expect_invalid_argument_naming([] { PldAccountant(NeighbouringRelation::kAddRemove, {1000.0}); },
                                 "discretization = 1000");
  expect_invalid_argument_naming([] { PldAccountant(NeighbouringRelation::kAddRemove, {1e300}); },
                                 "discretization = 1e+300");
  expect_invalid_argument_naming(
      [] {
        PldAccountant(NeighbouringRelation::kAddRemove, {1e-4, 0.0});
      },
      "truncation_mass = 0");
  RdpAccountant rdp;
  expect_invalid_argument_naming([&] { PldAccountant().load_state_dict(rdp.state_dict()); }, "\"pld\"");
  expect_invalid_argument_naming([] { parse_enum<AccountantKind>("gdp"); }, "expected one of rdp, pld");
}

}  // namespace
}  // namespace filkit
