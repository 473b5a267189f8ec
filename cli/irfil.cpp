// `filkit irfil`: the IRFIL job (jobs/irfil.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/irfil.hpp"

namespace filkit::cli {

void setup_irfil(CLI::App& app) { add_job_command<IrfilJob>(app); }

}  // namespace filkit::cli
