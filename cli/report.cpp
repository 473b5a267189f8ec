// `filkit report`: the report job (jobs/report.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/report.hpp"

namespace filkit::cli {

void setup_report(CLI::App& app) { add_job_command<ReportJob>(app); }

}  // namespace filkit::cli
