// `filkit public-training`: private training with public data (jobs/public_training.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/public_training.hpp"

namespace filkit::cli {

void setup_public_training(CLI::App& app) { add_job_command<PublicTrainingJob>(app); }

}  // namespace filkit::cli
