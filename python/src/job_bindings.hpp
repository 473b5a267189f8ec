// Python keyword arguments bound onto the library's job options (the same visit_fields declaration
// the command line uses): every option keeps its library name and default, "auto" or None selects
// an auto option, an unknown keyword is a TypeError listing the accepted ones, a value of the wrong
// type a TypeError naming its keyword. Besides the options every job accepts out, json, report
// (paths, as the CLI's --out/--json/--report), the job's further outputs by name, threads and
// quiet (default False: progress on stderr, as the command line).
#pragma once

#include "bindings.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/jobs/job.hpp"
#include "filkit/models/glm.hpp"

#include <nlohmann/json.hpp>
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace filkit::python {

namespace py = pybind11;

/// Assigns one keyword argument to one option field.
struct KwargsBinder {
  const py::kwargs& kwargs;
  std::set<std::string>& accepted;

  template <typename T>
  void operator()(const char* name, T& field, const char*) const {
    accepted.insert(name);
    // A renamed option also answers to its former name (kRenamedOptions), as on the command line.
    const std::string former(former_option_name(name));
    if (!former.empty()) accepted.insert(former);
    const bool by_name = kwargs.contains(name), by_former = !former.empty() && kwargs.contains(former.c_str());
    if (by_name && by_former)
      throw py::type_error(std::string(name) + " and " + former + " are the same option (" + former +
                           " its former name): give one");
    if (by_name) assign(name, py::reinterpret_borrow<py::object>(kwargs[name]), field);
    else if (by_former) assign(former.c_str(), py::reinterpret_borrow<py::object>(kwargs[former.c_str()]), field);
  }

  template <typename T>
  static void assign(const char* name, const py::object& value, T& field) {
    if (py::isinstance<py::str>(value)) return option_from_text(name, value.cast<std::string>(), field);
    if constexpr (is_optional<T>::value) {
      if (value.is_none()) return field.reset();
      typename T::value_type inner{};
      assign(name, value, inner);
      field = std::move(inner);
    } else if constexpr (is_vector<T>::value) {
      // Element by element, so that each is checked as a single value is (integers in range).
      if (!py::isinstance<py::sequence>(value))
        throw py::type_error(std::string(name) + ": expected a list, or a comma-separated string");
      T elements;
      for (const py::handle item : value) {
        typename T::value_type element{};
        assign(name, py::reinterpret_borrow<py::object>(item), element);
        elements.push_back(std::move(element));
      }
      field = std::move(elements);
    } else if constexpr ((std::is_integral_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, ByteSize>) {
      // Python integers have no bounds: their digits are read as the command line reads a flag's,
      // so that one out of the field's range is refused with the range, never wrapped.
      option_from_text(name, py::str(integer(name, value)).cast<std::string>(), field);
    } else if constexpr (std::is_enum_v<T>) {
      throw py::type_error(std::string(name) + ": expected a string, one of " + enum_spellings<T>());
    } else {
      if (value.is_none()) throw py::type_error(std::string(name) + ": None is only accepted for an auto option");
      try {
        if constexpr (std::is_same_v<T, bool>) {
          if (!py::isinstance<py::bool_>(value)) throw py::cast_error("");
        }
        field = value.cast<T>();
      } catch (const py::cast_error&) {
        throw py::type_error(std::string(name) + ": cannot use a " +
                             py::str(value.get_type().attr("__name__")).cast<std::string>() + " here");
      }
    }
  }

  /// `value` as a Python int (numpy integers too); TypeError for anything else, bool included.
  static py::int_ integer(const char* name, const py::object& value) {
    if (!py::isinstance<py::bool_>(value)) {
      if (py::isinstance<py::int_>(value)) return py::reinterpret_borrow<py::int_>(value);
      if (PyObject* index = PyNumber_Index(value.ptr())) return py::reinterpret_steal<py::int_>(index);
      PyErr_Clear();
    }
    throw py::type_error(std::string(name) + ": expected an integer, not a " +
                         py::str(value.get_type().attr("__name__")).cast<std::string>());
  }
};

/// make(), with the options a filkit::OptionError names respelled by `keywords` (declared name ->
/// keyword), for a function whose keywords are not the jobs' option names.
template <class Make>
auto with_keywords(const std::map<std::string, std::string>& keywords, Make&& make) {
  try {
    return make();
  } catch (const OptionError& error) {
    const OptionSpelling spell = [&](std::string_view name) {
      const auto found = keywords.find(std::string(name));
      return found == keywords.end() ? std::string(name) : found->second;
    };
    throw OptionError::with_text(spell(error.option()), error.message(spell));
  }
}

/// OpenMP threads for the length of one call (0 = all cores): the previous count comes back after
/// it, so that one call's `threads` does not change the next's.
class ThreadsForCall {
 public:
  explicit ThreadsForCall(long long threads) : previous_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  }
  ~ThreadsForCall() { omp_set_num_threads(previous_); }
  ThreadsForCall(const ThreadsForCall&) = delete;
  ThreadsForCall& operator=(const ThreadsForCall&) = delete;

 private:
  int previous_;
};

/// The run-time keywords every job takes, as the command line's --threads and --quiet.
struct RunKeywords {
  long long threads = 0;  ///< OpenMP threads; 0 = all cores
  bool quiet = false;     ///< no progress on stderr
};

/// The run-time keywords in the order Python's signatures list them.
template <class Visit>
void visit_fields(RunKeywords& o, Visit&& visit) {
  visit("threads", o.threads, "OpenMP threads for this call; 0 = all cores");
  visit("quiet", o.quiet, "No progress on stderr");
}

/// threads and quiet from the keywords (TypeError or ValueError naming them when they do not fit).
inline RunKeywords take_run_keywords(const py::kwargs& kwargs, std::set<std::string>& accepted) {
  RunKeywords run;
  visit_fields(run, KwargsBinder{kwargs, accepted});
  check_thread_count("threads", run.threads);
  return run;
}

/// A path keyword: a str or an os.PathLike; None leaves it unset.
inline void take_path(const py::kwargs& kwargs, const char* key, std::string& target) {
  if (!kwargs.contains(key) || kwargs[key].is_none()) return;
  const py::object value = kwargs[key];
  if (!py::isinstance<py::str>(value) && !py::hasattr(value, "__fspath__"))
    throw py::type_error(std::string(key) + ": expected a path (str or os.PathLike), not a " +
                         py::str(value.get_type().attr("__name__")).cast<std::string>());
  target = py::module_::import("os").attr("fspath")(value).cast<std::string>();
}

/// The output keywords of a job (out, json, report and its further outputs), for its signature.
inline std::vector<std::string> output_keywords(const std::vector<ExtraOutput>& extras, bool report_output = true) {
  std::vector<std::string> names{"out", "json"};
  if (report_output) names.push_back("report");
  for (const ExtraOutput& extra : extras) names.push_back(extra.name);
  return names;
}

/// The outputs and run-time settings a job call may name besides its options.
inline JobOutputs take_outputs(const py::kwargs& kwargs, const std::vector<ExtraOutput>& extras,
                               std::set<std::string>& accepted, RunKeywords& run, bool report_output = true) {
  JobOutputs outputs;
  for (const std::string& name : output_keywords(extras, report_output)) accepted.insert(name);
  take_path(kwargs, "out", outputs.out);
  take_path(kwargs, "json", outputs.json);
  if (report_output) take_path(kwargs, "report", outputs.report);  // the report job's own option otherwise
  for (const ExtraOutput& extra : extras) take_path(kwargs, extra.name, outputs.extra[extra.name]);
  run = take_run_keywords(kwargs, accepted);
  return outputs;
}

/// Throws TypeError naming the first keyword not in `accepted`, with the nearest accepted ones
/// and the list of them all.
inline void reject_unknown_keywords(const std::string& function, const py::kwargs& kwargs,
                                    const std::set<std::string>& accepted) {
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first);
    if (accepted.count(key)) continue;
    std::string list, near;
    for (const std::string& name : accepted) list += (list.empty() ? "" : ", ") + name;
    for (const std::string& name : nearest_names(key, {accepted.begin(), accepted.end()}))
      near += (near.empty() ? "; did you mean " : " or ") + name;
    throw py::type_error(function + "(): unknown option '" + key + "'" + (near.empty() ? "" : near + "?") +
                         "; accepted: " + list);
  }
}

