#include "base/json_input.hpp"

#include "filkit/base/errors.hpp"

#include <stdexcept>

namespace filkit::detail {

namespace {

// Counts the open arrays and objects; returning false stops the parse.
struct NestingLimit : nlohmann::json_sax<nlohmann::json> {
  explicit NestingLimit(int limit) : max_depth(limit) {}
  int max_depth;
  int depth = 0;
  bool too_deep = false;
  bool enter() {
    too_deep = ++depth > max_depth;
    return !too_deep;
  }
  bool leave() {
    --depth;
    return true;
  }
  bool start_object(std::size_t) override { return enter(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_object() override { return leave(); }
  bool end_array() override { return leave(); }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool key(string_t&) override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }
};

}  // namespace

bool nests_deeper_than(std::string_view bytes, nlohmann::json::input_format_t format, int max_depth) {
  NestingLimit limit(max_depth);
  nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &limit, format);
  return limit.too_deep;
}

nlohmann::json parse_json_input(std::string_view text, const std::string& what) {
  if (nests_deeper_than(text, nlohmann::json::input_format_t::json, kMaxJsonNesting))
    throw DataError(what + ": nests arrays and objects deeper than " + std::to_string(kMaxJsonNesting) +
                    " levels, the limit for filkit's JSON inputs");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw DataError(what + ": not valid JSON: " + error.what());
  }
}

}  // namespace filkit::detail
