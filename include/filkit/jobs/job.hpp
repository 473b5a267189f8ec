// The one shape of every job (docs/architecture.md, "Jobs"): an options struct with validate() and
// visit_fields(), a run_<job>(options, progress) that returns a result, and the result's
// outputs, written by write_job_outputs for the command line and the Python bindings alike:
//   --out     the per-example (or per-row) table as CSV,
//   --json    the summary: every resolved setting, the numbers, timings, seed and version,
//   --report  a directory with the report (figures and report.html) built from those two,
// and a job's further tables (e.g. measure's released weights) under their own names.
//
// A job description (e.g. MeasureJob, measure.hpp) is a struct of static members through which the
// command line, Python and run_job find the job; registry.hpp lists every description. It has
//   Options                 the options struct (validate(), visit_fields)
//   name, description       the command's name and its --help text
//   out_help                --out's help; "" when the job writes no table
//   extra_outputs()         its further tables (ExtraOutput)
//   run(options, progress)  the job; or run(options, progress, outputs) where its work depends on
//                           the outputs asked for
// and where it applies: former_name (a former command name, still accepted), defaults_reason and
// default_reasons() (why its defaults differ from other commands'), checkpoint(options) (a resume
// file no output may be), runs_on_mpi_ranks (it runs on several MPI ranks), writes_its_own_report
// (no --report), no_report_section (why `filkit report` draws no section of its own for it).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/types.hpp"

#include <nlohmann/json_fwd.hpp>

#include <concepts>
#include <iosfwd>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {

/// A numeric table (one CSV): integral values are written without a decimal point.
struct NumericTable {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
  std::string to_csv() const;
};

/// A table of trained models: the key columns (e.g. method, run), then the parameters w0 ..
/// w{p-1} in kModelParameterLayout's order. Rows are added with add_model_row.
NumericTable model_table(std::vector<std::string> keys, Index parameter_count);
/// Appends one model: `keys` (as many as the table's key columns), then `parameters`; throws
/// std::invalid_argument when either count differs from the table's.
void add_model_row(NumericTable& table, std::vector<double> keys, const VectorXd& parameters);

/// How a trained model's parameters are laid out in its row, for every job that writes them.
inline constexpr const char* kModelParameterLayout =
    "the parameters act on the preprocessed inputs (the summary's preprocessing); logistic and softmax regression: "
    "the p x K weights column by column (K = 1 for logistic regression; p = d, or d + 1 with the intercept first); "
    "networks: layer by layer, each layer's weight as PyTorch lays it out, then its bias";

/// A further table a job can write, named like its option ("release_out" -> --release-out).
struct ExtraOutput {
  const char* name;
  std::string help;
};

/// Why a job's default for an option differs from other commands' defaults for the same option
/// (a job description's optional default_reasons(); --help shows it beside the default).
struct DefaultReason {
  const char* name;    ///< the field, as visit_fields names it
  const char* reason;  ///< e.g. "the reconstruction paper trains on raw pixels"
};

/// A job's former command name (a job description's optional `former_name`), still accepted by the
/// command line, filkit.run and the report; empty when it has none.
template <class Job>
constexpr const char* former_job_name() {
  if constexpr (requires { Job::former_name; }) return Job::former_name;
  else return "";
}

/// What every job's result provides to the shared writer.
class JobResult {
 public:
  virtual ~JobResult() = default;
  /// The summary (--json): "command", "filkit_version", "seed", "settings" and the job's numbers.
  virtual nlohmann::json to_json() const = 0;
  /// The main table (--out); an empty header when the job has none.
  virtual NumericTable table() const = 0;
  /// The table's file name in a report directory (--report without --out), for what it holds.
  virtual std::string table_file() const { return "per-example.csv"; }
  /// A further table by ExtraOutput name; throws std::invalid_argument for an unknown name.
  virtual NumericTable extra_table(const std::string& name) const;
  /// A few human-readable lines for the terminal.
  virtual void print_summary(std::ostream& out) const = 0;
  /// False when the job stopped early to be resumed (dpsgd's stop_after): no outputs are written.
  virtual bool complete() const { return true; }
  /// Called by write_job_outputs once every output is written, never when one fails: releases
  /// what must outlive a failed write, such as dpsgd's resume file (a rerun resumes from it).
  virtual void outputs_written() const {}
};

