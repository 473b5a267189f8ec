#include "filkit/base/io.hpp"

#include "filkit/base/types.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace filkit {

std::string version() { return FILKIT_VERSION; }

void write_file_atomically(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path() && !fs::exists(target.parent_path())) {
    throw std::runtime_error("cannot write '" + path + "': directory '" +
                             target.parent_path().string() + "' does not exist");
  }
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot open '" + temporary + "' for writing");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      throw std::runtime_error("failed writing '" + temporary + "' (disk full?)");
    }
  }
  std::error_code error;
  fs::rename(temporary, target, error);
  if (error) {
    fs::remove(temporary, error);
    throw std::runtime_error("cannot rename '" + temporary + "' to '" + path + "'");
  }
}

std::string format_double(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

CsvTable::CsvTable(std::vector<std::string> header) : header_(std::move(header)) {}

void CsvTable::add_row(std::vector<std::string> cells) {
  if (cells.size() != header_.size()) {
    throw std::invalid_argument("CSV row has " + std::to_string(cells.size()) + " cells, header has " +
                                std::to_string(header_.size()));
  }
  rows_.push_back(std::move(cells));
}

namespace {
std::string quote_if_needed(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}
}  // namespace

std::string CsvTable::to_string() const {
  std::ostringstream out;
  auto write_line = [&out](const std::vector<std::string>& cells) {
    for (std::size_t j = 0; j < cells.size(); ++j) out << (j ? "," : "") << quote_if_needed(cells[j]);
    out << '\n';
  };
  write_line(header_);
  for (const auto& row : rows_) write_line(row);
  return out.str();
}

void CsvTable::write(const std::string& path) const { write_file_atomically(path, to_string()); }

namespace {
std::mutex progress_mutex;
}

Progress::Progress(std::string label, std::int64_t total, bool quiet)
    : label_(std::move(label)), total_(total), quiet_(quiet),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::advance(std::int64_t steps) {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(progress_mutex);
  done_ += steps;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ > std::chrono::milliseconds(100)) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (quiet_ || finished_) return;
  std::lock_guard<std::mutex> lock(progress_mutex);
  finished_ = true;
  done_ = total_;
  draw(true);
}

void Progress::draw(bool final_line) {
  const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const int width = 24;
  const int filled = static_cast<int>(fraction * width + 0.5);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r%s [%s%s] %3d%% %.1fs%s", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), static_cast<int>(100 * fraction), seconds,
               final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace filkit