/// The keywords of the functions that fit a model directly: model, regression and max_iterations
/// besides the fields every job shares (l2, intercept, tolerance, solver).
template <class Visit>
void visit_fit_keywords(FitOptions& fit, Visit&& visit) {
  visit("model", fit.kind, "least-squares, logistic or softmax");
  visit("regression", fit.regression, "The target is real-valued (least squares only)");
  visit("max_iterations", fit.max_iterations, "Newton or L-BFGS iterations at most");
  visit_fields(fit, visit);
}

/// FitOptions from keywords (visit_fit_keywords).
inline FitOptions fit_options_from(const py::kwargs& kwargs, std::set<std::string>& accepted) {
  FitOptions fit;
  visit_fit_keywords(fit, KwargsBinder{kwargs, accepted});
  return fit;
}

/// Options of Job from keyword arguments; throws TypeError for unknown keywords.
template <class Job>
typename Job::Options job_options(const py::kwargs& kwargs, JobOutputs& outputs, RunKeywords& run) {
  typename Job::Options options;
  std::set<std::string> accepted;
  visit_fields(options, KwargsBinder{kwargs, accepted});
  constexpr bool report_output = !requires { Job::writes_its_own_report; };
  outputs = take_outputs(kwargs, Job::extra_outputs(), accepted, run, report_output);
  reject_unknown_keywords(Job::name, kwargs, accepted);
  return options;
}

