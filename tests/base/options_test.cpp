// Option values from text, as flags and Python strings give them: integers within their type's
// range (never wrapped), doubles within a double's, sizes; index lists with their limits; option
// values read back from the JSON settings a summary records.
#include "filkit/base/options.hpp"
#include "filkit/base/index_list.hpp"

#include "test_util.hpp"

#include <cstdint>
#include <limits>
#include <optional>

namespace filkit {

// Every kind of option field, to read back from the settings it records.
enum class Shade { kLight, kDark };
template <>
struct EnumNames<Shade> {
  static constexpr const char* what = "shade";
  static constexpr std::pair<Shade, const char*> names[] = {{Shade::kLight, "light"}, {Shade::kDark, "dark"}};
};

struct EveryKindOfField {
  int count = 0;
  std::uint64_t seed = 0;
  double rate = 0.0;
  bool flag = false;
  std::string path;
  ByteSize budget;
  Shade shade = Shade::kLight;
  std::optional<Shade> auto_shade;
  std::optional<std::vector<int>> classes;
  std::vector<std::string> columns;
  std::optional<double> auto_rate;
};

template <class Visit>
void visit_fields(EveryKindOfField& o, Visit&& visit) {
  visit("count", o.count, "");
  visit("seed", o.seed, "");
  visit("rate", o.rate, "");
  visit("flag", o.flag, "");
  visit("path", o.path, "");
  visit("budget", o.budget, "");
  visit("shade", o.shade, "");
  visit("auto_shade", o.auto_shade, "");
  visit("classes", o.classes, "");
  visit("columns", o.columns, "");
  visit("auto_rate", o.auto_rate, "");
}

namespace {

TEST(OptionFromText, RefusesIntegersBeyondTheFieldsRangeWithTheRange) {
  int threads = 0;
  EXPECT_INVALID_ARGUMENT(option_from_text("trials", "4294967297", threads), "trials = '4294967297'",
                          "an integer in -2147483648..2147483647");
  Index steps = 0;
  EXPECT_INVALID_ARGUMENT(option_from_text("steps", "99999999999999999999", steps), "steps", "9223372036854775807");
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
  EXPECT_INVALID_ARGUMENT(option_from_text("data", "d\xff.csv", data), "data: the text is not UTF-8", "index 1: 0xFF");
  EXPECT_TRUE(data.empty());
  option_from_text("data",
                   "donn\xc3\xa9"
                   "es.csv",
                   data);  // UTF-8 beyond ASCII is fine
  EXPECT_EQ(data,
            "donn\xc3\xa9"
            "es.csv");
  std::vector<std::string> columns;
  EXPECT_THROW(option_from_text("categorical", "a,\xc3", columns), std::invalid_argument);
}

TEST(OptionFromText, RefusesEveryClassOutOfRangeInAList) {
  std::optional<std::vector<int>> classes;
  EXPECT_INVALID_ARGUMENT(option_from_text("classes", "4294967296,4294967297", classes), "classes = '4294967296'",
                          "an integer in");
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

TEST(OptionsFromSettings, ReadBackEveryFieldAsItsSettingsRecordIt) {
  EveryKindOfField recorded;
  recorded.count = -7;
  recorded.seed = 18446744073709551615u;
  recorded.rate = 0.1 + 0.2;  // not a short decimal: read back bit for bit
  recorded.flag = true;
  recorded.path = "cifar10:/data/cifar, with a comma";
  option_from_text("budget", "512M", recorded.budget);
  recorded.shade = Shade::kDark;
  recorded.classes = std::vector<int>{3, 5};
  recorded.columns = {"a,b", "c"};
  recorded.auto_rate = std::numeric_limits<double>::infinity();
  const nlohmann::json settings = settings_json(recorded);
  EveryKindOfField read;
  read.auto_shade = Shade::kDark;  // "auto" in the settings empties it
  options_from_settings(settings, read);
  EXPECT_EQ(settings_json(read), settings);
  EXPECT_EQ(read.seed, recorded.seed);
  EXPECT_EQ(read.rate, recorded.rate);
  EXPECT_EQ(read.columns, recorded.columns);
  EXPECT_FALSE(read.auto_shade.has_value());
  EXPECT_EQ(read.auto_rate, std::numeric_limits<double>::infinity());
}

TEST(OptionsFromSettings, KeepFieldsTheSettingsLackAndIgnoreOtherNames) {
  EveryKindOfField read;
  read.count = 4;
  options_from_settings(nlohmann::json{{"rate", 2.5}, {"model", "mlp"}}, read);
  EXPECT_EQ(read.count, 4);
  EXPECT_EQ(read.rate, 2.5);
}

TEST(OptionsFromSettings, RefuseValuesThatDoNotFitTheirFieldNamingTheSetting) {
  EveryKindOfField read;
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"shade", "grey"}}, read), "settings.shade = 'grey'",
                          "one of light, dark");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"count", 1.5}}, read), "settings.count = '1.5'",
                          "an integer");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"count", 1e20}}, read), "settings.count", "an integer");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"seed", -1}}, read), "settings.seed",
                          "a non-negative integer");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"flag", 1}}, read), "settings.flag = 1",
                          "true or false");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"path", 3}}, read), "settings.path = 3",
                          "expected text");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"classes", {{"nested"}}}}, read), "settings.classes",
                          "expected a number");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"classes", {1, 4294967296}}}, read),
                          "settings.classes = '4294967296'", "an integer in");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"columns", {"a", nullptr}}}, read),
                          "settings.columns = null", "expected text");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"rate", {1, 2}}}, read), "settings.rate = [1,2]",
                          "a number");
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json::array(), read), "settings: not an object");
}

