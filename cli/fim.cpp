// `filkit fim`: private training with public data (jobs/fim.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/fim.hpp"

namespace filkit::cli {

void setup_fim(CLI::App& app) { add_job_command<FimJob>(app); }

}  // namespace filkit::cli