/// A numeric table as {"header": [...], "rows": 2-D float64 array, "columns": {name: 1-D array}},
/// the columns int64 where every value is a whole number (indices, labels, counts, steps) and
/// float64 otherwise, ready for pandas.DataFrame(table["columns"]).
inline py::dict table_to_python(const NumericTable& table) {
  py::array_t<double> rows({table.rows.size(), table.header.size()});
  auto view = rows.mutable_unchecked<2>();
  for (std::size_t i = 0; i < table.rows.size(); ++i)
    for (std::size_t j = 0; j < table.header.size(); ++j) view(i, j) = table.rows[i][j];
  py::dict columns;
  for (std::size_t j = 0; j < table.header.size(); ++j) {
    bool whole = !table.rows.empty();
    for (const auto& row : table.rows)
      whole = whole && std::isfinite(row[j]) && row[j] == std::floor(row[j]) && std::abs(row[j]) < 9.0e15;
    if (whole) {
      py::array_t<std::int64_t> column(static_cast<py::ssize_t>(table.rows.size()));
      auto out = column.mutable_unchecked<1>();
      for (std::size_t i = 0; i < table.rows.size(); ++i)
        out(static_cast<py::ssize_t>(i)) = static_cast<std::int64_t>(table.rows[i][j]);
      columns[table.header[j].c_str()] = column;
    } else {
      py::array_t<double> column(static_cast<py::ssize_t>(table.rows.size()));
      auto out = column.mutable_unchecked<1>();
      for (std::size_t i = 0; i < table.rows.size(); ++i) out(static_cast<py::ssize_t>(i)) = table.rows[i][j];
      columns[table.header[j].c_str()] = column;
    }
  }
  py::dict out;
  out["header"] = table.header;
  out["rows"] = rows;
  out["columns"] = columns;
  return out;
}

/// Runs Job from keyword arguments (GIL released while it runs, on `threads` threads) and returns
/// the library result; progress on stderr unless quiet.
template <class Job>
auto run_job_from_kwargs(const py::kwargs& kwargs) {
  JobOutputs outputs;
  RunKeywords run;
  const auto options = job_options<Job>(kwargs, outputs, run);
  py::gil_scoped_release release;
  const ThreadsForCall threads(run.threads);
  return run_job<Job>(options, outputs, run.quiet, nullptr);
}

