// Option values from text, as flags and Python strings give them: integers within their type's
// range (never wrapped), doubles within a double's, sizes; index lists with their limits.
#include "filkit/base/index_list.hpp"
#include "filkit/base/options.hpp"

#include "test_util.hpp"

#include <cstdint>
#include <optional>

namespace filkit {
namespace {

TEST(OptionFromText, RefusesIntegersBeyondTheFieldsRangeWithTheRange) {
  int threads = 0;
  EXPECT_INVALID_ARGUMENT(option_from_text("trials", "4294967297", threads), "trials = '4294967297'",
                          "an integer in -2147483648..2147483647");
  Index steps = 0;
  EXPECT_INVALID_ARGUMENT(option_from_text("steps", "99999999999999999999", steps), "steps",
                          "9223372036854775807");
  std::uint64_t seed = 0;
  EXPECT_INVALID_ARGUMENT(option_from_text("seed", "-1", seed), "seed = '-1'", "a non-negative integer");
  EXPECT_INVALID_ARGUMENT(option_from_text("steps", "1e3", steps), "steps = '1e3'", "an integer");
  option_from_text("steps", "010", steps);
  EXPECT_EQ(steps, 10);  // decimal, not octal
}

// The settings go into the JSON summary, which holds UTF-8 only (fuzz finding options-1): refused
// before the job, not when the summary is written after it.
TEST(OptionFromText, RefusesTextThatIsNotUtf8) {
  std::string data;
  EXPECT_INVALID_ARGUMENT(option_from_text("data", "d\xff.csv", data), "data: the text is not UTF-8",
                          "index 1: 0xFF");
  EXPECT_TRUE(data.empty());
  option_from_text("data", "donn\xc3\xa9" "es.csv", data);  // UTF-8 beyond ASCII is fine
  EXPECT_EQ(data, "donn\xc3\xa9" "es.csv");
  std::vector<std::string> columns;
  EXPECT_THROW(option_from_text("categorical", "a,\xc3", columns), std::invalid_argument);
}

TEST(OptionFromText, RefusesEveryClassOutOfRangeInAList) {
  std::optional<std::vector<int>> classes;
  EXPECT_INVALID_ARGUMENT(option_from_text("classes", "4294967296,4294967297", classes),
                          "classes = '4294967296'", "an integer in");
  option_from_text("classes", "3,5", classes);
  EXPECT_EQ(*classes, (std::vector<int>{3, 5}));
}

TEST(OptionFromText, RefusesDoublesBeyondADoublesRangeButKeepsTinyOnes) {
  double step_size = 0.0;
  EXPECT_INVALID_ARGUMENT(option_from_text("step_size", "1e400", step_size), "step_size = '1e400'",
                          "magnitude at most 1.8e308");
  EXPECT_INVALID_ARGUMENT(option_from_text("step_size", "0.1x", step_size), "expected a number");
  option_from_text("step_size", "1e-320", step_size);
  EXPECT_GT(step_size, 0.0);
  option_from_text("step_size", "1e308", step_size);
  EXPECT_EQ(step_size, 1e308);
}

TEST(OptionFromText, ReadsAndRecordsSizes) {
  ByteSize budget;
  option_from_text("max_memory", "512M", budget);
  EXPECT_EQ(budget.bytes, std::uint64_t{512} << 20);
  EXPECT_EQ(option_to_json(budget), "512M");
  EXPECT_INVALID_ARGUMENT(option_from_text("max_memory", "lots", budget), "max_memory = 'lots'");
}

TEST(IndexList, RefusesIndicesBeyondAnIndexNamingTheOption) {
  EXPECT_EQ(parse_index_list("0, 5,17", "attribute"), (std::vector<Index>{0, 5, 17}));
  EXPECT_INVALID_ARGUMENT(parse_index_list("1,99999999999999999999", "attribute"), "attribute",
                          "'99999999999999999999' is beyond the largest index");
  EXPECT_INVALID_ARGUMENT(parse_index_list("1,-2", "attribute"), "attribute", "non-negative integers");
}

}  // namespace
}  // namespace filkit
