// The gnuplot runner and the data helpers of the report.
#include "filkit/base/errors.hpp"
#include "report/report_internal.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace filkit::report {

namespace fs = std::filesystem;

namespace {

struct Outcome {
  int exit_code = 0;
  std::string output;  ///< stdout and stderr together
};

// Runs `program args...` without a shell (no quoting pitfalls) in the directory `cwd` (if not
// empty), its output captured in `log`.
Outcome run_command(const std::string& program, const std::vector<std::string>& args, const fs::path& log,
                    const fs::path& cwd = {}) {
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // After the log is opened, so that a relative log path means the caller's directory.
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    throw ResourceError("cannot run '" + program + "': " + std::strerror(error) +
                        " (install gnuplot-nox, see scripts/setup.sh)");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw ResourceError("waiting for '" + program + "' failed: " + std::strerror(errno));
  std::ifstream in(log);
  Outcome outcome;
  outcome.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  // posix_spawnp reports a missing program as exit 127 on glibc, not as an error.
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

}  // namespace

Plotter::Plotter(std::string gnuplot, fs::path scratch, fs::path out_dir)
    : gnuplot_(std::move(gnuplot)), scratch_(fs::absolute(scratch)), out_dir_(std::move(out_dir)) {
  const Outcome probe = run_command(gnuplot_, {"-e", "set terminal pngcairo"}, scratch_ / "probe.log");
  if (probe.exit_code == 127)
    throw ResourceError("cannot run '" + gnuplot_ + "': not found (install gnuplot-nox, see scripts/setup.sh)");
  // gnuplot built without cairo lacks pngcairo; its libgd png terminal draws the same figures.
  terminal_ = probe.exit_code == 0 ? "pngcairo enhanced font 'DejaVu Sans,11'" : "png enhanced";
}

Plotter Plotter::dry_run() {
  Plotter plotter;
  plotter.terminal_ = "png";
  plotter.dry_run_ = true;
  return plotter;
}

std::string Plotter::data(const std::string& content) {
  // Named by a count: gnuplot runs in the scratch directory and reads only names filkit made.
  const std::string name = "data-" + std::to_string(++files_) + ".dat";
  if (dry_run_) return gnuplot_string(name);
  const fs::path path = scratch_ / name;
  std::ofstream out(path);
  out << content;
  if (!out.flush()) throw ResourceError("cannot write '" + path.string() + "'");
  return gnuplot_string(name);
}

std::string Plotter::figure_file(const std::string& wanted) {
  // Letters, digits, '-', '_' and '.' (not first) only, at most 100 of them: a name taken from
  // an input (an irfil summary's attack key) can neither leave the report directory nor collide.
  std::string name;
  for (char c : wanted.substr(0, 100))
    name +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || (c == '.' && !name.empty()) ? c : '_';
  std::string file = name + ".png";
  for (int k = 2; !used_files_.insert(file).second; ++k) file = name + "-" + std::to_string(k) + ".png";
  return file;
}

void Plotter::plot(Section& section, const std::string& name, const std::string& caption, const std::string& body,
                   int width, int height) {
  const std::string file = figure_file(section.id + "-" + name);
  const std::string stem = "plot-" + std::to_string(++files_);
  std::ostringstream text;
  text << "set terminal " << terminal_ << " size " << width << "," << height << "\n"
       << "set output " << gnuplot_string(stem + ".png")
       << "\n"
       // The legend beside the plot, never over the data it names.
       << "set grid lc rgb '#dddddd'\nset key outside right top\n"
       // Short tick labels: the default prints rounding noise on log axes ("1000000000.0025635").
       << "set format x '%g'\nset format y '%g'\n"
       << body << "\nunset output\n";
  if (dry_run_) {
    dry_run_scripts_.push_back(text.str());
    section.figures.push_back({file, caption});
    return;
  }
  const fs::path script = scratch_ / (stem + ".gp");
  std::ofstream out(script);
  if (!(out << text.str()).flush()) throw ResourceError("cannot write '" + script.string() + "'");
  // A figure gnuplot cannot draw from a summary's values (e.g. "all points y2 value undefined")
  // is a note: a summary never fails the report.
  if (const std::string failure = run(stem + ".gp"); !failure.empty()) {
    section.notes.push_back(file + ": not drawn, " + failure);
    return;
  }
  // The scratch directory is inside the report directory, so this rename is atomic.
  fs::rename(scratch_ / (stem + ".png"), out_dir_ / file);
  section.figures.push_back({file, caption});
}

std::string Plotter::run(const std::string& script) const {
  // In the scratch directory, by the script's own name: no path (the report directory's name is
  // the user's) reaches gnuplot's command line or its scripts.
  const Outcome outcome =
      run_command(gnuplot_, {script}, scratch_ / fs::path(script).replace_extension(".log"), scratch_);
  if (outcome.exit_code == 0) return "";
  // gnuplot's message is its last lines (the script line, a caret, the reason), shortened.
  std::string message = outcome.output;
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) message.pop_back();
  if (message.size() > 400) message = "..." + message.substr(message.size() - 400);
  return "'" + gnuplot_ + "' failed (exit " + std::to_string(outcome.exit_code) + "): " + message;
}

// ---------------------------------------------------------------------------------------------

std::optional<double> number_at(const nlohmann::json& json, const std::string& path) {
  const nlohmann::json* node = &json;
  std::stringstream parts(path);
  for (std::string part; std::getline(parts, part, '.');) {
    if (node->is_array() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const std::size_t k = std::stoul(part);
      if (k >= node->size()) return std::nullopt;
      node = &(*node)[k];
    } else if (node->is_object() && node->contains(part)) {
      node = &(*node)[part];
    } else {
      return std::nullopt;
    }
  }
  if (!node->is_number()) return std::nullopt;
  return node->get<double>();
}