/// The registry behind filkit.run(name, **kwargs): job name -> runner returning
/// {"summary": dict, "table": {...}}.
using JobRunner = std::function<py::dict(const py::kwargs&)>;
std::map<std::string, JobRunner>& job_registry();

template <class Job>
void register_job() {
  job_registry()[Job::name] = [](const py::kwargs& kwargs) {
    const auto result = run_job_from_kwargs<Job>(kwargs);
    py::dict out;
    // Under mpirun (docs/distributed.md) rank 0 gathers the results; the other ranks hold only
    // their part, and get None.
    if (!Communicator::world().is_root()) {
      out["summary"] = py::none();
      out["table"] = py::none();
      return out;
    }
    out["summary"] = json_to_python(result.to_json().dump());
    const NumericTable table = result.table();
    out["table"] = table.header.empty() ? py::object(py::none()) : py::object(table_to_python(table));
    return out;
  };
}

/// Defaults of every option of Job, as recorded in the JSON settings (autos as "auto").
template <class Job>
py::object job_defaults() {
  return json_to_python(settings_json(typename Job::Options{}).dump());
}

/// Literal["a", "b"<more>]: the spellings of an enum.
template <typename Enum>
std::string enum_literal(const std::string& more) {
  std::string spellings;
  for (const auto& entry : EnumNames<Enum>::names)
    spellings += (spellings.empty() ? "\"" : ", \"") + std::string(entry.second) + "\"";
  return "Literal[" + spellings + more + "]";
}

/// The Python annotation of an option of C++ type T: what a keyword takes besides the command
/// line's text form, which every keyword also reads (KwargsBinder).
template <typename T>
std::string python_annotation() {
  if constexpr (is_optional<T>::value) {
    using Inner = typename T::value_type;
    if constexpr (std::is_enum_v<Inner>) return enum_literal<Inner>(", \"auto\"") + " | None";
    else return python_annotation<Inner>() + " | Literal[\"auto\"] | None";
  } else if constexpr (is_vector<T>::value) {
    return "Sequence[" + python_annotation<typename T::value_type>() + "]";
  } else if constexpr (std::is_enum_v<T>) {
    return enum_literal<T>("");
  } else if constexpr (std::is_same_v<T, ByteSize>) {
    return "int | str";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_integral_v<T>) {
    return "int";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "float";
  } else {
    static_assert(std::is_same_v<T, std::string>, "an option type without a Python annotation");
    return "str";
  }
}

/// The annotation of a path keyword (out, json, report, a job's further outputs).
inline constexpr const char* kPathAnnotation = "str | os.PathLike[str] | None";

/// The keywords `visit_fields` declares for `options`, in its order, each as (name, default as
/// Python has it (option_to_json's value: autos "auto"), annotation): a Python signature's keyword
/// part, derived from the one declaration (filkit/__init__.py builds the signatures from these,
/// scripts/write-stubs.py the type stubs).
template <class Options, class Declare>
void add_keywords(py::list& keywords, Options options, Declare&& declare) {
  declare(options, [&](const char* name, const auto& field, const char*) {
    keywords.append(py::make_tuple(name, json_to_python(nlohmann::json(option_to_json(field)).dump()),
                                   python_annotation<std::decay_t<decltype(field)>>()));
  });
}
template <class Options>
void add_keywords(py::list& keywords, Options options) {
  add_keywords(keywords, std::move(options), [](Options& o, auto&& visit) { visit_fields(o, visit); });
}

/// A job's keywords: its options, then its outputs (None) and the run-time keywords.
template <class Job>
py::list job_keywords() {
  py::list keywords;
  add_keywords(keywords, typename Job::Options{});
  for (const std::string& name : output_keywords(
           Job::extra_outputs(), !requires { Job::writes_its_own_report; }))
    keywords.append(py::make_tuple(name, py::none(), kPathAnnotation));
  add_keywords(keywords, RunKeywords{});
  return keywords;
}

/// The registry behind filkit._keywords(function): the keywords of each function that takes its
/// options as keywords, for the Python signatures.
using KeywordList = std::function<py::list()>;
std::map<std::string, KeywordList>& keyword_registry();

}  // namespace filkit::python
