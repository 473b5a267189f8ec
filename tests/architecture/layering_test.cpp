// The source tree's layers depend only downwards (docs/architecture.md):
//   base <- data <- models <- {leakage, dpsgd} <- public_data <- jobs <- {cli, python}; dpsgd also
//   uses privacy (on base) and networks (on data); report reads JSON (data, base).
// This test reads every header and source of include/filkit/<layer>/ and src/<layer>/ and fails on an
// include that points up (or sideways) a layer, or on a file that sits outside every layer.
#include "source_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::map<std::string, std::set<std::string>>& allowed_dependencies() {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"base", {"base"}},
      {"data", {"base", "data"}},
      {"models", {"base", "data", "models"}},
      {"privacy", {"base", "privacy"}},
      {"networks", {"base", "data", "networks"}},
      {"leakage", {"base", "data", "models", "leakage"}},
      {"dpsgd", {"base", "data", "models", "privacy", "networks", "dpsgd"}},
      {"public_data", {"base", "data", "models", "privacy", "networks", "dpsgd", "public_data"}},
      {"report", {"base", "data", "report"}},
      {"jobs", {"base", "data", "models", "privacy", "networks", "leakage", "dpsgd", "public_data", "report", "jobs"}},
  };
  return allowed;
}

// Violations in one file of layer `layer`: each project include ("filkit/<layer>/..." or, for the
// library's private headers, "<layer>/...") whose layer is not allowed.
std::vector<std::string> layering_violations(const std::string& layer, const std::string& file_text,
                                             const std::string& file_name) {
  std::vector<std::string> violations;
  const auto& allowed = allowed_dependencies();
  const auto own = allowed.find(layer);
  if (own == allowed.end()) return {file_name + ": not in a layer (" + layer + ")"};
  static const std::regex include_line(R"(#\s*include\s*"(?:filkit/)?([a-z_]+)/[^"]+")");
  static const std::regex top_level_include(R"(#\s*include\s*"filkit/[a-z_]+\.hpp")");
  for (auto it = std::sregex_iterator(file_text.begin(), file_text.end(), include_line); it != std::sregex_iterator();
       ++it) {
    const std::string target = (*it)[1];
    if (!allowed.count(target)) continue;  // e.g. "CLI/CLI.hpp" is not ours
    if (!own->second.count(target))
      violations.push_back(file_name + ": " + layer + " includes " + it->str() + " (layer " + target +
                           " is above or beside it)");
  }
  if (std::regex_search(file_text, top_level_include))
    violations.push_back(file_name + ": includes a header outside every layer");
  return violations;
}

using source_tree::read_text;
using source_tree::source_dir;

TEST(Layering, EveryIncludePointsDownwards) {
  std::vector<std::string> violations;
  int files = 0;
  for (const fs::path root : {source_dir() / "include" / "filkit", source_dir() / "src"}) {
    ASSERT_TRUE(fs::is_directory(root)) << root;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      const auto relative = fs::relative(entry.path(), root);
      const std::string layer = relative.begin()->string();
      if (relative.begin() == --relative.end()) {
        violations.push_back(entry.path().string() + ": outside every layer");
        continue;
      }
      ++files;
      for (auto& v : layering_violations(layer, read_text(entry.path()), entry.path().string()))
        violations.push_back(std::move(v));
    }
  }
  EXPECT_GT(files, 50);
  for (const auto& v : violations) ADD_FAILURE() << v;
}

// docs/architecture.md is the map a newcomer reads: every layer has its row in the table of what
// lives where, every public header is named in its layer's row, and every private header of src/
// (by its path below src/) somewhere in the text. A folder or header added without its line fails.
TEST(Layering, TheArchitectureDocNamesEveryLayerAndHeader) {
  const std::string doc = read_text(source_dir() / "docs" / "architecture.md");
  ASSERT_FALSE(doc.empty());
  const auto row_of = [&](const std::string& layer) -> std::string {
    const std::string start = "| `" + layer + "` |";
    const std::size_t at = doc.find(start);
    return at == std::string::npos ? std::string() : doc.substr(at, doc.find('\n', at) - at);
  };
  int headers = 0;
  for (const auto& layer_dir : fs::directory_iterator(source_dir() / "include" / "filkit")) {
    const std::string layer = layer_dir.path().filename().string();
    const std::string row = row_of(layer);
    EXPECT_FALSE(row.empty()) << "docs/architecture.md: no row | `" << layer << "` | in \"What lives where\"";
    for (const auto& header : fs::directory_iterator(layer_dir.path())) {
      ++headers;
      const std::string name = header.path().filename().string();
      EXPECT_NE(row.find("`" + name + "`"), std::string::npos)
          << "docs/architecture.md: the row of " << layer << " does not name include/filkit/" << layer << "/" << name;
    }
  }
  const fs::path src = source_dir() / "src";
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
    ++headers;
    const std::string relative = fs::relative(entry.path(), src).generic_string();
    const bool named =
        doc.find("`" + relative + "`") != std::string::npos || doc.find("`src/" + relative + "`") != std::string::npos;
    EXPECT_TRUE(named) << "docs/architecture.md does not name the private header src/" << relative << " (as `"
                       << relative << "`)";
  }
  EXPECT_GT(headers, 60);
}

