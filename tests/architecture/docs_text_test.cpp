// The documentation is plain text: no control characters but the newline. A LaTeX command written
// through a string with escapes (\rVert, \frac, \top, \beta) becomes a carriage return, form feed,
// tab or backspace and silently breaks the formula; this test names the file and line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path docs_root() {
  const char* dir = std::getenv("FILKIT_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(FILKIT_TEST_SOURCE_DIR);
}

TEST(DocsText, HoldsNoControlCharacters) {
  int files = 0;
  const fs::path root = docs_root();
  for (const fs::path& folder : {root, root / "docs", root / "experiments", root / "bench"}) {
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".md") continue;
      ++files;
      std::ifstream in(entry.path(), std::ios::binary);
      std::string line;
      for (int number = 1; std::getline(in, line); ++number)
        for (const char ch : line) {
          const auto byte = static_cast<unsigned char>(ch);
          EXPECT_FALSE(byte < 0x20 || byte == 0x7f)
              << fs::relative(entry.path(), root).generic_string() << ":" << number << ": control character 0x"
              << std::hex << static_cast<int>(byte) << " (an escaped LaTeX command?)";
        }
    }
  }
  EXPECT_GT(files, 5);
}

}  // namespace
