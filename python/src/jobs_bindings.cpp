// filkit.run(job, **options): every registered job (filkit/jobs/registry.hpp), as the CLI's
// subcommands, with the same option names, defaults and JSON summary (python/src/job_bindings.hpp
// binds the keywords onto the library's options).
#include "job_bindings.hpp"

#include "filkit/base/summary.hpp"
#include "filkit/base/summary_schema.hpp"

#include "filkit/base/io.hpp"
#include "filkit/jobs/registry.hpp"

namespace filkit::python {

std::map<std::string, JobRunner>& job_registry() {
  static std::map<std::string, JobRunner> registry;
  return registry;
}

std::map<std::string, KeywordList>& keyword_registry() {
  static std::map<std::string, KeywordList> registry;
  return registry;
}

namespace {
/// Former job names (a job's former_name) and the names they became: accepted, not listed.
std::map<std::string, std::string>& former_job_names() {
  static std::map<std::string, std::string> names;
  return names;
}

}  // namespace

void bind_jobs(py::module_& m) {
  static std::map<std::string, std::function<py::object()>> defaults;
  for_each_job([]<class Job>() {
    register_job<Job>();
    defaults[Job::name] = [] { return job_defaults<Job>(); };
    keyword_registry()[std::string("run:") + Job::name] = [] { return job_keywords<Job>(); };
    if (*former_job_name<Job>()) former_job_names()[former_job_name<Job>()] = Job::name;
  });

  const auto names = [] {
    std::vector<std::string> list;
    for (const auto& entry : job_registry()) list.push_back(entry.first);
    return list;
  };
  // The job's current name, for a current or former one.
  const auto find = [names](const std::string& job) -> std::string {
    if (job_registry().count(job)) return job;
    if (const auto former = former_job_names().find(job); former != former_job_names().end()) return former->second;
    std::string list;
    for (const std::string& name : names()) list += (list.empty() ? "" : ", ") + name;
    throw py::value_error("unknown job '" + job + "': expected one of " + list);
  };
  m.def("jobs", names, "The jobs filkit.run() runs (the CLI's subcommands).");
  static const std::string run_help =
      "Runs a job as `filkit <job>` does, with the same options as keywords (names with underscores, the CLI's "
      "defaults; 'auto' or None for an auto option), plus out/json/report paths, threads (0 = all cores) and quiet "
      "(default False: progress on stderr). filkit.keywords('run:<job>') lists them with their defaults. Returns "
      "{'summary': the JSON summary as a dict, 'table': {'header', 'rows': 2-D float64 array, 'columns': {name: "
      "int64 or float64 array}} or None}; pandas.DataFrame(result['table']['columns']) keeps integer columns "
      "integer. Under mpirun (with mpi4py "
      "imported first; docs/distributed.md) " +
      jobs_on_several_ranks() +
      " run on the ranks: rank 0 gets the results, the other ranks {'summary': None, 'table': None}. A job's former "
      "name (fim for public-training) is accepted.";
  m.def(
      "run", [find](const std::string& job, const py::kwargs& kwargs) { return job_registry().at(find(job))(kwargs); },
      py::arg("job"), run_help.c_str());
  m.def(
      "_keywords",
      [](const std::string& function) {
        const auto found = keyword_registry().find(function);
        if (found == keyword_registry().end()) throw py::value_error("no keyword list for '" + function + "'");
        return found->second();
      },
      py::arg("function"),
      "The keywords of a function that takes its options as keywords ('measure', 'train_dpsgd', 'run:dpsgd', ...), "
      "in order, as (name, default, annotation) triples from the options' one declaration; filkit builds the Python "
      "signatures and scripts/write-stubs.py the type stubs from them.");
  m.def("_keyword_functions", [] {
    std::vector<std::string> names;
    for (const auto& entry : keyword_registry()) names.push_back(entry.first);
    return names;
  });
  m.def(
      "_renamed_options",
      [] {
        py::dict renamed;
        for (const RenamedOption& option : kRenamedOptions)
          renamed[py::str(std::string(option.former))] = std::string(option.name);
        return renamed;
      },
      "Former option names and the names they became (still accepted).");
  // The jobs' output writer, for outputs formed in Python (filkit.torch's write_summary): the
  // same checks before any work and the same set of synced temporaries renamed into place.
  m.def(
      "_check_output_paths",
      [](const std::vector<std::pair<std::string, std::string>>& outputs) {
        for (const auto& [name, path] : outputs) check_output_path(name, path);
        check_distinct_outputs(outputs);
      },
      py::arg("outputs"),
      "Refuses (filkit.OptionError, a ValueError) outputs (name, path) that cannot be written, as a job does "
      "before its work: a directory, a missing or unwritable directory, two names of one file.");
  m.def(
      "_write_output_files",
      [](const std::vector<std::pair<std::string, py::bytes>>& files) {
        std::vector<OutputFile> outputs;
        for (const auto& [path, content] : files) outputs.push_back({path, std::string(content)});
        py::gil_scoped_release release;
        try {
          write_output_files(outputs);
        } catch (const Error&) {
          throw;
        } catch (const std::runtime_error& error) {
          throw ResourceError(error.what());  // filkit.ResourceError, an OSError
        }
      },
      py::arg("files"),
      "Writes (path, bytes) pairs as a set, as every job writes its outputs: each regular file through a synced "
      "temporary beside it, renamed into place only when all are written (a failed write replaces nothing).");
  // The summary schemas (base/summary_schema.hpp), for filkit.torch's writer and the tests.
  m.def(
      "_summary_schema", [](const std::string& command) { return summary_schema(command).dump(); }, py::arg("command"),
      "The JSON Schema of a command's summary (schemas/summary/<command>.schema.json), as JSON text.");
  m.def(
      "_check_written_summary",
      [](const std::string& summary) { check_written_summary(nlohmann::json::parse(summary)); }, py::arg("summary"),
      "The writers' check of a summary (JSON text) against its command's schema: a warning on stderr for each "
      "departure, or an error when FILKIT_STRICT_SUMMARY_SCHEMA is set (the test suite).");
  m.def(
      "_summarize", [](const VectorXd& values) { return json_to_python(summarize(values).to_json().dump()); },
      py::arg("values"),
      "filkit's summary statistics of per-example values: count, mean, sample std, min, median, max.");
  m.def(
      "defaults", [find](const std::string& job) { return defaults.at(find(job))(); }, py::arg("job"),
      "Every option of a job with its default (autos as 'auto').");
}

}  // namespace filkit::python
