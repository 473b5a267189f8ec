// `filkit report`: figures and a self-contained HTML report from the other commands' outputs.
#pragma once

#include "common.hpp"

#include "filkit/report/report.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace filkit::cli {

struct ReportCommandOptions {
  std::vector<std::string> inputs;  ///< summary JSONs (--input, repeatable)
  std::vector<std::string> tables;  ///< per-example CSVs (--table, repeatable; k-th for the k-th input)
  std::string out;                  ///< report directory
  std::string gnuplot = "gnuplot";  ///< the gnuplot executable
  bool no_images = false;           ///< skip re-loading images for the image grids
};

void setup_report(CLI::App& app);
/// Writes the report and prints where it went and which figures were skipped to `out`.
ReportResult run_report(const ReportCommandOptions& options, std::ostream& out);
/// Prints "filkit report: wrote DIR/report.html (N figures)" and one line per skipped figure.
void print_report_result(const ReportResult& result, std::ostream& out);

/// `--report DIR` for a command whose outputs are its --json summary and --out table.
void add_report_flag(CLI::App& command, std::string& dir);
/// Runs `command`; with a report directory, empty --json/--out first default into it
/// (summary.json, per-example.csv) and the report is drawn from those files afterwards, as
/// `filkit report` would draw it.
void run_with_report(const std::string& dir, RunFlags& run, const std::function<void()>& command,
                     std::ostream& out);

}  // namespace filkit::cli
