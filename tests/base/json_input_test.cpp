// The bounded JSON reader of base (src/base/json_input.hpp): nesting counted for JSON text and
// CBOR at the limit and one beyond, far beyond without a stack overflow, and the messages.
#include "base/json_input.hpp"

#include <gtest/gtest.h>

#include <string>

namespace filkit::detail {
namespace {

using Format = nlohmann::json::input_format_t;

// [[...]] with `depth` arrays, and {"a": {"a": ... 1}} with `depth` objects.
std::string arrays(int depth) {
  return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
}
std::string objects(int depth) {
  std::string text;
  for (int k = 0; k < depth; ++k) text += "{\"a\": ";
  return text + "1" + std::string(static_cast<std::size_t>(depth), '}');
}

std::string cbor_of(const std::string& text) {
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(nlohmann::json::parse(text));
  return {bytes.begin(), bytes.end()};
}

TEST(NestsDeeperThan, CountsArraysAndObjectsInJsonAndCbor) {
  for (const auto& nested : {arrays, objects}) {
    EXPECT_FALSE(nests_deeper_than(nested(5), Format::json, 5));
    EXPECT_TRUE(nests_deeper_than(nested(6), Format::json, 5));
    EXPECT_FALSE(nests_deeper_than(cbor_of(nested(5)), Format::cbor, 5));
    EXPECT_TRUE(nests_deeper_than(cbor_of(nested(6)), Format::cbor, 5));
  }
  EXPECT_FALSE(nests_deeper_than("[[1], [2], {\"a\": [3]}]", Format::json, 3)) << "siblings do not add up";
  EXPECT_TRUE(nests_deeper_than("[[1], [2], {\"a\": [3]}]", Format::json, 2));
  EXPECT_FALSE(nests_deeper_than("[[[", Format::json, 5)) << "malformed is left to the parser";
  // 60,000 deep, JSON text and CBOR (whose reader recurses): stopped, no stack overflow.
  EXPECT_TRUE(nests_deeper_than(arrays(60000), Format::json, kMaxJsonNesting));
  EXPECT_TRUE(nests_deeper_than(std::string(60000, '\x81') + '\x01', Format::cbor, kMaxJsonNesting));
}

TEST(ParseJsonInput, ReadsUpToTheLimitAndNamesTheInputAndTheLimitBeyond) {
  EXPECT_EQ(parse_json_input(arrays(kMaxJsonNesting), "x").dump(), arrays(kMaxJsonNesting));
  const auto message = [](const std::string& text) {
    try {
      parse_json_input(text, "report input 'a.json'");
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      message(arrays(kMaxJsonNesting + 1)),
      "report input 'a.json': nests arrays and objects deeper than 64 levels, the limit for filkit's JSON inputs");
  EXPECT_EQ(message(arrays(60000)).rfind("report input 'a.json': nests arrays and objects deeper than 64", 0), 0u);
  EXPECT_EQ(message("{\"a\": ").rfind("report input 'a.json': not valid JSON: ", 0), 0u) << message("{\"a\": ");
}

}  // namespace
}  // namespace filkit::detail
