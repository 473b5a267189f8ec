// The summary schemas (base/summary_schema.hpp): every command's schema is embedded and parses, and
// a summary that departs from one is reported at the JSON pointer where it departs. That every
// job's summary conforms is checked by every test that writes one (FILKIT_STRICT_SUMMARY_SCHEMA,
// set for the whole suite) and by tests/cli/job_registry_test.cpp (every job has its schema).
#include "filkit/base/summary_schema.hpp"
#include "filkit/base/errors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <stdexcept>

namespace filkit {
namespace {

using ::testing::HasSubstr;

// A minimal accountant summary that follows its schema: built from the schema's required fields.
nlohmann::json minimal_accountant_summary() {
  return nlohmann::json::parse(R"({
    "command": "accountant", "filkit_version": "0.1.0", "filkit_build": "g++ 12, native",
    "seed": 0, "mpi_ranks": 1})");
}

TEST(SummarySchema, EveryCommandsSchemaIsEmbeddedAndIsADraft7Schema) {
  const std::vector<std::string> commands = summary_schema_commands();
  EXPECT_THAT(commands, ::testing::Contains("dpsgd"));
  EXPECT_THAT(commands, ::testing::Contains("learned-attack"));
  for (const std::string& command : commands) {
    const nlohmann::json& schema = summary_schema(command);
    EXPECT_EQ(schema.at("$schema"), "http://json-schema.org/draft-07/schema#") << command;
    EXPECT_TRUE(schema.contains("description")) << command;
  }
}

TEST(SummarySchema, AnUnknownCommandIsAnOptionErrorNamingTheKnownOnes) {
  try {
    summary_schema("mesure");
    FAIL() << "no error";
  } catch (const OptionError& error) {
    EXPECT_THAT(error.what(), HasSubstr("mesure"));
    EXPECT_THAT(error.what(), HasSubstr("measure"));
  }
}

TEST(SummarySchema, ReportsAMissingFieldAWrongTypeAndAnUnknownFieldAtTheirPointers) {
  nlohmann::json summary = minimal_accountant_summary();
  const std::vector<std::string> required = summary_schema("accountant").at("required");
  // Fill every other required field from a conforming value of its type is the writer's job; here
  // the departures are what is checked: the missing ones are named.
  std::vector<std::string> violations = summary_schema_violations(summary, 100);
  ASSERT_FALSE(violations.empty());
  std::string all;
  for (const std::string& v : violations) all += v + "\n";
  for (const std::string& field : required)
    if (!summary.contains(field)) EXPECT_THAT(all, HasSubstr(field)) << all;

  summary = {{"command", "report"}, {"filkit_version", 3}};
  all.clear();
  for (const std::string& v : summary_schema_violations(summary, 100)) all += v + "\n";
  EXPECT_THAT(all, HasSubstr("/filkit_version")) << all;

  summary = {{"command", "report"}, {"no_such_field", 1}};
  all.clear();
  for (const std::string& v : summary_schema_violations(summary, 100)) all += v + "\n";
  EXPECT_THAT(all, HasSubstr("no_such_field")) << all;
}

TEST(SummarySchema, ASummaryWithoutACommandOrWithAnUnknownOneIsNamedSo) {
  EXPECT_THAT(summary_schema_violations(nlohmann::json::array()).at(0), HasSubstr("\"command\""));
  EXPECT_THAT(summary_schema_violations({{"command", "nope"}}).at(0), HasSubstr("nope"));
}

TEST(SummarySchema, NonFiniteNumbersWrittenAsNullConform) {
  // A measure's numbers may be NaN or infinite (written as null, base/summary.hpp number_or_null);
  // every number of every schema admits null.
  const std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& node,
                                                                                  const std::string& path) {
    if (!node.is_object()) return;
    if (node.contains("type")) {
      const nlohmann::json& type = node["type"];
      const bool number =
          type == "number" || (type.is_array() && std::find(type.begin(), type.end(), "number") != type.end());
      const bool null =
          type == "null" || (type.is_array() && std::find(type.begin(), type.end(), "null") != type.end());
      if (number) EXPECT_TRUE(null) << path;
    }
    for (const auto& [key, child] : node.items()) walk(child, path + "/" + key);
  };
  for (const std::string& command : summary_schema_commands()) walk(summary_schema(command), command);
}

TEST(SummarySchema, TheWritersCheckThrowsWhenStrictAndOnlyWarnsOtherwise) {
  const nlohmann::json departing = {{"command", "report"}, {"no_such_field", 1}};
  const char* before = std::getenv("FILKIT_STRICT_SUMMARY_SCHEMA");
  const std::string saved = before ? before : "";
  setenv("FILKIT_STRICT_SUMMARY_SCHEMA", "1", 1);
  try {
    check_written_summary(departing);
    FAIL() << "no error";
  } catch (const std::logic_error& error) {
    EXPECT_THAT(error.what(), HasSubstr("schemas/summary/report.schema.json"));
    EXPECT_THAT(error.what(), HasSubstr("no_such_field"));
  }
  // A summary that is no object, or names no command, is reported as such, not as a JSON type error.
  EXPECT_THROW(check_written_summary(nlohmann::json::array()), std::logic_error);
  try {
    check_written_summary({{"command", 3}});
    FAIL() << "no error";
  } catch (const std::logic_error& error) {
    EXPECT_THAT(error.what(), HasSubstr("\"command\""));
  }
  setenv("FILKIT_STRICT_SUMMARY_SCHEMA", "0", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(check_written_summary(departing));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("warning"));
  if (before) setenv("FILKIT_STRICT_SUMMARY_SCHEMA", saved.c_str(), 1);
  else unsetenv("FILKIT_STRICT_SUMMARY_SCHEMA");
}

}  // namespace
}  // namespace filkit
