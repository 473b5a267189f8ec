// `filkit attack`: the attribute-inference job (jobs/attack.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/attack.hpp"

namespace filkit::cli {

void setup_attack(CLI::App& app) { add_job_command<AttackJob>(app); }

}  // namespace filkit::cli
