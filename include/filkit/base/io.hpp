// Output helpers shared by every command: atomic file writes, CSV tables, progress on stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace filkit {

/// Writes `content` to `path` atomically: a temporary file beside it, flushed, then renamed over
/// `path`, so a reader never sees half a file. Throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::string& path, const std::string& content);

/// A CSV table built column by column and written atomically; numbers with 17 significant digits.
class CsvTable {
 public:
  explicit CsvTable(std::vector<std::string> header);
  /// Appends one row; throws std::invalid_argument if its width differs from the header's.
  void add_row(std::vector<std::string> cells);
  std::string to_string() const;
  void write(const std::string& path) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// Formats a double exactly enough to round-trip ("%.17g"), "nan"/"inf" spelled out.
std::string format_double(double value);

/// A compact progress line on stderr ("label [#####.....] 52% 3.1s"), redrawn at most every
/// 100 ms; silent when `quiet`. Thread-safe `advance()`.
class Progress {
 public:
  Progress(std::string label, std::int64_t total, bool quiet);
  ~Progress();
  void advance(std::int64_t steps = 1);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool quiet_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace filkit
