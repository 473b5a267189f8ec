// The job behind `filkit report`: figures and report.html from the summaries and tables other jobs
// wrote (report/report.hpp).
#pragma once

#include "filkit/jobs/job.hpp"
#include "filkit/report/report.hpp"

#include <vector>

namespace filkit {

struct ReportJobResult final : JobResult {
  ReportOptions options;
  ReportResult report;
  /// The report written: html, figures, notes.
  nlohmann::json to_json() const override;
  NumericTable table() const override { return {}; }
  void print_summary(std::ostream& out) const override;
};

ReportJobResult run_report(const ReportOptions& options, bool progress = false);

struct ReportJob {
  using Options = ReportOptions;
  static constexpr const char* name = "report";
  static constexpr const char* description =
      "Draw figures (PNG, with gnuplot) and write a self-contained HTML report from the JSON summaries and "
      "per-example CSV tables the other commands write (their --json and --out).";
  static constexpr const char* out_help = "";
  /// The report directory is this job's own option.
  static constexpr bool writes_its_own_report = true;
  static constexpr const char* no_report_section =
      "its summary lists the report it wrote, whose figures are the report";
  static std::vector<ExtraOutput> extra_outputs() { return {}; }
  static ReportJobResult run(const Options& options, bool progress) { return run_report(options, progress); }
};

}  // namespace filkit
