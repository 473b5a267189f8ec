#include "filkit/jobs/job.hpp"

#include "filkit/base/io.hpp"
#include "filkit/report/report.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
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

std::string flag_of(const std::string& name) {
  std::string flag = "--" + name;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

// The files write_job_outputs may put into the report directory besides the report itself (and
// the table, JobResult::table_file; most jobs' per-example.csv).
constexpr const char* kReportSummary = "summary.json";
constexpr const char* kReportTable = "per-example.csv";

void check_report_directory(const std::string& report) {
  if (report.empty()) return;
  if (report == kStandardOutput) throw std::invalid_argument("--report -: the report is a directory of files; name one");
  if (!fs::exists(report)) return check_output_path("--report", report);  // created in a writable directory
  if (!fs::is_directory(report)) throw std::invalid_argument("--report " + report + ": exists and is not a directory");
  for (const char* file : {"report.html", kReportSummary, kReportTable})
    check_output_path("--report", (fs::path(report) / file).string());
}

std::string table_csv(const JobResult& result) {
  const NumericTable table = result.table();
  if (table.header.empty()) throw std::invalid_argument("--out: this job writes no table");
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
    if (!summary) summary = result.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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

void check_output_paths(const JobOutputs& outputs) {
  if (!outputs.out.empty()) check_output_path("--out", outputs.out);
  if (!outputs.json.empty()) check_output_path("--json", outputs.json);
  for (const auto& [name, path] : outputs.extra)
    if (!path.empty()) check_output_path(flag_of(name), path);
  check_report_directory(outputs.report);
  std::vector<std::pair<std::string, std::string>> named = {{"--out", outputs.out}, {"--json", outputs.json}};
  for (const auto& [name, path] : outputs.extra) named.emplace_back(flag_of(name), path);
  check_distinct_outputs(named);
}

namespace {

// A machine's share, not a setting of the results: it may differ between the nodes of a job.
constexpr const char* kMachineSettings[] = {"max_memory"};

/// What a rank knows of a file a setting names: its size and a hash (FNV-1a) of its first and
/// last 64 KiB, which hold the header and the end of the data (a file cut short or another
/// dataset differs there). Null for anything but a regular file.
nlohmann::json file_identity(const std::string& path) {
  std::error_code error;
  if (path.empty() || !fs::is_regular_file(path, error)) return nullptr;
  const std::uintmax_t size = fs::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (error || !in) return nullptr;
  constexpr std::uintmax_t kPart = 64 * 1024;
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  std::vector<char> buffer(kPart);
  for (const std::uintmax_t start : {std::uintmax_t{0}, size > kPart ? size - kPart : std::uintmax_t{0}}) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(start));
    in.read(buffer.data(), static_cast<std::streamsize>(kPart));
    for (std::streamsize k = 0; k < in.gcount(); ++k)
      hash = (hash ^ static_cast<unsigned char>(buffer[static_cast<std::size_t>(k)])) * 0x100000001b3ULL;
  }
  return {{"bytes", size}, {"hash", std::to_string(hash)}};
}

/// What rank `rank` must agree on with rank 0: the command, its settings, the files they name.
nlohmann::json rank_identity(const std::string& command, const nlohmann::json& settings) {
  nlohmann::json compared = settings, files = nlohmann::json::object();
  for (const char* name : kMachineSettings) compared.erase(name);
  for (const auto& [name, value] : compared.items())
    if (value.is_string()) {
      const nlohmann::json identity = file_identity(value.get<std::string>());
      if (!identity.is_null()) files[name] = identity;
    }
  return {{"command", command}, {"settings", compared}, {"files", files}};
}

std::string shown_setting(const nlohmann::json& value) {
  if (value.is_null()) return "(not set)";
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  return text.size() > 100 ? text.substr(0, 100) + "..." : text;
}

/// How rank `rank`'s identity differs from rank 0's, naming the first differing flag; empty if not.
std::string rank_difference(const nlohmann::json& zero, const nlohmann::json& other, int rank) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  if (zero["command"] != other["command"])
    return "the command is filkit " + shown_setting(other["command"]) + on + "filkit " + shown_setting(zero["command"]) +
           " on rank 0";
  const nlohmann::json &a = zero["settings"], &b = other["settings"];
  for (const auto& [name, value] : a.items())
    if (!b.contains(name) || b[name] != value)
      return flag_of(name) + " is " + shown_setting(b.contains(name) ? b[name] : nullptr) + on +
             shown_setting(value) + " on rank 0";
  for (const auto& [name, value] : b.items())
    if (!a.contains(name)) return flag_of(name) + " is " + shown_setting(value) + on + "not set on rank 0";
  const nlohmann::json &fa = zero["files"], &fb = other["files"];
  for (const auto& [name, value] : a.items()) {
    const bool in_a = fa.contains(name), in_b = fb.contains(name);
    if (in_a == in_b && (!in_a || fa[name] == fb[name])) continue;
    const std::string path = value.get<std::string>();
    if (!in_a || !in_b)
      return flag_of(name) + " " + path + " is " + (in_b ? "" : "not ") + "a readable file on rank " +
             std::to_string(rank) + " but " + (in_a ? "" : "not ") + "on rank 0";
    if (fa[name]["bytes"] != fb[name]["bytes"])
      return flag_of(name) + " " + path + " has " + fb[name]["bytes"].dump() + " bytes" + on + fa[name]["bytes"].dump() +
             " on rank 0";
    return flag_of(name) + " " + path + " has other contents" + on + "the same size on rank 0";
  }
  return "";
}

}  // namespace

void check_ranks_agree(const std::string& command, const nlohmann::json& settings, const Communicator& comm) {
  if (!comm.distributed()) return;
  const std::vector<std::string> identities = comm.gather(rank_identity(command, settings).dump());
  std::string problem;
  if (comm.is_root()) {
    const nlohmann::json zero = nlohmann::json::parse(identities[0]);
    for (int rank = 1; rank < static_cast<int>(identities.size()) && problem.empty(); ++rank)
      problem = rank_difference(zero, nlohmann::json::parse(identities[static_cast<std::size_t>(rank)]), rank);
    if (!problem.empty())
      problem = "the MPI ranks were started differently: " + problem +
                "; start every rank with the same command, options and data (docs/distributed.md)";
  }
  comm.stop_all_if(problem);
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
  if (!outputs.report.empty()) fs::create_directories(outputs.report);
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
