// Results that must be finite, and the stage a job is in when something fails without context.
#include "filkit/base/finite.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"

#include "test_util.hpp"

#include <cmath>
#include <functional>
#include <limits>

namespace filkit {
namespace {

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const NonFiniteResult& error) {
    return error.what();
  }
  return "";
}

TEST(RequireFinite, NamesTheStageTheQuantityTheEntryAndTheCause) {
  VectorXd eta = VectorXd::Ones(5);
  EXPECT_NO_THROW(require_finite(eta, "FIL", "eta", "why"));
  eta(3) = std::nan("");
  EXPECT_EQ(message_of([&] { require_finite(eta, "FIL", "eta", "sigma too small"); }),
            "FIL: eta is nan at entry 3 (of 5); sigma too small");
  MatrixXd weights = MatrixXd::Zero(2, 3);
  weights(1, 2) = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(message_of([&] { require_finite(weights, "fit", "a weight", "scale"); }),
            "fit: a weight is -inf at entry (1, 2) (of 6); scale");
  EXPECT_EQ(message_of([&] { require_finite(std::nan(""), "accounting", "kappa", "c"); }),
            "accounting: kappa is nan; c");
}

TEST(StageScope, NamesTheInnermostStageAndKeepsItWhenAnExceptionLeaves) {
  EXPECT_EQ(current_stage(), "");
  {
    const StageScope outer("loading the data");
    {
      const StageScope inner("reading 'x.npz'");
      EXPECT_EQ(current_stage(), "reading 'x.npz'");
    }
    EXPECT_EQ(current_stage(), "loading the data");
  }
  EXPECT_EQ(current_stage(), "");
  try {
    const StageScope stage("fitting the model");
    throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
    EXPECT_EQ(out_of_memory_message(), "out of memory while fitting the model");
  }
  const StageScope reset("next");  // a later stage replaces the one left by the exception
  EXPECT_EQ(current_stage(), "next");
}

TEST(Summary, MeanAndDeviationOfValuesNear1e300DoNotOverflow) {
  VectorXd values(4);
  values << 1.5e308, 1.7e308, 1e308, 0.0;  // their sum is beyond a double's range, their mean is not
  EXPECT_NEAR(mean_without_overflow(values) / 1.05e308, 1.0, 1e-12);
  VectorXd near(3);
  near << 1e300, 2e300, 3e300;
  EXPECT_NEAR(root_mean_square_deviation(near, 2e300, 3.0) / (std::sqrt(2.0 / 3.0) * 1e300), 1.0, 1e-12);
  const Summary summary = summarize(near);
  EXPECT_NEAR(summary.mean / 2e300, 1.0, 1e-12);
  EXPECT_NEAR(summary.std / 1e300, 1.0, 1e-12);  // sample std of 1, 2, 3 (x 1e300)
}

}  // namespace
}  // namespace filkit