// The support folders too: every file of bench/, experiments/ and fuzz/ but their data (results,
// seed corpora, recorded findings) is named in docs/architecture.md by its path, so that a newcomer
// finds what each script or program is for.
TEST(Layering, TheArchitectureDocNamesEveryFileOfBenchExperimentsAndFuzz) {
  const std::string doc = read_text(source_dir() / "docs" / "architecture.md");
  const std::vector<std::string> data = {"bench/results", "experiments/results", "fuzz/corpus", "fuzz/findings"};
  int files = 0;
  for (const char* folder : {"bench", "experiments", "fuzz"}) {
    for (auto entry = fs::recursive_directory_iterator(source_dir() / folder);
         entry != fs::recursive_directory_iterator(); ++entry) {
      const std::string relative = fs::relative(entry->path(), source_dir()).generic_string();
      const std::string name = entry->path().filename().string();
      if (entry->is_directory() && (std::find(data.begin(), data.end(), relative) != data.end() ||
                                    name == "__pycache__" || name.starts_with("."))) {
        entry.disable_recursion_pending();
        continue;
      }
      if (!entry->is_regular_file() || name.starts_with(".") || name.ends_with(".pyc")) continue;
      ++files;
      EXPECT_NE(doc.find("`" + relative + "`"), std::string::npos)
          << "docs/architecture.md does not name " << relative << " (as `" << relative
          << "`, in \"bench/, experiments/ and fuzz/, file by file\")";
    }
  }
  EXPECT_GT(files, 60);
  // And names none that is gone: every `bench/...`, `experiments/...` or `fuzz/...` of its table exists.
  const std::size_t table = doc.find("## bench/, experiments/ and fuzz/, file by file");
  ASSERT_NE(table, std::string::npos);
  for (std::size_t at = doc.find("\n| `", table); at != std::string::npos; at = doc.find("\n| `", at + 1)) {
    const std::size_t start = at + 4, end = doc.find('`', start);
    const std::string named = doc.substr(start, end - start);
    if (!named.starts_with("bench/") && !named.starts_with("experiments/") && !named.starts_with("fuzz/")) continue;
    EXPECT_TRUE(fs::exists(source_dir() / named)) << "docs/architecture.md names " << named << ", which does not exist";
  }
}

// The check itself must catch what it is there to catch.
TEST(Layering, CatchesAnUpwardInclude) {
  EXPECT_EQ(layering_violations("models", "#include \"filkit/leakage/fil.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_EQ(layering_violations("base", "#include \"models/glm_loss.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_EQ(layering_violations("dpsgd", "#include \"filkit/leakage/fil.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_EQ(layering_violations("report", "#include \"filkit/jobs/measure.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_EQ(layering_violations("data", "#include \"filkit/types.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_TRUE(
      layering_violations("jobs", "#include \"filkit/leakage/fil.hpp\"\n#include <CLI/CLI.hpp>\n", "x.cpp").empty());
  EXPECT_TRUE(layering_violations("leakage", "#include \"models/glm_loss.hpp\"\n", "x.cpp").empty());
  EXPECT_EQ(layering_violations("privacy", "#include \"filkit/dpsgd/clipped_gradient.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_TRUE(layering_violations("dpsgd", "#include \"filkit/privacy/soft_clip.hpp\"\n", "x.cpp").empty());
  EXPECT_EQ(layering_violations("networks", "#include \"filkit/models/glm.hpp\"\n", "x.cpp").size(), 1u);
  EXPECT_EQ(layering_violations("dpsgd", "#include \"filkit/public_data/public_data_training.hpp\"\n", "x.cpp").size(),
            1u);
}

}  // namespace
