// Output helpers shared by every command: output files written without destroying what a path
// leads to, CSV tables, progress on stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace filkit {

/// The output path meaning standard output ("--json -").
inline constexpr const char* kStandardOutput = "-";

/// Throws OptionError naming `option` (its declared name) and `path` unless `path` can take an output:
/// "-" (standard output); an existing device, FIFO or symbolic link that can be written; or a
/// new or regular file in an existing, writable directory. Call it before the work whose result
/// goes there, so that a long run never ends at an unwritable path.
void check_output_path(const std::string& option, const std::string& path);

/// Throws OptionError naming `option` and `path` unless `path` is a directory or can become one:
/// not something else, no loop of links, and neither it nor a folder on it a symbolic link whose
/// target does not exist (named in the message; the system would say "File exists").
void check_output_directory(const std::string& option, const std::string& path);

/// Creates the directory `path` (and its parents) for the output option `option` after
/// check_output_directory, or throws OptionError with the system's reason. An existing directory
/// is left as it is.
void create_output_directory(const std::string& option, const std::string& path);

/// Throws OptionError when two of `outputs` (option, path) name the same regular file
/// (after following links): one would silently replace the other. Devices and FIFOs may be shared.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

/// One output: where it goes and its whole content.
struct OutputFile {
  std::string path;
  std::string content;
};

/// Writes `files` as a set, never destroying what a path leads to:
/// - a regular file (or a new one) is replaced whole: the content goes to a temporary file in the
///   same directory, synced to disk, then renamed over the path (and the directory synced), so a
///   reader sees the old file or the new one, never half of one;
/// - "-" (standard output), a character or block device, a FIFO or a symbolic link is written
///   through: opened and written in place, never replaced (so /dev/null stays a device, a link
///   stays a link).
/// Every temporary is written and synced, and every written-through path written, before the
/// first rename: when any of that fails, no file is replaced and the temporaries are removed.
/// Throws std::runtime_error naming the path and the system's reason.
void write_output_files(const std::vector<OutputFile>& files);

/// Whether write_output_files writes `path` in place rather than replacing it: "-", a character
/// or block device, a FIFO or a symbolic link.
bool is_written_through(const std::string& path);

/// write_output_files of one file.
void write_output_file(const std::string& path, const std::string& content);

/// A CSV table of text cells, written by write_output_file; cells holding a comma, quote or newline are
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
/// so every cell reads back as the same double. NaN and infinities are empty cells (a value not
/// computed, such as a network's eta without power iteration, or an infinite MSE bound, such as
/// that of an example never sampled): every non-empty cell is a finite number. Formatted straight into one buffer.
/// Throws std::invalid_argument if a row's width differs from the header's.
std::string numeric_csv(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows);
/// numeric_csv written by write_output_file.
void write_numeric_csv(const std::string& path, const std::vector<std::string>& header,
                       const std::vector<std::vector<double>>& rows);

/// "2.5s", "3m05s", "1h02m": a duration for progress lines.
std::string format_duration(double seconds);

/// One progress report: "label [#####.......]  42% 3.1s elapsed, ~4.3s left" on a terminal
/// (`bar`), "label: 42% (420/1000), 3.1s elapsed, ~4.3s left" otherwise. The time left is the
/// work left at the rate of this process' own work: `seconds` spent on done - `done_before`
/// units, where `done_before` were done before it started (the steps of a resumed run), so a
/// resume's estimate does not count them as done in no time. No estimate before a unit of this
/// process' own is done; a final report says "done".
std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, double seconds, bool bar,
                          bool final_report, std::int64_t done_before = 0);

/// Progress on stderr, silent when `quiet`. On a terminal one line redrawn in place (\r) at most
/// every 100 ms; otherwise (a log file, a pipe, a batch job's output) a line of its own every
/// `line_interval` seconds and one at the end, so that logs hold no \r and no thousands of lines.
/// Thread-safe `advance()`. Destroyed by an exception, it reports no "done" (the error follows).
class Progress {
 public:
  Progress(std::string label, std::int64_t total, bool quiet, double line_interval = 10.0);
  ~Progress();
  void advance(std::int64_t steps = 1);
  /// Counts `steps` done before this process started (a resumed run's): in the percentage, not in
  /// the rate that estimates the time left.
  void resume_at(std::int64_t steps);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  std::int64_t total_;
  std::int64_t done_ = 0;
  std::int64_t done_before_ = 0;  ///< of done_, the units done before this process (resume_at)
  bool quiet_;
  bool terminal_;
  double line_interval_;
  bool finished_ = false;
  bool drawn_ = false;           ///< a line drawn on the terminal that a newline must end
  int uncaught_exceptions_ = 0;  ///< at construction: the destructor of a failed stage says nothing
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace filkit
