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

/// A CSV table of text cells, written atomically; cells holding a comma, quote or newline are
/// quoted. For tables of numbers write_numeric_csv is faster (no string per cell).
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

/// Formats a double as the shortest text that reads back as the same double (std::to_chars:
/// "0.1", "1e-05", "3"), "nan"/"inf"/"-inf" spelled out.
std::string format_double(double value);

/// A CSV of numbers: the header line, then one line a row. Integral values below 1e15 in
/// magnitude are written as integers ("12000", not "1.2e+04"), others as format_double does,
/// so every cell reads back as the same double. Formatted straight into one buffer. Throws
/// std::invalid_argument if a row's width differs from the header's.
std::string numeric_csv(const std::vector<std::string>& header,
                        const std::vector<std::vector<double>>& rows);
/// numeric_csv written atomically (write_file_atomically).
void write_numeric_csv(const std::string& path, const std::vector<std::string>& header,
                       const std::vector<std::vector<double>>& rows);

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
