// The public/private split of the rows (public_private_split.hpp) and the magnitude mask of the
// coordinates, by hand.
#include "filkit/public_data/public_private_split.hpp"

#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace filkit {
namespace {

TEST(SplitPublicPrivate, CutsEveryRowOnceBySeedAndRefusesBadFractions) {
  const Dataset data = testing::random_classification(100, 3, 2, 1);
  const PublicPrivateSplit split = split_public_private(data, 0.3, 7);
  EXPECT_EQ(split.public_part.n(), 30);
  EXPECT_EQ(split.private_part.n(), 70);
  std::set<Index> all(split.public_rows.begin(), split.public_rows.end());
  all.insert(split.private_rows.begin(), split.private_rows.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_TRUE(std::is_sorted(split.public_rows.begin(), split.public_rows.end()));
  EXPECT_EQ(split.public_part.X.row(4), data.X.row(split.public_rows[4]));
  EXPECT_EQ(split_public_private(data, 0.3, 7).public_rows, split.public_rows);
  EXPECT_NE(split_public_private(data, 0.3, 8).public_rows, split.public_rows);
  for (double bad : {0.0, 1.0, -0.1, 1.5, std::nan("")})
    testing::expect_invalid([&] { split_public_private(data, bad, 1); }, {"public_fraction", "(0, 1)"});
  EXPECT_EQ(split_public_private(data, 0.999, 1).private_part.n(), 1) << "a private example is always kept";
  testing::expect_invalid([&] { split_public_private(data, 0.001, 1); }, {"public part empty"});
}

TEST(SplitPublicPrivate, FirstTakesTheLeadingRowsWhateverTheSeedAsTheThesisCode) {
  const Dataset data = testing::random_classification(100, 3, 2, 1);
  const PublicPrivateSplit split = split_public_private(data, 0.3, 7, PublicSplit::kFirst);
  ASSERT_EQ(split.public_rows.size(), 30u);
  ASSERT_EQ(split.private_rows.size(), 70u);
  for (Index i = 0; i < 30; ++i) EXPECT_EQ(split.public_rows[static_cast<std::size_t>(i)], i);
  for (Index i = 0; i < 70; ++i) EXPECT_EQ(split.private_rows[static_cast<std::size_t>(i)], 30 + i);
  EXPECT_EQ(split.public_part.X, data.X.topRows(30));
  EXPECT_EQ(split.private_part.X, data.X.bottomRows(70));
  EXPECT_EQ(split_public_private(data, 0.3, 8, PublicSplit::kFirst).public_rows, split.public_rows);
  EXPECT_EQ(split_public_private(data, 0.999, 1, PublicSplit::kFirst).private_part.n(), 1);
  testing::expect_invalid([&] { split_public_private(data, 0.001, 1, PublicSplit::kFirst); }, {"public part empty"});
  EXPECT_EQ(split_public_private(data, 0.3, 7, PublicSplit::kRandom).public_rows,
            split_public_private(data, 0.3, 7).public_rows)
      << "random stays the default";
}

TEST(SmallestMagnitudeMask, FreezesTheSmallestAbsoluteValuesTiesByIndex) {
  VectorXd w(6);
  w << 0.5, -0.1, 0.2, -0.2, 3.0, 0.0;
  const std::vector<bool> mask = smallest_magnitude_mask(w, 0.5);
  EXPECT_EQ(mask, (std::vector<bool>{false, true, true, false, false, true}));  // |w| 0, 0.1, then 0.2 at index 2
  EXPECT_EQ(std::count(mask.begin(), mask.end(), true), 3);
  EXPECT_EQ(smallest_magnitude_mask(w, 0.0), std::vector<bool>(6, false));
  testing::expect_invalid([&] { smallest_magnitude_mask(w, 1.0); }, {"freeze_fraction", "[0, 1)"});
  // Fixed coordinates (the reference logit's) are frozen besides round(0.5 x 4) of the others.
  const std::vector<bool> fixed{false, false, false, false, true, true};
  EXPECT_EQ(smallest_magnitude_mask(w, 0.5, fixed), (std::vector<bool>{false, true, true, false, true, true}));
  testing::expect_invalid([&] { smallest_magnitude_mask(w, 0.5, {true}); }, {"1 fixed flags", "6 coordinates"});
}

}  // namespace
}  // namespace filkit
