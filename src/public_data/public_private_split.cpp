// The public/private split of the rows and the magnitude mask of the coordinates
// (public_private_split.hpp).
#include "filkit/public_data/public_private_split.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"

#include "filkit/base/errors.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace filkit {

PublicPrivateSplit split_public_private(const Dataset& data, double public_fraction, std::uint64_t seed,
                                        PublicSplit which) {
  require_in_interval("public_fraction", public_fraction, 0.0, End::kOpen, 1.0, End::kOpen);
  PublicPrivateSplit split;
  if (which == PublicSplit::kFirst) {  // as many rows as the shuffle takes, from the top
    const Index n_public = held_out_count(data.n(), public_fraction);
    for (Index i = 0; i < data.n(); ++i) (i < n_public ? split.public_rows : split.private_rows).push_back(i);
  } else {  // shuffle_split's parts come sorted
    TrainTestIndices indices = shuffle_split(data.n(), public_fraction, seed);
    split.public_rows = std::move(indices.test);
    split.private_rows = std::move(indices.train);
  }
  if (split.public_rows.empty() || split.private_rows.empty())
    option_error("public_fraction", format_double(public_fraction),
                 "of " + std::to_string(data.n()) + " examples, leaves the " +
                     (split.public_rows.empty() ? "public" : "private") +
                     " part empty: use more data or a fraction nearer 0.5");
  split.public_part = data.select_rows(split.public_rows);
  split.private_part = data.select_rows(split.private_rows);
  return split;
}

std::vector<bool> smallest_magnitude_mask(const VectorXd& w, double freeze_fraction, const std::vector<bool>& fixed) {
  require_in_interval("freeze_fraction", freeze_fraction, 0.0, End::kClosed, 1.0, End::kOpen);
  if (!fixed.empty() && static_cast<Index>(fixed.size()) != w.size())
    throw DataError("smallest_magnitude_mask: " + std::to_string(fixed.size()) + " fixed flags for " +
                    std::to_string(w.size()) + " coordinates");
  const auto is_fixed = [&](Index i) { return !fixed.empty() && fixed[static_cast<std::size_t>(i)]; };
  std::vector<Index> order;
  for (Index i = 0; i < w.size(); ++i)
    if (!is_fixed(i)) order.push_back(i);
  const Index frozen = std::llround(freeze_fraction * static_cast<double>(order.size()));
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return std::abs(w(a)) < std::abs(w(b)); });
  std::vector<bool> mask(static_cast<std::size_t>(w.size()), false);
  for (Index i = 0; i < w.size(); ++i) mask[static_cast<std::size_t>(i)] = is_fixed(i);
  for (Index k = 0; k < frozen; ++k) mask[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = true;
  return mask;
}

}  // namespace filkit
