// The two cuts of private training with public data (public_data_training.hpp; docs/mathematics.md,
// section 11): the data's rows into a public and a private part, and the pre-trained parameters
// into released and frozen coordinates (magnitude pruning, Edmunds 2024, section 2.2).
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/data/dataset.hpp"

#include <cstdint>
#include <vector>

namespace filkit {

/// A data set cut into a public and a private part (disjoint, together every row once).
struct PublicPrivateSplit {
  Dataset public_part;
  Dataset private_part;
  std::vector<Index> public_rows;   ///< rows of the data set, in the order of public_part
  std::vector<Index> private_rows;  ///< rows of the data set, in the order of private_part
};

/// Which rows are public: a seeded random subset (filkit's default), or the first rows in the
/// data's order, as the thesis' code takes them (`get_dataset_splits`: the first
/// round(public_fraction * n) training images public, the rest private, the same for every run).
enum class PublicSplit { kRandom, kFirst };
template <>
struct EnumNames<PublicSplit> {
  static constexpr const char* what = "public split";
  static constexpr std::pair<PublicSplit, const char*> names[] = {{PublicSplit::kRandom, "random"},
                                                                  {PublicSplit::kFirst, "first"}};
};

/// round(public_fraction * n) rows are public, the rest private (both keep the data's row order):
/// chosen by a shuffle seeded with `seed`, or the first ones (PublicSplit::kFirst; `seed` unused).
/// Throws an OptionError (public_fraction) for a fraction outside (0, 1) or a part that would be empty.
PublicPrivateSplit split_public_private(const Dataset& data, double public_fraction, std::uint64_t seed,
                                        PublicSplit split = PublicSplit::kRandom);

/// Magnitude pruning: true for the round(freeze_fraction * p) coordinates of smallest |w| (ties
/// broken by index). freeze_fraction in [0, 1). With `fixed` (one flag per coordinate), the fixed
/// coordinates are frozen as well and the fraction applies to the others: p counts those only.
std::vector<bool> smallest_magnitude_mask(const VectorXd& w, double freeze_fraction,
                                          const std::vector<bool>& fixed = {});

}  // namespace filkit
