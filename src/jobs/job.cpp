#include "filkit/jobs/job.hpp"

#include "base/seeding.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/data/load.hpp"
#include "filkit/report/report.hpp"

#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

std::string NumericTable::to_csv() const { return numeric_csv(header, rows); }

NumericTable model_table(std::vector<std::string> keys, Index parameter_count) {
  NumericTable table{std::move(keys), {}};
  for (Index j = 0; j < parameter_count; ++j) table.header.push_back("w" + std::to_string(j));
  return table;
}

void add_model_row(NumericTable& table, std::vector<double> keys, const VectorXd& parameters) {
  const std::size_t columns = keys.size() + static_cast<std::size_t>(parameters.size());
  // Tables are laid out by the jobs themselves: a bug otherwise.
  if (columns != table.header.size())
    throw std::logic_error("add_model_row: " + std::to_string(keys.size()) + " keys and " +
                           std::to_string(parameters.size()) + " parameters for a table of " +
                           std::to_string(table.header.size()) + " columns");
  keys.insert(keys.end(), parameters.data(), parameters.data() + parameters.size());
  table.rows.push_back(std::move(keys));
}

NumericTable JobResult::extra_table(const std::string& name) const {
  throw OptionError::with_text("output", "this job has no output named '" + name + "'");
}

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

namespace {

// A machine's share, not a setting of the results: it may differ between the nodes of a job.
constexpr const char* kMachineSettings[] = {"max_memory"};

/// A hash of a file's whole contents, read in pieces (words of 8 bytes mixed by splitmix64; a
/// few GB/s, so that a rank checking its copy of the data costs a fraction of reading it).
std::optional<std::uint64_t> contents_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> buffer(std::size_t{1} << 20);
  std::uint64_t hash = 0x9e3779b97f4a7c15ULL;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    std::size_t k = 0;
    for (; k + 8 <= got; k += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, buffer.data() + k, 8);
      hash = splitmix64(hash ^ word);
    }
    std::uint64_t tail = got - k;  // the last bytes, with their count (so trailing zeros count)
    for (; k < got; ++k) tail = (tail << 8) | static_cast<unsigned char>(buffer[k]);
    if (got % 8 != 0) hash = splitmix64(hash ^ tail);
  }
  if (in.bad()) return std::nullopt;
  return hash;
}

/// What a rank knows of the files a setting names (a data source's files, or the file a path
/// names): each path, its size and a hash of its contents. Empty for anything else.
nlohmann::json file_identities(const std::string& name, const std::string& value) {
  std::vector<std::string> paths;
  std::error_code error;
  if (name == "data") paths = dataset_source_files(value);
  else if (!value.empty() && fs::is_regular_file(value, error)) paths = {value};
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& path : paths) {
    const std::uintmax_t size = fs::file_size(path, error);
    const std::optional<std::uint64_t> hash = contents_hash(path);
    if (error || !hash) continue;  // unreadable here: the loader says so
    files.push_back({{"path", path}, {"bytes", size}, {"hash", std::to_string(*hash)}});
  }
  return files;
}

/// What rank `rank` must agree on with rank 0: the command, its settings, the files they name.
nlohmann::json rank_identity(const std::string& command, const nlohmann::json& settings) {
  nlohmann::json compared = settings, files = nlohmann::json::object();
  for (const char* name : kMachineSettings) compared.erase(name);
  for (const auto& [name, value] : compared.items())
    if (value.is_string()) {
      nlohmann::json identities = file_identities(name, value.get<std::string>());
      if (!identities.empty()) files[name] = std::move(identities);
    }
  return {{"command", command}, {"settings", compared}, {"files", files}};
}

std::string shown_setting(const nlohmann::json& value) {
  if (value.is_null()) return "(not set)";
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  return text.size() > 100 ? text.substr(0, 100) + "..." : text;
}

/// How the files of setting `name` differ on rank `rank` from rank 0's (`zero`, `other`: their
/// file_identities); empty if they do not.
Message files_difference(const std::string& name, const std::string& value, const nlohmann::json& zero,
                         const nlohmann::json& other, int rank) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  const Message subject = option_name(name) + " " + value;
  if (zero.size() != other.size())
    return subject + " reads " + std::to_string(other.size()) + " file(s)" + on + std::to_string(zero.size()) +
           " on rank 0";
  for (std::size_t k = 0; k < zero.size(); ++k) {
    const nlohmann::json &a = zero[k], &b = other[k];
    const std::string path = b["path"].get<std::string>();
    const Message file = a["path"] == b["path"] ? subject + (path == value ? Message("") : Message(" (" + path + ")"))
                                                : subject + " (" + path + " on rank " + std::to_string(rank) + ", " +
                                                      a["path"].get<std::string>() + " on rank 0)";
    if (a["bytes"] != b["bytes"])
      return file + " has " + b["bytes"].dump() + " bytes" + on + a["bytes"].dump() + " on rank 0";
    if (a["hash"] != b["hash"]) return file + " has other contents" + on + "the same size on rank 0";
  }
  return {};
}

/// How rank `rank`'s identity differs from rank 0's, naming the first differing option; empty
/// (and `option` untouched) if it does not.
Message rank_difference(const nlohmann::json& zero, const nlohmann::json& other, int rank, std::string& option) {
  const std::string on = " on rank " + std::to_string(rank) + " but ";
  if (zero["command"] != other["command"])
    return "the command is filkit " + shown_setting(other["command"]) + on + "filkit " + shown_setting(zero["command"]) +
           " on rank 0";
  const nlohmann::json &a = zero["settings"], &b = other["settings"];
  for (const auto& [name, value] : a.items())
    if (!b.contains(name) || b[name] != value) {
      option = name;
      return option_name(name) + " is " + shown_setting(b.contains(name) ? b[name] : nullptr) + on +
             shown_setting(value) + " on rank 0";
    }
  for (const auto& [name, value] : b.items())
    if (!a.contains(name)) {
      option = name;
      return option_name(name) + " is " + shown_setting(value) + on + "not set on rank 0";
    }
  const nlohmann::json &fa = zero["files"], &fb = other["files"];
  const nlohmann::json none = nlohmann::json::array();
  for (const auto& [name, value] : a.items()) {
    if (!value.is_string()) continue;
    Message difference = files_difference(name, value.get<std::string>(), fa.contains(name) ? fa[name] : none,
                                          fb.contains(name) ? fb[name] : none, rank);
    if (!difference.plain().empty()) {
      option = name;
      return difference;
    }
  }
  return {};
}

}  // namespace

void check_ranks_agree(const std::string& command, const nlohmann::json& settings, const Communicator& comm) {
  if (!comm.distributed()) return;
  const std::vector<std::string> identities = comm.gather(rank_identity(command, settings).dump());
  std::exception_ptr problem;
  if (comm.is_root()) {
    const nlohmann::json zero = nlohmann::json::parse(identities[0]);
    for (int rank = 1; rank < static_cast<int>(identities.size()) && !problem; ++rank) {
      std::string option;
      const Message difference =
          rank_difference(zero, nlohmann::json::parse(identities[static_cast<std::size_t>(rank)]), rank, option);
      if (difference.plain().empty()) continue;
      const Message text = "the MPI ranks were started differently: " + difference +
                           "; start every rank with the same command, options and data (docs/distributed.md)";
      problem = std::make_exception_ptr(OptionError::with_text(option.empty() ? "command" : option, text));
    }
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
