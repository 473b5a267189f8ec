#include "filkit/jobs/job.hpp"

#include "filkit/base/io.hpp"
#include "filkit/report/report.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

std::string NumericTable::to_csv() const { return numeric_csv(header, rows); }

NumericTable JobResult::extra_table(const std::string& name) const {
  throw std::invalid_argument("this job has no output named '" + name + "'");
}

bool JobOutputs::empty() const {
  if (!out.empty() || !json.empty() || !report.empty()) return false;
  for (const auto& [name, path] : extra)
    if (!path.empty()) return false;
  return true;
}

namespace {

void check_directory_of(const std::string& option, const std::string& path) {
  if (path.empty()) return;
  const fs::path parent = fs::absolute(path).parent_path();
  if (!fs::is_directory(parent))
    throw std::invalid_argument(option + " " + path + ": the directory " + parent.string() + " does not exist");
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::invalid_argument(option + " " + path + ": the directory " + parent.string() + " is not writable");
}

std::string flag_of(const std::string& name) {
  std::string flag = "--" + name;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

}  // namespace

void check_output_paths(const JobOutputs& outputs) {
  check_directory_of("--out", outputs.out);
  check_directory_of("--json", outputs.json);
  for (const auto& [name, path] : outputs.extra) check_directory_of(flag_of(name), path);
  if (!outputs.report.empty()) {
    const fs::path report = fs::absolute(outputs.report);
    if (fs::exists(report) && !fs::is_directory(report))
      throw std::invalid_argument("--report " + outputs.report + ": exists and is not a directory");
    check_directory_of("--report", fs::is_directory(report) ? (report / "x").string() : report.string());
  }
}

nlohmann::json job_summary_header(const std::string& command, std::uint64_t seed) {
  return {{"command", command}, {"filkit_version", version()}, {"seed", seed}};
}

std::vector<std::string> write_job_outputs(const JobResult& result, const JobOutputs& requested, bool quiet) {
  if (!result.complete()) return {};
  JobOutputs outputs = requested;
  if (!outputs.report.empty()) {
    fs::create_directories(outputs.report);
    if (outputs.json.empty()) outputs.json = (fs::path(outputs.report) / "summary.json").string();
    if (outputs.out.empty()) outputs.out = (fs::path(outputs.report) / "per-example.csv").string();
  }
  // Form every content first: an error here (e.g. an unknown table) leaves nothing half-written.
  std::vector<std::pair<std::string, std::string>> files;
  if (!outputs.json.empty()) files.emplace_back(outputs.json, result.to_json().dump(2) + "\n");
  if (!outputs.out.empty()) {
    const NumericTable table = result.table();
    if (table.header.empty()) throw std::invalid_argument("--out: this job writes no table");
    files.emplace_back(outputs.out, table.to_csv());
  }
  for (const auto& [name, path] : outputs.extra)
    if (!path.empty()) files.emplace_back(path, result.extra_table(name).to_csv());
  for (const auto& [path, content] : files) write_output_file(path, content);
  std::vector<std::string> written;
  for (const auto& file : files) written.push_back(file.first);
  if (!outputs.report.empty()) {
    ReportOptions report;
    report.out_dir = outputs.report;
    report.inputs = {outputs.json};
    report.tables = {outputs.out};
    const ReportResult built = write_report(report);
    written.push_back(built.html);
    if (!quiet) {
      std::cerr << "filkit report: wrote " << built.html << " (" << built.figures.size() << " figures)\n";
      for (const std::string& note : built.notes) std::cerr << "  note: " << note << "\n";
    }
  }
  return written;
}

}  // namespace filkit