/// Whether a job description says the job runs on several MPI ranks (`runs_on_mpi_ranks`): its
/// collective steps take Communicator::world() and rank 0 gathers its tables (docs/distributed.md).
template <class Job>
constexpr bool runs_on_mpi_ranks() {
  return requires { Job::runs_on_mpi_ranks; };
}

/// Where a run's outputs go; empty paths are not written.
struct JobOutputs {
  std::string out;
  std::string json;
  std::string report;
  std::map<std::string, std::string> extra;  ///< ExtraOutput name -> path
  bool empty() const;
};

/// What every job description has (above); the registry takes only such.
template <class Job>
concept JobDescription = requires(const typename Job::Options& options, const JobOutputs& outputs) {
  { Job::name } -> std::convertible_to<const char*>;
  { Job::description } -> std::convertible_to<const char*>;
  { Job::out_help } -> std::convertible_to<const char*>;
  { Job::extra_outputs() } -> std::same_as<std::vector<ExtraOutput>>;
  requires requires {
    { Job::run(options, false) } -> std::derived_from<JobResult>;
  } || requires {
    { Job::run(options, false, outputs) } -> std::derived_from<JobResult>;
  };
};

/// Fails before any work when an output cannot be written (check_output_path: a directory, a
/// missing or unwritable directory; "-" and devices pass), so that a long run never ends at an
/// unwritable path. Throws std::invalid_argument naming the option and path.
/// `kept`: files the job itself writes and keeps apart from its outputs (a resume file, as
/// {"checkpoint", path}): no output may be one of them.
void check_output_paths(const JobOutputs& outputs, const std::vector<std::pair<std::string, std::string>>& kept = {});

/// Writes every requested output of `result` as a set (write_output_files): all contents are
/// formed first, then written to synced temporaries (or through, for "-", devices, FIFOs and
/// links), then renamed into place; when a write fails nothing is replaced. With a report
/// directory, the summary and table also go there (unless --json/--out name files it can read
/// back) and the report is built from them. Then calls result.outputs_written().
/// Returns the paths written (for the terminal).
std::vector<std::string> write_job_outputs(const JobResult& result, const JobOutputs& outputs, bool quiet);

/// Under mpirun, before any work: stops every rank, with one message from rank 0 naming the flag,
/// unless every rank runs `command` with the same `settings` (settings_json of its options) and
/// the files they name are the same on every rank (size and a hash of their first and last 64 KiB).
/// Ranks started differently would otherwise mix their results, or wait for each other forever.
/// Collective; nothing on one process.
void check_ranks_agree(const std::string& command, const nlohmann::json& settings, const Communicator& comm);

/// Under mpirun (comm.distributed()), throws a ResourceError saying that `job` runs on one process
/// and naming the jobs that run on several (registry.hpp); nothing on one process.
void refuse_several_ranks(const char* job, const Communicator& comm);

/// Runs a job end to end as the command line does: validate, check the output paths, run, write
/// the outputs, print the summary unless quiet. Job is a job description (e.g. MeasureJob).
template <class Job>
auto run_job(const typename Job::Options& options, const JobOutputs& outputs = {}, bool quiet = true,
             std::ostream* out = nullptr) {
  // Under mpirun every rank runs the job; rank 0 alone checks, writes and prints the outputs.
  const Communicator& comm = Communicator::world();
  if constexpr (!runs_on_mpi_ranks<Job>()) refuse_several_ranks(Job::name, comm);
  options.validate();
  check_ranks_agree(Job::name, settings_json(options), comm);
  if (comm.is_root()) {
    // An output that is the resume file would be removed with it once the run ends (issue 50).
    std::vector<std::pair<std::string, std::string>> kept;
    if constexpr (requires { Job::checkpoint(options); }) kept.emplace_back("checkpoint", Job::checkpoint(options));
    check_output_paths(outputs, kept);
  }
  // A job whose work depends on the outputs asked for (the accountant's report curves) sees them.
  auto result = [&] {
    if constexpr (requires { Job::run(options, true, outputs); }) return Job::run(options, !quiet, outputs);
    else return Job::run(options, !quiet);
  }();
  if (comm.is_root()) {
    write_job_outputs(result, outputs, quiet);
    if (!quiet && out != nullptr) result.print_summary(*out);
  }
  return result;
}

/// The common part of every summary: command, version, seed and the number of MPI ranks.
nlohmann::json job_summary_header(const std::string& command, std::uint64_t seed);

}  // namespace filkit
