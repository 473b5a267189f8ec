// The PLD accountant (src/privacy/pld_accountant.cpp, its mathematics in
// privacy_loss_distribution.cpp) with the values a user gives it: the settings (--discretization,
// the truncation mass), the steps' noise multipliers, sample rates and counts, the delta or eps
// asked for, and a state dict to resume from.
// Input: a mode byte, then text: whitespace-separated numbers h, truncation_mass, up to four
// triples (noise_multiplier, sample_rate, steps), then delta and eps (any the text lacks keep a
// default; strtod's spellings, inf and nan included); after a NUL, a JSON state dict. Mode bit 0:
// sampling without replacement (replace one) instead of Poisson; bit 1: the state dict is loaded instead of the
// steps. The budget is small (8 MiB), so that every grid a valid input asks for is computed in well
// under the targets' time limit: a grid beyond it is a MemoryLimitError, as a user's beyond
// --max-memory is.
#include "filkit/privacy/pld_accountant.hpp"

#include "fuzz_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace {

constexpr filkit::ByteSize kPldMemory{std::uint64_t{8} << 20};

std::vector<double> numbers(std::string_view text) {
  std::vector<double> values;
  std::istringstream in{std::string(text)};
  std::string token;
  while (in >> token && values.size() < 16) values.push_back(std::strtod(token.c_str(), nullptr));
  return values;
}

void check_answers(const filkit::PldAccountant& accountant, double delta, double eps) {
  filkit::fuzz::runs_or_rejects([&] {
    const double e = accountant.epsilon(delta);
    FILKIT_FUZZ_CHECK(e >= 0 && !std::isnan(e));
  });
  filkit::fuzz::runs_or_rejects([&] {
    const double d = accountant.delta(eps);
    FILKIT_FUZZ_CHECK(d >= 0 && d <= 1);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::vector<std::string_view> parts = filkit::fuzz::split(filkit::fuzz::as_text(data + 1, size - 1), '\0', 2);
  const std::vector<double> v = numbers(parts[0]);
  const auto at = [&](std::size_t k, double otherwise) { return k < v.size() ? v[k] : otherwise; };
  filkit::PldSettings settings;
  settings.discretization = at(0, 1e-2);
  settings.truncation_mass = at(1, 1e-15);
  settings.max_memory = kPldMemory;
  const filkit::NeighbouringRelation relation =
      data[0] & 1 ? filkit::NeighbouringRelation::kReplaceOne : filkit::NeighbouringRelation::kAddRemove;
  std::optional<filkit::PldAccountant> accountant;
  if (!filkit::fuzz::runs_or_rejects([&] { accountant.emplace(relation, settings); })) return 0;
  if (data[0] & 2) {
    const nlohmann::json state =
        nlohmann::json::parse(parts.size() > 1 ? parts[1] : std::string_view(), nullptr, /*allow_exceptions=*/false);
    if (!filkit::fuzz::runs_or_rejects([&] { accountant->load_state_dict(state); })) return 0;
  } else {
    const std::size_t triples = v.size() > 2 ? std::min<std::size_t>((v.size() - 2) / 3, 4) : 0;
    for (std::size_t t = 0; t < triples; ++t) {
      const double steps = v[2 + 3 * t + 2];
      // A count that is not an int64 is the caller's to refuse (the CLI's parser does); here the
      // accountant gets what the cast gives for every count within int64's range.
      if (!(std::abs(steps) < 9e18)) continue;
      filkit::fuzz::runs_or_rejects(
          [&] { accountant->step(v[2 + 3 * t], v[2 + 3 * t + 1], static_cast<std::int64_t>(steps)); });
    }
  }
  const std::size_t answers = v.size() > 2 ? 2 + 3 * std::min<std::size_t>((v.size() - 2) / 3, 4) : v.size();
  const double delta = at(answers, 1e-5), eps = at(answers + 1, 1.0);
  check_answers(*accountant, delta, eps);
  // What a resume gives: the same answers from the state dict.
  filkit::fuzz::runs_or_rejects([&] {
    const nlohmann::json state = accountant->state_dict();
    filkit::PldAccountant resumed(relation, settings);
    resumed.load_state_dict(state);
    double before = 0, after = 0;
    if (filkit::fuzz::runs_or_rejects([&] { before = accountant->epsilon(delta); }) &&
        filkit::fuzz::runs_or_rejects([&] { after = resumed.epsilon(delta); }))
      FILKIT_FUZZ_CHECK(before == after || (std::isnan(before) && std::isnan(after)));
  });
  return 0;
}
