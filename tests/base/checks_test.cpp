// The typed errors (base/errors.hpp) and the option checks (base/checks.hpp): one message form
// naming the option by its declared name, which each front end spells its own way.
#include "filkit/base/checks.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/finite.hpp"
#include "filkit/base/resources.hpp"

#include "test_util.hpp"

#include <cmath>
#include <limits>

namespace filkit {
namespace {

/// The message of the OptionError `statement` throws, with its option (empty if none is thrown).
template <class Statement>
std::pair<std::string, std::string> option_error_of(Statement&& statement) {
  try {
    statement();
  } catch (const OptionError& error) {
    return {error.what(), error.option()};
  }
  return {};
}

std::string dashes(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

TEST(Message, SpellsOnlyTheMarkedOptions) {
  const Message text = "clip_norm = 1: must be <= " + option_name("clip_norm") + " of " + option_name("max_memory");
  EXPECT_EQ(text.plain(), "clip_norm = 1: must be <= clip_norm of max_memory");
  EXPECT_EQ(text.spelled(dashes), "clip_norm = 1: must be <= --clip-norm of --max-memory");
  EXPECT_EQ(text.options(), (std::vector<std::string>{"clip_norm", "max_memory"}));
  EXPECT_EQ(Message().plain(), "");
}

TEST(OptionError, HasOneFormAndCarriesTheDeclaredName) {
  const OptionError error("clip_norm", "-1", "must be > 0");
  EXPECT_STREQ(error.what(), "clip_norm = -1: must be > 0");
  EXPECT_EQ(error.option(), "clip_norm");
  EXPECT_EQ(error.kind(), ErrorKind::kOption);
  EXPECT_EQ(error.message(dashes), "--clip-norm = -1: must be > 0");
  const OptionError without_value("methods", "name at least one of " + option_name("methods_list"));
  EXPECT_EQ(without_value.message(dashes), "--methods: name at least one of --methods-list");
  // Still a std::invalid_argument for code that catches those.
  EXPECT_THROW(throw OptionError("x", "1", "rule"), std::invalid_argument);
}

TEST(Errors, EachKindIsItsStandardExceptionAndAFilkitError) {
  EXPECT_THROW(throw DataError("file 'a.csv' line 3: not a number"), std::invalid_argument);
  EXPECT_THROW(throw ResourceError("cannot open"), std::runtime_error);
  EXPECT_THROW(throw MemoryLimitError("needs 4 GiB"), ResourceError);
  EXPECT_THROW(throw NumericalError("diverged"), std::runtime_error);
  EXPECT_THROW(require_finite(std::nan(""), "fit", "a weight", "cause"), NumericalError);
  const MemoryLimitError memory("x needs 4 GiB, more than " + option_name("max_memory"));
  EXPECT_EQ(memory.kind(), ErrorKind::kResource);
  EXPECT_EQ(error_message(memory, dashes), "x needs 4 GiB, more than --max-memory");
  EXPECT_EQ(error_message(std::runtime_error("plain"), dashes), "plain");
}

TEST(Checks, RefuseWithTheOptionTheValueAndTheRule) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  using Result = std::pair<std::string, std::string>;
  EXPECT_EQ(option_error_of([] { require_positive("clip_norm", -1.0); }),
            Result("clip_norm = -1: must be > 0", "clip_norm"));
  EXPECT_EQ(option_error_of([&] { require_positive("clip_norm", nan); }).first, "clip_norm = nan: must be > 0");
  EXPECT_EQ(option_error_of([&] { require_positive("clip_norm", inf); }).first, "clip_norm = inf: must be finite");
  EXPECT_EQ(option_error_of([] { require_positive("steps", 0); }).first, "steps = 0: must be >= 1");
  EXPECT_EQ(option_error_of([] { require_positive("steps", Index{-3}); }).first, "steps = -3: must be >= 1");
  EXPECT_EQ(option_error_of([] { require_non_negative("l2", -0.5); }).first, "l2 = -0.5: must be >= 0");
  EXPECT_EQ(option_error_of([] { require_non_negative("stop_after", -1); }).first, "stop_after = -1: must be >= 0");
  EXPECT_EQ(option_error_of([] { require_in_range("probes", 0, 1, 1000000); }).first,
            "probes = 0: must be in 1..1000000");
  EXPECT_EQ(option_error_of([] { require_in_interval("momentum", 1.0, 0.0, End::kClosed, 1.0, End::kOpen); }).first,
            "momentum = 1: must lie in [0, 1)");
  EXPECT_EQ(option_error_of([&] { require_in_interval("delta", nan, 0.0, End::kOpen, 1.0, End::kOpen); }).first,
            "delta = nan: must lie in (0, 1)");
  // Values that meet the rules pass, the ends as the interval says.
  EXPECT_NO_THROW(require_positive("x", 1e-300));
  EXPECT_NO_THROW(require_non_negative("x", 0.0));
  EXPECT_NO_THROW(require_in_interval("x", 0.0, 0.0, End::kClosed, 1.0, End::kOpen));
  EXPECT_NO_THROW(require_in_range("x", 1000000, 1, 1000000));
}

TEST(Checks, TheBaseHelpersThrowOptionErrors) {
  EXPECT_EQ(option_error_of([] { parse_byte_size("max_memory", "2X"); }).second, "max_memory");
  EXPECT_EQ(option_error_of([] { check_thread_count("threads", -1); }).second, "threads");
  const auto [text, option] = option_error_of([] { bounded_iterations({{"steps", 1LL << 62}, {"runs", 4}}, "steps"); });
  EXPECT_EQ(option, "steps");
  EXPECT_NE(text.find("steps = 4611686018427387904 times runs = 4 makes"), std::string::npos) << text;
  try {
    bounded_iterations({{"steps", 1LL << 62}, {"runs", 4}}, "steps");
  } catch (const OptionError& error) {
    EXPECT_NE(error.message(dashes).find("--steps = 4611686018427387904 times --runs = 4"), std::string::npos);
  }
  try {
    check_memory(std::uint64_t{1} << 40, ByteSize{1 << 20}, "reading " + option_name("data"));
    ADD_FAILURE() << "expected a MemoryLimitError";
  } catch (const MemoryLimitError& error) {
    const std::string spelled = error.message(dashes);
    EXPECT_NE(spelled.find("reading --data needs 1.0 TiB, more than --max-memory = 1M"), std::string::npos) << spelled;
  }
}

}  // namespace
}  // namespace filkit
