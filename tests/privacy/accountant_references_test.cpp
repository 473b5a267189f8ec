// The accountants against values published by other implementations (docs/accountants.md, "Checked
// against other implementations"):
// - sampling without replacement (replace-one), RDP: dp_accounting's RdpAccountant with
//   SampledWithoutReplacementDpEvent as fl4health checks it (tests/privacy/
//   moments_accountant_test.py, test_user_accountant_fixed_sampling_reproduce_results): the six
//   settings of Table 1 of Andrew, Thakkar, McMahan, Ramaswamy 2021 ("Differentially Private
//   Learning with Adaptive Clipping"), n = 10^6 clients, each calibrated to eps = 5 at
//   delta = n^-1.1; that test asserts eps within 0.1 of 5 and delta within 2e-8 of n^-1.1, on TF
//   Privacy's compute_dp_sgd_privacy order grid. dp_accounting's noise multiplier is per unit of
//   replace-one sensitivity, i.e. filkit's sigma / 2. (dp_accounting's own
//   rdp_privacy_accountant_test.py holds no values for sampling without replacement.)
// - PLD: Koskela, Jälkö, Honkela's Fourier accountant (DPBayes/PLD-Accountant,
//   examples/simple_usage_example.py): sigma = 4, q = 0.01, 10^4 compositions:
//   delta = 4.243484012034273e-06 at eps = 1 for Poisson sampling, remove direction
//   (get_delta_R), and eps = 1.9931200626285734 at delta = 1e-5 for the substitute relation
//   (get_epsilon_S), whose pair ((1-q) N(0, s^2) + q N(1, s^2), (1-q) N(0, s^2) + q N(-1, s^2)) is
//   realised by fixed-size batches too (every other clipped gradient 0, the replaced example's
//   +C against -C): its eps is a LOWER bound on the true eps under replace-one, which every
//   upper bound, filkit's without-replacement RDP and PLD, must reach.
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace filkit {
namespace {

// TF Privacy's compute_dp_sgd_privacy orders, as fl4health's MomentsAccountant passes them.
std::vector<double> tf_privacy_compute_dp_sgd_orders() {
  std::vector<double> orders{1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5};
  for (int order = 5; order < 64; ++order) orders.push_back(order);
  orders.insert(orders.end(), {128.0, 256.0, 512.0});
  return orders;
}

TEST(AccountantReferences, WithoutReplacementRdpMatchesDpAccountingOnAdaptiveClippingTable) {
  struct Setting {
    double z;  // dp_accounting's noise multiplier (per unit of replace-one sensitivity)
    int clients_per_round;
    std::int64_t rounds;
  };
  const Setting settings[] = {{0.669, 2231, 4000}, {0.513, 513, 1500},   {0.659, 2197, 3000},
                              {0.510, 510, 1200},  {1.396, 13958, 1500}, {1.396, 13958, 1500}};
  const double n = 1e6, delta = std::pow(n, -1.1);
  for (const Setting& s : settings) {
    RdpAccountant accountant(tf_privacy_compute_dp_sgd_orders(), NeighbouringRelation::kReplaceOne);
    accountant.step(kReplaceOneSensitivity * s.z, s.clients_per_round / n, s.rounds);
    const double eps = accountant.epsilon(delta), at_five = accountant.delta(5.0);
    EXPECT_NEAR(eps, 5.0, 0.1) << "z = " << s.z << ", " << s.clients_per_round << " a round";
    EXPECT_NEAR(at_five, delta, 2e-8) << "z = " << s.z;
    std::printf("z %.3f, m %d, T %lld: eps %.4f, delta(5) %.4e (n^-1.1 = %.4e)\n", s.z, s.clients_per_round,
                static_cast<long long>(s.rounds), eps, at_five, delta);
  }
}

TEST(AccountantReferences, PoissonPldMatchesTheFourierAccountant) {
  const double published = 4.243484012034273e-06;  // delta at eps = 1, remove direction
  double previous = 1.0;
  for (double h : {1e-4, 1e-5}) {
    PldAccountant accountant(NeighbouringRelation::kAddRemove, PldSettings{h});
    accountant.step(4.0, 0.01, 10000);
    const double remove = pld_delta(accountant.composed(PldDirection::kRemove), h, 1.0);
    std::printf("h %g: remove delta(1) %.10e, published %.10e, relative %.2e\n", h, remove, published,
                remove / published - 1);
    // Pessimistic: above the published value and falling towards it as h shrinks (the Fourier
    // accountant is a plain Riemann sum on a grid of 4e-5, accurate to about 1e-5 relative).
    EXPECT_GE(remove, published * (1 - 2e-5));
    EXPECT_LT(remove, previous);
    EXPECT_GE(accountant.delta(1.0), remove);
    previous = remove;
  }
  EXPECT_NEAR(previous, published, 1e-4 * published);  // h = 1e-5
}

TEST(AccountantReferences, WithoutReplacementReachesTheSubstituteRelationsExactEpsilon) {
  const double published = 1.9931200626285734;  // eps at delta = 1e-5, a lower bound (see the top)
  RdpAccountant rdp(rdp_orders(OrderGrid::kOpacus), NeighbouringRelation::kReplaceOne);
  PldAccountant pld(NeighbouringRelation::kReplaceOne);
  for (PrivacyAccountant* accountant : {static_cast<PrivacyAccountant*>(&rdp), static_cast<PrivacyAccountant*>(&pld)}) {
    accountant->step(4.0, 0.01, 10000);
    const double eps = accountant->epsilon(1e-5);
    std::printf("%s: eps %.6f against the lower bound %.6f\n", accountant->description().c_str(), eps, published);
    EXPECT_GE(eps, published * (1 - 1e-4));
  }
  // And the PLD stays below the RDP bound.
  EXPECT_LT(pld.epsilon(1e-5), rdp.epsilon(1e-5));
}

}  // namespace
}  // namespace filkit
