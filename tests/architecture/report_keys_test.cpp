// The report reads only what the summaries declare: every field a report section reads by name
// (number_at, field, with_interval in src/report/) is a chain of properties of some summary schema
// (schemas/summary/, docs/architecture.md "Summaries"), so that a field renamed or dropped by a
// writer, which its schema must follow, cannot silently empty a figure.
#include "source_tree.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace report_keys_check {

namespace fs = std::filesystem;

using source_tree::read_text;
using source_tree::source_dir;

/// Every contiguous chain of property names below `node` ("dfil.max", "rdp", ...), through arrays'
/// items, if-then-else and oneOf branches and a document's definitions.
void add_chains(const nlohmann::json& node, std::vector<std::string> above, std::set<std::string>& chains) {
  if (!node.is_object()) return;
  if (node.contains("properties")) {
    for (const auto& [name, child] : node["properties"].items()) {
      std::vector<std::string> path = above;
      path.push_back(name);
      for (std::size_t start = 0; start < path.size(); ++start) {
        std::string chain;
        for (std::size_t k = start; k < path.size(); ++k) chain += (chain.empty() ? "" : ".") + path[k];
        chains.insert(chain);
      }
      add_chains(child, path, chains);
    }
  }
  if (node.contains("additionalProperties")) add_chains(node["additionalProperties"], above, chains);
  if (node.contains("items")) add_chains(node["items"], above, chains);
  for (const char* branch : {"then", "else"})
    if (node.contains(branch)) add_chains(node[branch], above, chains);
  for (const char* branches : {"oneOf", "anyOf", "allOf"})
    if (node.contains(branches))
      for (const auto& branch : node[branches]) add_chains(branch, above, chains);
  if (node.contains("definitions"))
    for (const auto& [name, definition] : node["definitions"].items()) add_chains(definition, {}, chains);
}

std::set<std::string> schema_chains() {
  std::set<std::string> chains;
  for (const auto& entry : fs::directory_iterator(source_dir() / "schemas" / "summary"))
    add_chains(nlohmann::json::parse(read_text(entry.path())), {}, chains);
  return chains;
}

/// The field names a source reads: the string literals given to number_at and field after their
/// first argument, and with_interval's value and interval keys. A name ending in '.' is completed
/// at run time (e.g. "prior_by_group." + group): its fixed part is checked.
std::vector<std::string> fields_read(const std::string& source) {
  std::vector<std::string> fields;
  for (const std::string call : {"number_at(", "field(", "with_interval("}) {
    for (std::size_t at = source.find(call); at != std::string::npos; at = source.find(call, at + 1)) {
      // A call, not the end of another name (e.g. "shown_field(").
      if (at > 0 && (std::isalnum(static_cast<unsigned char>(source[at - 1])) || source[at - 1] == '_')) continue;
      // Past the first argument: to the comma at depth 0.
      std::size_t k = at + call.size();
      for (int depth = 0; k < source.size(); ++k) {
        if (source[k] == '(') ++depth;
        else if (source[k] == ')' && depth-- == 0) break;
        else if (source[k] == ',' && depth == 0) break;
      }
      // Then each argument that is a string literal, in order.
      while (k < source.size() && source[k] == ',') {
        std::size_t open = k + 1;
        while (open < source.size() && std::isspace(static_cast<unsigned char>(source[open]))) ++open;
        if (open >= source.size() || source[open] != '"') break;
        const std::size_t close = source.find('"', open + 1);
        std::string name = source.substr(open + 1, close - open - 1);
        if (!name.empty() && name.back() == '.') name.pop_back();
        fields.push_back(name);
        k = close + 1;
      }
    }
  }
  return fields;
}

TEST(ReportKeys, EveryFieldTheReportReadsIsDeclaredByASummarySchema) {
  const std::set<std::string> chains = schema_chains();
  ASSERT_GT(chains.size(), 100u) << "no schemas under " << (source_dir() / "schemas" / "summary");
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(source_dir() / "src" / "report")) {
    for (const std::string& name : fields_read(read_text(entry.path()))) {
      ++checked;
      EXPECT_TRUE(chains.count(name)) << entry.path().filename().string() << " reads \"" << name
                                      << "\", which no summary schema (schemas/summary/) declares";
    }
  }
  EXPECT_GT(checked, 60u) << "the pattern no longer finds the report's reads";
}

TEST(ReportKeys, TheReadsAreFoundInTheFormsTheSectionsUse) {
  EXPECT_EQ(fields_read(R"(number_at(c, "dfil.max"); field(field(input.summary, "settings"), key);)"),
            (std::vector<std::string>{"dfil.max", "settings"}));
  // Calls in calls: each is read (number_at's, field's, then with_interval's).
  EXPECT_EQ(fields_read(R"(with_interval(field(last_snapshot(input), "dfil"), "max", "max_interval", 4))"),
            (std::vector<std::string>{"dfil", "max", "max_interval"}));
  EXPECT_EQ(fields_read(R"(number_at(attack, "prior_by_group." + group))"),
            (std::vector<std::string>{"prior_by_group"}));
}

}  // namespace report_keys_check
