#include "filkit/base/io.hpp"

#include "filkit/base/types.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>

#include <unistd.h>

namespace filkit {

std::string version() { return FILKIT_VERSION; }

#ifndef FILKIT_ARCH
#define FILKIT_ARCH "unknown"
#endif
std::string build() {
#if defined(__clang__)
  const std::string compiler = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("gcc ") + __VERSION__;
#else
  const std::string compiler = "unknown compiler";
#endif
#if defined(__AVX512F__)
  const char* widest = "AVX-512";
#elif defined(__AVX2__)
  const char* widest = "AVX2";
#elif defined(__AVX__)
  const char* widest = "AVX";
#else
  const char* widest = "SSE2";
#endif
  return compiler + ", instruction sets: " + FILKIT_ARCH + " (" + widest + ")";
}

namespace {

// Room for any number a cell holds: the shortest round-trip form of a double is at most 24
// characters ("-2.2250738585072014e-308"), an integer below 1e15 at most 16.
constexpr std::size_t kNumberChars = 32;

// Appends the shortest round-trip text of `value` at `out`; returns the end.
char* write_double(char* out, double value) {
  if (std::isnan(value)) return std::copy_n("nan", 3, out);
  if (std::isinf(value)) return value > 0 ? std::copy_n("inf", 3, out) : std::copy_n("-inf", 4, out);
  return std::to_chars(out, out + kNumberChars, value).ptr;
}

// A numeric cell: integers as integers (to_chars would write 100000 as "1e+05"); a value that is
// not a finite number (not computed, or an infinite bound) leaves the cell empty.
char* write_number(char* out, double value) {
  if (!std::isfinite(value)) return out;
  if (value == std::floor(value) && std::abs(value) < 1e15) {
    return std::to_chars(out, out + kNumberChars, static_cast<long long>(value)).ptr;
  }
  return write_double(out, value);
}

void check_width(std::size_t cells, std::size_t header) {
  // Rows are built by filkit's own writers: a width mismatch is a bug.
  if (cells != header) {
    throw std::logic_error("CSV row has " + std::to_string(cells) + " cells, header has " + std::to_string(header));
  }
}

bool needs_quotes(const std::string& cell) { return cell.find_first_of(",\"\n") != std::string::npos; }

void append_cell(std::string& out, const std::string& cell) {
  if (!needs_quotes(cell)) {
    out += cell;
    return;
  }
  out += '"';
  for (char c : cell) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void append_line(std::string& out, const std::vector<std::string>& cells) {
  for (std::size_t j = 0; j < cells.size(); ++j) {
    if (j > 0) out += ',';
    append_cell(out, cells[j]);
  }
  out += '\n';
}

}  // namespace

std::string format_double(double value) {
  char buffer[kNumberChars];
  return std::string(buffer, write_double(buffer, value));
}

CsvTable::CsvTable(std::vector<std::string> header) : header_(std::move(header)) {}

void CsvTable::add_row(std::vector<std::string> cells) {
  check_width(cells.size(), header_.size());
  rows_.push_back(std::move(cells));
}

std::string CsvTable::to_string() const {
  std::size_t size = 0;
  for (const auto& cell : header_) size += cell.size() + 1;
  for (const auto& row : rows_) {
    for (const auto& cell : row) size += cell.size() + 1;
  }
  std::string out;
  out.reserve(size + size / 16);  // and room for a few quotes
  append_line(out, header_);
  for (const auto& row : rows_) append_line(out, row);
  return out;
}

std::string numeric_csv(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows) {
  std::string out;
  append_line(out, header);
  std::size_t cells = 0;
  for (const auto& row : rows) {
    check_width(row.size(), header.size());
    cells += row.size();
  }
  // Sized for the longest numbers, then trimmed: one allocation, no string per cell.
  const std::size_t header_size = out.size();
  out.resize(header_size + cells * (kNumberChars + 1) + rows.size());
  char* end = out.data() + header_size;
  for (const auto& row : rows) {
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (j > 0) *end++ = ',';
      end = write_number(end, row[j]);
    }
    *end++ = '\n';
  }
  out.resize(static_cast<std::size_t>(end - out.data()));
  return out;
}

void write_numeric_csv(const std::string& path, const std::vector<std::string>& header,
                       const std::vector<std::vector<double>>& rows) {
  write_output_file(path, numeric_csv(header, rows));
}

void CsvTable::write(const std::string& path) const { write_output_file(path, to_string()); }

namespace {
std::mutex progress_mutex;
}

std::string format_duration(double seconds) {
  char buffer[48];
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  if (seconds < 60) {
    std::snprintf(buffer, sizeof buffer, "%.1fs", seconds);
  } else if (seconds < 3600) {
    const long long whole = std::llround(seconds);
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", whole / 60, whole % 60);
  } else {
    const long long minutes = std::llround(seconds / 60);
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", minutes / 60, minutes % 60);
  }
  return buffer;
}

std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, double seconds, bool bar,
                          bool final_report, std::int64_t done_before) {
  const double fraction =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int percent = static_cast<int>(100 * fraction);
  std::string text = label;
  char buffer[64];
  if (bar) {
    const int width = 24;
    const int filled = static_cast<int>(fraction * width + 0.5);
    std::snprintf(buffer, sizeof buffer, " [%s%s] %3d%%", std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), percent);
  } else {
    std::snprintf(buffer, sizeof buffer, ": %d%% (%lld/%lld)", percent, static_cast<long long>(done),
                  static_cast<long long>(total));
  }
  text += buffer;
  if (final_report) return text + " done in " + format_duration(seconds);
  text += " " + format_duration(seconds) + " elapsed";
  // This process' rate so far predicts the rest: no estimate before its first unit of work is done.
  const std::int64_t done_here = done - done_before;
  if (done_here > 0 && done < total)
    text +=
        ", ~" + format_duration(seconds * static_cast<double>(total - done) / static_cast<double>(done_here)) + " left";
  return text;
}

Progress::Progress(std::string label, std::int64_t total, bool quiet, double line_interval)
    : label_(std::move(label)),
      total_(total),
      quiet_(quiet),
      terminal_(::isatty(STDERR_FILENO) == 1),
      line_interval_(line_interval),
      uncaught_exceptions_(std::uncaught_exceptions()),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (std::uncaught_exceptions() <= uncaught_exceptions_) {
    finish();
    return;
  }
  // Unwound by an error: not "done"; a half-drawn terminal line ends, so the message starts a line.
  if (!quiet_ && !finished_ && drawn_) std::fputc('\n', stderr);
}

void Progress::advance(std::int64_t steps) {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(progress_mutex);
  done_ += steps;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = terminal_ ? std::chrono::duration<double>(0.1) : std::chrono::duration<double>(line_interval_);
  if (now - last_draw_ > interval) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::resume_at(std::int64_t steps) {
  std::lock_guard<std::mutex> lock(progress_mutex);
  done_ += steps;
  done_before_ += steps;
}

void Progress::finish() {
  if (quiet_ || finished_) return;
  std::lock_guard<std::mutex> lock(progress_mutex);
  finished_ = true;
  done_ = total_;
  draw(true);
}

void Progress::draw(bool final_line) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string text = progress_text(label_, done_, total_, seconds, terminal_, final_line, done_before_);
  // Padded on a terminal: a shorter line (the time left shrinking) must cover the longer one before.
  if (terminal_) std::fprintf(stderr, "\r%-78s%s", text.c_str(), final_line ? "\n" : "");
  else std::fprintf(stderr, "%s\n", text.c_str());
  drawn_ = terminal_ && !final_line;
  std::fflush(stderr);
}

}  // namespace filkit
