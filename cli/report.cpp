#include "report.hpp"

#include <filesystem>

#include <iostream>
#include <memory>

namespace filkit::cli {

void setup_report(CLI::App& app) {
  auto options = std::make_shared<ReportCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Draw figures (PNG, with gnuplot) and write a self-contained HTML report from the JSON summaries and "
      "per-example CSV tables of measure, bound, reconstruct, dpsgd, irfil and attack.");
  command->add_option("--input", options->inputs, "A summary JSON (--json of a command); repeatable, one section each")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--table", options->tables,
                      "A per-example CSV (--out of a command); repeatable, the k-th belongs to the k-th --input")
      ->check(CLI::ExistingFile);
  command->add_option("--out", options->out, "Report directory (report.html and the PNG figures); created if missing")
      ->required();
  command->add_option("--gnuplot", options->gnuplot, "The gnuplot executable")->capture_default_str();
  command->add_flag("--no-images", options->no_images, "Do not re-load the dataset for the highest/lowest-eta images");
  command->callback([options] { run_report(*options, std::cout); });
}

ReportResult run_report(const ReportCommandOptions& options, std::ostream& out) {
  ReportOptions report;
  report.inputs = options.inputs;
  report.tables = options.tables;
  report.out_dir = options.out;
  report.gnuplot = options.gnuplot;
  report.images = !options.no_images;
  const ReportResult result = write_report(report);
  print_report_result(result, out);
  return result;
}

void print_report_result(const ReportResult& result, std::ostream& out) {
  out << "filkit report: wrote " << result.html << " (" << result.figures.size() << " figures)\n";
  for (const std::string& note : result.notes) out << "  note: " << note << "\n";
}

void add_report_flag(CLI::App& command, std::string& dir) {
  command.add_option("--report", dir,
                     "Also write a report here: figures and report.html (as `filkit report`); the summary and "
                     "table go here too unless --json/--out name them");
}

void run_with_report(const std::string& dir, RunFlags& run, const std::function<void()>& command,
                     std::ostream& out) {
  if (dir.empty()) return command();
  std::filesystem::create_directories(dir);
  const std::filesystem::path directory(dir);
  if (run.json.empty()) run.json = (directory / "summary.json").string();
  if (run.out.empty()) run.out = (directory / "per-example.csv").string();
  command();
  ReportOptions report;
  report.out_dir = dir;
  report.inputs = {run.json};
  report.tables = {run.out};
  const ReportResult written = write_report(report);
  if (!run.quiet) print_report_result(written, out);
}

}  // namespace filkit::cli
