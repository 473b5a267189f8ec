// No source file is over 700 lines (issue 51): a longer one is split by concept, as the tests of
// private training with public data (tests/public_data/) and the bad-input corpus' replay
// (tests/bad_inputs/) were. Every C++, Python, shell and CMake file under src/, include/, cli/,
// python/, tests/, bench/, fuzz/ and experiments/ counts, tests included; data (JSON, CSV, NPY,
// TorchScript models, fuzz seeds, results) and prose (Markdown) do not. Lines are counted as
// `wc -l` counts them.
#include "source_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace source_size_check {

namespace fs = std::filesystem;

constexpr long kMaxLines = 700;

bool is_source(const fs::path& path) {
  static const std::set<std::string> extensions = {".cpp", ".hpp", ".h", ".cc", ".py", ".pyi", ".sh", ".cmake"};
  return extensions.count(path.extension().string()) > 0 || path.filename() == "CMakeLists.txt";
}

long line_count(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
}

TEST(SourceSize, NoSourceFileIsOver700Lines) {
  const fs::path root = source_tree::source_dir();
  int files = 0;
  for (const char* folder : {"src", "include", "cli", "python", "tests", "bench", "fuzz", "experiments"}) {
    ASSERT_TRUE(fs::is_directory(root / folder)) << root / folder;
    for (auto entry = fs::recursive_directory_iterator(root / folder); entry != fs::recursive_directory_iterator();
         ++entry) {
      const std::string name = entry->path().filename().string();
      if (entry->is_directory() && (name == "__pycache__" || name.starts_with("."))) {
        entry.disable_recursion_pending();
        continue;
      }
      if (!entry->is_regular_file() || !is_source(entry->path())) continue;
      ++files;
      const long lines = line_count(entry->path());
      EXPECT_LE(lines, kMaxLines) << fs::relative(entry->path(), root).generic_string() << " has " << lines
                                  << " lines, over " << kMaxLines << ": split it by concept";
    }
  }
  EXPECT_GT(files, 300);
}

}  // namespace source_size_check