const std::vector<double>* column(const Input& input, const std::string& name, const std::string& figure,
                                  Section& section) {
  if (input.table_path.empty()) {
    section.notes.push_back(figure + ": skipped, no per-example table given (--table)");
    return nullptr;
  }
  const auto found = input.table.find(name);
  if (found == input.table.end()) {
    section.notes.push_back(figure + ": skipped, " + input.table_path + " has no column '" + name + "'");
    return nullptr;
  }
  return &found->second;
}

std::string gnuplot_string(const std::string& text) {
  // Single quotes: gnuplot substitutes `commands` and @macros in double-quoted strings and in
  // plain script text, never inside single quotes, where only '' (a quote) is special (checked
  // with gnuplot 5.4: tests/report/hostile_input_test.cpp prints names with ` ' " \ $ ; and system()).
  std::string out = "'";
  for (char c : text) {
    if (c == '\n') out += "'.\"\\n\".'";  // a line break drawn: 'a'."\n".'b'
    else if (c == '\'') out += "''";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += ' ';  // would end or garble the command
    else out += c;
  }
  return out + "'";
}

std::string rows_text(const std::vector<std::vector<double>>& rows) {
  std::string text;
  char buffer[32];
  for (const auto& row : rows) {
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (std::isfinite(row[k])) std::snprintf(buffer, sizeof buffer, "%.10g", row[k]);
      else std::snprintf(buffer, sizeof buffer, "NaN");
      if (k) text += ' ';
      text += buffer;
    }
    text += "\n";
  }
  return text;
}

std::vector<std::vector<double>> histogram(const std::vector<std::vector<double>>& groups, bool log_bins, int bins) {
  const auto usable = [&](double v) { return std::isfinite(v) && (!log_bins || v > 0); };
  const auto scale = [&](double v) { return log_bins ? std::log10(v) : v; };
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& group : groups)
    for (double v : group)
      if (usable(v)) lo = std::min(lo, scale(v)), hi = std::max(hi, scale(v));
  if (!(lo <= hi)) return {};
  // A single distinct value still gets a visible bar.
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(lo))) lo -= 0.5, hi += 0.5;
  // Half the bin width: finite even when the values span more than the largest double (hi - lo
  // would be inf, and inf / inf the bin).
  const double half_width = (hi / 2 - lo / 2) / bins;
  std::vector<std::vector<double>> rows(static_cast<std::size_t>(bins), std::vector<double>(groups.size() + 1, 0.0));
  for (int b = 0; b < bins; ++b) {
    const double centre = 2 * (lo / 2 + (b + 0.5) * half_width);
    rows[static_cast<std::size_t>(b)][0] = log_bins ? std::pow(10.0, centre) : centre;
  }
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (double v : groups[g]) {
      if (!usable(v)) continue;
      const double position = (scale(v) / 2 - lo / 2) / half_width;  // in [0, bins]
      const int b = static_cast<int>(std::min<double>(bins - 1, position));
      rows[static_cast<std::size_t>(b)][g + 1] += 1.0;
    }
  return rows;
}

std::vector<std::vector<double>> points(const std::vector<double>& x, const std::vector<double>& y, bool log_x,
                                        bool log_y, std::size_t* dropped) {
  std::vector<std::vector<double>> kept;
  const std::size_t n = std::min(x.size(), y.size());
  for (std::size_t i = 0; i < n; ++i) {
    const bool ok = std::isfinite(x[i]) && std::isfinite(y[i]) && (!log_x || x[i] > 0) && (!log_y || y[i] > 0);
    if (ok) kept.push_back({x[i], y[i]});
  }
  if (dropped) *dropped = n - kept.size();
  return kept;
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string format_digits(double value, int digits) {
  if (!std::isfinite(value)) return format_number(value);
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.*g", std::clamp(digits, 1, 17), value);
  return buffer;
}

std::string mean_and_spread(const nlohmann::json& statistics, int digits) {
  const auto mean = number_at(statistics, "mean");
  if (!mean) return "";
  const nlohmann::json runs = statistics.is_object() ? statistics.value("runs", nlohmann::json()) : nlohmann::json();
  const auto spread = number_at(statistics, "std");
  // One run has no spread: "-", not a standard deviation of 0.
  const bool single = runs.is_array() ? runs.size() < 2 : !spread;
  return format_digits(*mean, digits) + " (" + (single || !spread ? "-" : format_digits(*spread, 2)) + ")";
}

std::optional<int> class_index(double label) {
  if (!(label == std::floor(label) && std::abs(label) <= std::numeric_limits<int>::max())) return std::nullopt;
  return static_cast<int>(label);
}

std::string class_name(const nlohmann::json& summary, int k) {
  const auto name_at = [&](const char* key) -> nlohmann::json {
    const nlohmann::json list = summary.is_object() ? summary.value(key, nlohmann::json()) : nlohmann::json();
    return list.is_array() && k >= 0 && static_cast<std::size_t>(k) < list.size() ? list[static_cast<std::size_t>(k)]
                                                                                  : nlohmann::json();
  };
  if (const nlohmann::json name = name_at("class_names"); name.is_string() && !name.get<std::string>().empty())
    return name.get<std::string>();
  const nlohmann::json settings =
      summary.is_object() ? summary.value("settings", nlohmann::json::object()) : nlohmann::json();
  const nlohmann::json classes = settings.is_object() ? settings.value("classes", nlohmann::json()) : nlohmann::json();
  if (classes.is_array() && k >= 0 && static_cast<std::size_t>(k) < classes.size() && classes[k].is_number())
    return "class " + classes[k].dump();
  return "label " + std::to_string(k);
}

}  // namespace filkit::report
