// The nearest declared names to a mistyped one, for the command line's and Python's messages.
#include "filkit/base/options.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

namespace filkit {

namespace {

// The edit distance with adjacent transpositions (optimal string alignment): one typo, one swap.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::vector<std::string> nearest_names(const std::string& typed, const std::vector<std::string>& names) {
  // Close enough to be a typo: a quarter of the letters wrong, at least 2; or the start of a name.
  const std::size_t allowed = std::max<std::size_t>(2, typed.size() / 4);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const std::string& name : names) {
    std::size_t distance = edit_distance(typed, name);
    const bool starts = typed.size() >= 5 && name.rfind(typed, 0) == 0;
    if (starts) distance = std::min(distance, allowed);
    if (distance <= allowed && name != typed) scored.push_back({distance, name});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> nearest;
  for (const auto& [distance, name] : scored)
    if (nearest.size() < 3 && distance == scored.front().first &&
        std::find(nearest.begin(), nearest.end(), name) == nearest.end())
      nearest.push_back(name);
  return nearest;
}

}  // namespace filkit
