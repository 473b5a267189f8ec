// `filkit learned-attack`: the learned reconstruction attack job (jobs/learned_attack.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/learned_attack.hpp"

namespace filkit::cli {

void setup_learned_attack(CLI::App& app) { add_job_command<LearnedAttackJob>(app); }

}  // namespace filkit::cli
