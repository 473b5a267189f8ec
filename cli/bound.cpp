// `filkit bound` and `filkit reconstruct`: the reconstruction jobs (jobs/bound.hpp,
// jobs/reconstruct.hpp) as subcommands.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/reconstruct.hpp"

namespace filkit::cli {

void setup_bound(CLI::App& app) { add_job_command<BoundJob>(app); }
void setup_reconstruct(CLI::App& app) { add_job_command<ReconstructJob>(app); }

}  // namespace filkit::cli
