// The jobs filkit has, listed once. Everything that needs every job reads this list:
//   the command line   one subcommand a job, in this order (--help's), cli/commands.cpp;
//   Python             filkit.run(name), filkit.defaults(name), filkit.jobs(), python/src/jobs_bindings.cpp;
//   MPI                run_job's refusal names the jobs whose description has runs_on_mpi_ranks
//                      (src/jobs/job_ranks.cpp);
//   the tests          tests/cli/job_registry_test.cpp: every job has its subcommand, its report
//                      section (or says why it has none: no_report_section), its commands in the
//                      docs, and docs/distributed.md names the jobs that run on several ranks.
// Adding a job is its header (options, result, job description; job.hpp says what a description
// holds), its source, and its entry here: the #include and the line in RegisteredJobs.
// (google/benchmark and CLI11 register at static initialisation, in any order; a type list keeps
// --help's order and needs no registration code that a static library's linker could drop.)
#pragma once

#include "filkit/jobs/accountant.hpp"
#include "filkit/jobs/attack.hpp"
#include "filkit/jobs/bound.hpp"
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/jobs/irfil.hpp"
#include "filkit/jobs/learned_attack.hpp"
#include "filkit/jobs/measure.hpp"
#include "filkit/jobs/public_training.hpp"
#include "filkit/jobs/reconstruct.hpp"
#include "filkit/jobs/report.hpp"

#include <string>

namespace filkit {

/// A list of job descriptions (job.hpp), walked by for_each_job.
template <JobDescription... Jobs>
struct JobList {};

/// Every job, in the order --help lists them.
using RegisteredJobs = JobList<MeasureJob, AccountantJob, ReportJob, DpSgdJob, PublicTrainingJob, BoundJob,
                               ReconstructJob, IrfilJob, AttackJob, LearnedAttackJob>;

/// Calls `visit.template operator()<Job>()` for every registered job, in order; e.g.
/// `for_each_job([&]<class Job>() { names.push_back(Job::name); });`.
template <class Visit>
void for_each_job(Visit&& visit) {
  [&]<class... Jobs>(JobList<Jobs...>) { (visit.template operator()<Jobs>(), ...); }(RegisteredJobs{});
}

/// The jobs that run on several MPI ranks (runs_on_mpi_ranks), in order, as text: "measure, dpsgd,
/// ... and attack" (run_job's refusal of the others, filkit.run's help).
std::string jobs_on_several_ranks();

}  // namespace filkit
