// `filkit dpsgd`: the DP-SGD job (jobs/dpsgd.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/dpsgd.hpp"

namespace filkit::cli {

void setup_dpsgd(CLI::App& app) { add_job_command<DpSgdJob>(app); }

}  // namespace filkit::cli
