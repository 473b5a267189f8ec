#include "filkit/base/summary_schema.hpp"

#include "filkit/base/errors.hpp"
#include "summary_schemas_embedded.hpp"

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>

namespace filkit {
namespace {

struct ParsedSchema {
  nlohmann::json json;
  valijson::Schema schema;
};

/// Every embedded schema, parsed once (thread-safe: a function-local static).
const std::map<std::string, std::unique_ptr<ParsedSchema>, std::less<>>& parsed_schemas() {
  static const auto schemas = [] {
    std::map<std::string, std::unique_ptr<ParsedSchema>, std::less<>> parsed;
    for (const EmbeddedSummarySchema& embedded : embedded_summary_schemas()) {
      auto entry = std::make_unique<ParsedSchema>();
      entry->json = nlohmann::json::parse(embedded.text);
      valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
      valijson::adapters::NlohmannJsonAdapter adapter(entry->json);
      parser.populateSchema(adapter, entry->schema);
      parsed.emplace(embedded.command, std::move(entry));
    }
    return parsed;
  }();
  return schemas;
}

const ParsedSchema* find_schema(std::string_view command) {
  const auto& schemas = parsed_schemas();
  const auto found = schemas.find(command);
  return found == schemas.end() ? nullptr : found->second.get();
}

/// valijson's context ("<root>", "[snapshots]", "[0]", ...) as a JSON pointer.
std::string json_pointer(const std::vector<std::string>& context) {
  std::string pointer;
  for (const std::string& part : context) {
    if (part == "<root>") continue;
    std::string name = part;
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    pointer += "/" + name;
  }
  return pointer.empty() ? "/" : pointer;
}

}  // namespace

std::vector<std::string> summary_schema_commands() {
  std::vector<std::string> commands;
  for (const auto& [command, schema] : parsed_schemas()) commands.push_back(command);
  return commands;
}

const nlohmann::json& summary_schema(std::string_view command) {
  if (const ParsedSchema* schema = find_schema(command)) return schema->json;
  std::string known;
  for (const std::string& name : summary_schema_commands()) known += (known.empty() ? "" : ", ") + name;
  throw OptionError("command", std::string(command), "has no summary schema (there are schemas for " + known + ")");
}

std::vector<std::string> summary_schema_violations(const nlohmann::json& summary, std::size_t limit) {
  if (!summary.is_object() || !summary.contains("command") || !summary["command"].is_string())
    return {"/: a summary is a JSON object whose \"command\" names the command that wrote it"};
  const std::string command = summary["command"].get<std::string>();
  const ParsedSchema* schema = find_schema(command);
  if (schema == nullptr) return {"/command: no summary schema for the command '" + command + "'"};
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(summary);
  if (validator.validate(schema->schema, target, &results)) return {};
  std::vector<std::string> violations;
  valijson::ValidationResults::Error error;
  // valijson reports each failure, then every enclosing one ("Failed to validate against schema
  // associated with property name ...", "... item #0 in array"): only the failures themselves.
  std::string first;
  while (results.popError(error) && violations.size() < limit) {
    std::string line = json_pointer(error.context) + ": " + error.description;
    if (first.empty()) first = line;
    if (error.description.rfind("Failed to validate", 0) != 0 &&
        std::find(violations.begin(), violations.end(), line) == violations.end())
      violations.push_back(std::move(line));
  }
  if (violations.empty()) violations.push_back(first);
  return violations;
}

bool strict_summary_schema() {
  const char* value = std::getenv("FILKIT_STRICT_SUMMARY_SCHEMA");
  return value != nullptr && std::string_view(value) != "" && std::string_view(value) != "0";
}

void check_written_summary(const nlohmann::json& summary) {
  const std::vector<std::string> violations = summary_schema_violations(summary);
  if (violations.empty()) return;
  std::string listed;
  for (const std::string& violation : violations) listed += "\n  " + violation;
  // value() would throw on a summary that is no object or names its command by no string.
  const bool named = summary.is_object() && summary.contains("command") && summary["command"].is_string();
  const std::string command = named ? summary["command"].get<std::string>() : "(unnamed)";
  const std::string message = "the " + command + " summary departs from schemas/summary/" + command +
                              ".schema.json (a bug in filkit: please report it):" + listed;
  if (strict_summary_schema()) throw std::logic_error(message);
  std::cerr << "filkit: warning: " << message << "\n  (the outputs are written as computed)\n";
}

}  // namespace filkit
