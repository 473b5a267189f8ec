// What the fuzz targets share: the input as a file for the readers that take a path, the input
// split into parts, and the rule that an error is a std::exception with a message.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "filkit/base/resources.hpp"

namespace filkit::fuzz {

/// The readers' memory budget (max_memory) in the targets: below libFuzzer's -malloc_limit_mb
/// (512 MB, flags.sh), so that an allocation the budget should have refused is a finding.
inline const ByteSize kFuzzMemory{std::uint64_t{256} << 20};

/// Aborts (a finding) when `condition` is false: an invariant of a reader's result.
#define FILKIT_FUZZ_CHECK(condition)                                                         \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)

/// A private directory under $TMPDIR (or /tmp), made on first use and removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "filkit-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return std::filesystem::path(pattern);
  }();
  return dir;
}

/// Whether the targets skip the inputs of recorded findings (fuzz/README.md) so that fuzzing gets
/// past them; FILKIT_FUZZ_ALL=1 turns that off, to see whether a finding is fixed.
inline bool skip_known_findings() {
  static const bool skip = std::getenv("FILKIT_FUZZ_ALL") == nullptr;
  return skip;
}

/// Writes `bytes` to `name` in the scratch directory (replacing it) and returns the path.
inline std::string write_input(const std::string& name, std::string_view bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// `text` cut at each `separator`, into at most `max_parts` parts (the last keeps the rest).
inline std::vector<std::string_view> split(std::string_view text, char separator, std::size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const std::size_t at = text.find(separator);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.push_back(text);
  return parts;
}

/// Runs `body` and says whether it returned. A std::exception with a message is a valid outcome
/// (the reader rejected the input); one with an empty message is a finding, and anything else
/// propagates (a finding: libFuzzer reports the uncaught exception).
template <class Body>
bool runs_or_rejects(Body&& body) {
  try {
    body();
    return true;
  } catch (const std::exception& error) {
    FILKIT_FUZZ_CHECK(error.what() != nullptr && error.what()[0] != '\0');
    return false;
  }
}

}  // namespace filkit::fuzz
