// `filkit accountant`: the RDP accountant job (jobs/accountant.hpp) as a subcommand.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/accountant.hpp"

namespace filkit::cli {

void setup_accountant(CLI::App& app) { add_job_command<AccountantJob>(app); }

}  // namespace filkit::cli
