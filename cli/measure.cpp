// `filkit measure`: the measurement job (jobs/measure.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/measure.hpp"

namespace filkit::cli {

void setup_measure(CLI::App& app) { add_job_command<MeasureJob>(app); }

}  // namespace filkit::cli
