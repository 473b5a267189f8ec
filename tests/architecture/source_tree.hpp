// The source tree the architecture tests read: its root (FILKIT_SOURCE_DIR, else the directory
// CMake configured from) and a file's text.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace source_tree {

inline std::filesystem::path source_dir() {
  const char* dir = std::getenv("FILKIT_SOURCE_DIR");
  return dir ? std::filesystem::path(dir) : std::filesystem::path(FILKIT_TEST_SOURCE_DIR);
}

/// The whole file; empty when it cannot be read.
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace source_tree
