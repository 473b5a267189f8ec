// A job's outputs (job.hpp): the paths checked before the work, every content formed before any
// is written, the files written as a set, then the report built from the files just written.
#include "filkit/jobs/job.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/summary_schema.hpp"
#include "filkit/report/report.hpp"

#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

namespace filkit {

namespace fs = std::filesystem;

bool JobOutputs::empty() const {
  if (!out.empty() || !json.empty() || !report.empty()) return false;
  for (const auto& [name, path] : extra)
    if (!path.empty()) return false;
  return true;
}

namespace {

// The files write_job_outputs may put into the report directory besides the report itself (and
// the table, JobResult::table_file; most jobs' per-example.csv).
constexpr const char* kReportSummary = "summary.json";
constexpr const char* kReportTable = "per-example.csv";

void check_report_directory(const std::string& report) {
  if (report.empty()) return;
  if (report == kStandardOutput) option_error("report", "-", "the report is a directory of files; name one");
  check_output_directory("report", report);
  if (!fs::exists(report)) return check_output_path("report", report);  // created in a writable directory
  for (const char* file : {"report.html", kReportSummary, kReportTable})
    check_output_path("report", (fs::path(report) / file).string());
}

std::string table_csv(const JobResult& result) {
  const NumericTable table = result.table();
  if (table.header.empty()) option_error("out", "this job writes no table");
  return table.to_csv();
}

/// The file the report reads a summary or table from: the named output, or its copy in the report
/// directory when none is named or the named one cannot be read back (standard output, a device,
/// a FIFO, a link).
std::string report_input(const std::string& named, const std::string& report, const std::string& file) {
  if (!named.empty() && !is_written_through(named)) return named;
  return (fs::path(report) / file).string();
}

/// Every file of a run, formed before any is written: an error here (e.g. an unknown table)
/// leaves nothing half-written.
struct FormedOutputs {
  std::vector<OutputFile> files;
  std::string report_summary, report_table;  ///< what the report reads
};

FormedOutputs form_outputs(const JobResult& result, const JobOutputs& outputs) {
  FormedOutputs formed;
  std::optional<std::string> summary, table;
  const auto summary_json = [&]() -> const std::string& {
    // Options are UTF-8 (option_from_text); names read from a data file (columns, levels) may not
    // be, and are written with U+FFFD in place of their invalid bytes rather than failing here.
    if (!summary) {
      const nlohmann::json json = result.to_json();
      check_written_summary(json);
      summary = json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    return *summary;
  };
  const auto table_content = [&]() -> const std::string& {
    if (!table) table = table_csv(result);
    return *table;
  };
  if (!outputs.json.empty()) formed.files.push_back({outputs.json, summary_json()});
  if (!outputs.out.empty()) formed.files.push_back({outputs.out, table_content()});
  for (const auto& [name, path] : outputs.extra)
    if (!path.empty()) formed.files.push_back({path, result.extra_table(name).to_csv()});
  if (outputs.report.empty()) return formed;
  formed.report_summary = report_input(outputs.json, outputs.report, kReportSummary);
  formed.report_table = report_input(outputs.out, outputs.report, result.table_file());
  if (formed.report_summary != outputs.json) formed.files.push_back({formed.report_summary, summary_json()});
  if (formed.report_table != outputs.out) formed.files.push_back({formed.report_table, table_content()});
  return formed;
}

/// The report built from the summary and table written before; returns report.html's path.
std::string build_report(const std::string& directory, const FormedOutputs& formed, bool quiet) {
  ReportOptions report;
  report.out_dir = directory;
  report.inputs = {formed.report_summary};
  report.tables = {formed.report_table};
  const ReportResult built = write_report(report);
  if (!quiet) {
    std::cerr << "filkit report: wrote " << built.html << " (" << built.figures.size() << " figures)\n";
    for (const std::string& note : built.notes) std::cerr << "  note: " << note << "\n";
  }
  return built.html;
}

}  // namespace

void check_output_paths(const JobOutputs& outputs, const std::vector<std::pair<std::string, std::string>>& kept) {
  if (!outputs.out.empty()) check_output_path("out", outputs.out);
  if (!outputs.json.empty()) check_output_path("json", outputs.json);
  for (const auto& [name, path] : outputs.extra)
    if (!path.empty()) check_output_path(name, path);
  check_report_directory(outputs.report);
  std::vector<std::pair<std::string, std::string>> named = kept;
  named.emplace_back("out", outputs.out);
  named.emplace_back("json", outputs.json);
  for (const auto& [name, path] : outputs.extra) named.emplace_back(name, path);
  check_distinct_outputs(named);
}

nlohmann::json job_summary_header(const std::string& command, std::uint64_t seed) {
  return {{"command", command},
          {"filkit_version", version()},
          {"filkit_build", build()},
          {"seed", seed},
          {"mpi_ranks", Communicator::world().size()}};
}

std::vector<std::string> write_job_outputs(const JobResult& result, const JobOutputs& outputs, bool quiet) {
  if (!result.complete()) return {};
  // The test suite checks every summary a job forms, asked for or not.
  if (strict_summary_schema() && outputs.json.empty() && outputs.report.empty())
    check_written_summary(result.to_json());
  if (!outputs.report.empty()) create_output_directory("report", outputs.report);
  const FormedOutputs formed = form_outputs(result, outputs);
  write_output_files(formed.files);
  std::vector<std::string> written;
  for (const OutputFile& file : formed.files) written.push_back(file.path);
  // The report reads the files just written, so it comes after them.
  if (!outputs.report.empty()) written.push_back(build_report(outputs.report, formed, quiet));
  result.outputs_written();
  return written;
}

}  // namespace filkit
