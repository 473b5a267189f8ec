#include "filkit/jobs/report.hpp"

#include "filkit/base/options.hpp"

#include <ostream>

namespace filkit {

ReportJobResult run_report(const ReportOptions& options, bool) {
  options.validate();
  ReportJobResult result;
  result.options = options;
  result.report = write_report(options);
  return result;
}

nlohmann::json ReportJobResult::to_json() const {
  nlohmann::json json = job_summary_header("report", 0);
  json.erase("seed");
  json["settings"] = settings_json(options);
  json["html"] = report.html;
  json["figures"] = report.figures;
  json["notes"] = report.notes;
  return json;
}

void ReportJobResult::print_summary(std::ostream& out) const {
  out << "filkit report: wrote " << report.html << " (" << report.figures.size() << " figures)\n";
  for (const std::string& note : report.notes) out << "  note: " << note << "\n";
}

}  // namespace filkit