// The suggestions for a mistyped flag or keyword (the command line's and Python's messages).
TEST(NearestNames, FindsTyposAndSwapsAndNothingFarOff) {
  EXPECT_EQ(nearest_names("--noise-multipler", {"--noise-multiplier", "--clip-norm", "--steps"}),
            std::vector<std::string>{"--noise-multiplier"});
  // A swap of neighbours is one edit; the best distance only; nothing when nothing is close.
  EXPECT_EQ(nearest_names("--setps", {"--steps", "--step-size", "--seed"}), std::vector<std::string>{"--steps"});
  EXPECT_TRUE(nearest_names("--frobnicate", {"--steps", "--seed"}).empty());
  // The start of a name counts; a name typed right is no suggestion.
  EXPECT_EQ(nearest_names("--noise", {"--noise-multiplier", "--nodes"})[0], "--noise-multiplier");
  EXPECT_TRUE(nearest_names("seed", {"seed"}).empty());
  EXPECT_EQ(nearest_names("nosie_multiplier", {"noise_multiplier", "clip_norm"}),
            std::vector<std::string>{"noise_multiplier"});
}

struct RenamedCase {
  double sample_rate = 0.0;
};
template <class Visit>
void visit_fields(RenamedCase& o, Visit&& visit) {
  visit("sample_rate", o.sample_rate, "");
}

// A renamed option answers to its former name, in a summary's settings too (written before the
// rename); the name wins where both are there.
TEST(RenamedOptions, ReadAFormerNameFromASummarysSettings) {
  EXPECT_EQ(former_option_name("sample_rate"), "q");
  EXPECT_EQ(former_option_name("row_scaling"), "scale");
  EXPECT_TRUE(former_option_name("steps").empty());
  RenamedCase options;
  options_from_settings(nlohmann::json{{"q", 0.5}}, options);
  EXPECT_EQ(options.sample_rate, 0.5);
  options_from_settings(nlohmann::json{{"q", 0.5}, {"sample_rate", 0.25}}, options);
  EXPECT_EQ(options.sample_rate, 0.25);
  EXPECT_EQ(settings_json(options), nlohmann::json({{"sample_rate", 0.25}})) << "only the name is written";
  EXPECT_INVALID_ARGUMENT(options_from_settings(nlohmann::json{{"q", "fast"}}, options), "settings.q");
}

}  // namespace
}  // namespace filkit
