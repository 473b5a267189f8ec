// The option parsers: option_from_text (include/filkit/base/options.hpp) for every kind of field
// the options structs have, and parse_index_list (src/base/index_list.cpp). The first byte picks
// the parser, the rest is the text.
#include "filkit/base/index_list.hpp"
#include "filkit/base/options.hpp"
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/models/glm.hpp"

#include "fuzz_util.hpp"

namespace {

template <typename T>
void parse_as(const std::string& text) {
  T value{};
  if (!filkit::fuzz::runs_or_rejects([&] { filkit::option_from_text("field", text, value); })) return;
  (void)filkit::option_to_json(value).dump();  // what the JSON settings record: never throws
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string text(filkit::fuzz::as_text(data + 1, size - 1));
  using filkit::Index;
  switch (data[0] % 20) {
    case 0: parse_as<int>(text); break;
    case 1: parse_as<Index>(text); break;
    case 2: parse_as<unsigned long long>(text); break;
    case 3: parse_as<std::uint64_t>(text); break;
    case 4: parse_as<double>(text); break;
    case 5: parse_as<float>(text); break;
    case 6: parse_as<bool>(text); break;
    case 7: parse_as<std::string>(text); break;
    case 8: parse_as<filkit::ModelKind>(text); break;
    case 9: parse_as<filkit::MissingPolicy>(text); break;
    case 10: parse_as<std::vector<int>>(text); break;
    case 11: parse_as<std::vector<Index>>(text); break;
    case 12: parse_as<std::vector<double>>(text); break;
    case 13: parse_as<std::vector<std::string>>(text); break;
    case 14: parse_as<std::optional<Index>>(text); break;
    case 15: parse_as<std::optional<double>>(text); break;
    case 16: parse_as<std::optional<std::vector<int>>>(text); break;
    case 17: parse_as<std::optional<filkit::ModelKind>>(text); break;
    case 18: parse_as<std::optional<bool>>(text); break;
    default:
      filkit::fuzz::runs_or_rejects([&] {
        for (const Index value : filkit::parse_index_list(text, "rows")) FILKIT_FUZZ_CHECK(value >= 0);
      });
  }
  return 0;
}
