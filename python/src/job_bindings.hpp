// Python keyword arguments bound onto the library's job options (the same visit_fields declaration
// the command line uses): every option keeps its library name and default, "auto" or None selects
// an auto option, an unknown keyword is a TypeError listing the accepted ones. Besides the options
// every job accepts out, json, report (paths, as the CLI's --out/--json/--report), the job's
// further outputs by name, threads and quiet.
#pragma once

#include "bindings.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/jobs/job.hpp"
#include "filkit/models/glm.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <omp.h>

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
    if (!kwargs.contains(name)) return;
    assign(name, py::reinterpret_borrow<py::object>(kwargs[name]), field);
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

/// The outputs and run-time settings a job call may name besides its options.
inline JobOutputs take_outputs(const py::kwargs& kwargs, const std::vector<ExtraOutput>& extras,
                               std::set<std::string>& accepted, bool& quiet, bool report_output = true) {
  JobOutputs outputs;
  const auto text = [&](const char* key, std::string& target) {
    accepted.insert(key);
    if (kwargs.contains(key) && !kwargs[key].is_none()) target = py::str(kwargs[key]).cast<std::string>();
  };
  text("out", outputs.out);
  text("json", outputs.json);
  if (report_output) text("report", outputs.report);  // the report job's own option otherwise
  for (const ExtraOutput& extra : extras) text(extra.name, outputs.extra[extra.name]);
  accepted.insert("quiet");
  quiet = kwargs.contains("quiet") ? kwargs["quiet"].cast<bool>() : true;
  accepted.insert("threads");
  if (kwargs.contains("threads")) {
    long long threads = 0;
    KwargsBinder::assign("threads", py::reinterpret_borrow<py::object>(kwargs["threads"]), threads);
    check_thread_count("threads", threads);
    if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
  }
  return outputs;
}

/// Throws TypeError naming the first keyword not in `accepted`, listing the accepted ones.
inline void reject_unknown_keywords(const std::string& function, const py::kwargs& kwargs,
                                    const std::set<std::string>& accepted) {
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first);
    if (accepted.count(key)) continue;
    std::string list;
    for (const std::string& name : accepted) list += (list.empty() ? "" : ", ") + name;
    throw py::type_error(function + "(): unknown option '" + key + "'; accepted: " + list);
  }
}

/// FitOptions from keywords for the functions that fit a model directly: model, regression and
/// max_iterations besides the fields every job shares (l2, intercept, tolerance, solver).
inline FitOptions fit_options_from(const py::kwargs& kwargs, std::set<std::string>& accepted) {
  FitOptions fit;
  const KwargsBinder bind{kwargs, accepted};
  bind("model", fit.kind, "");
  bind("regression", fit.regression, "");
  bind("max_iterations", fit.max_iterations, "");
  visit_fields(fit, bind);
  return fit;
}

/// Options of Job from keyword arguments; throws TypeError for unknown keywords.
template <class Job>
typename Job::Options job_options(const py::kwargs& kwargs, JobOutputs& outputs, bool& quiet) {
  typename Job::Options options;
  std::set<std::string> accepted;
  visit_fields(options, KwargsBinder{kwargs, accepted});
  constexpr bool report_output = !requires { Job::writes_its_own_report; };
  outputs = take_outputs(kwargs, Job::extra_outputs(), accepted, quiet, report_output);
  reject_unknown_keywords(Job::name, kwargs, accepted);
  return options;
}

/// A numeric table as {"header": [...], "rows": 2-D float64 array}.
inline py::dict table_to_python(const NumericTable& table) {
  py::array_t<double> rows({table.rows.size(), table.header.size()});
  auto view = rows.mutable_unchecked<2>();
  for (std::size_t i = 0; i < table.rows.size(); ++i)
    for (std::size_t j = 0; j < table.header.size(); ++j) view(i, j) = table.rows[i][j];
  py::dict out;
  out["header"] = table.header;
  out["rows"] = rows;
  return out;
}

/// Runs Job from keyword arguments (GIL released while it runs) and returns the library result.
template <class Job>
auto run_job_from_kwargs(const py::kwargs& kwargs) {
  JobOutputs outputs;
  bool quiet = true;
  const auto options = job_options<Job>(kwargs, outputs, quiet);
  py::gil_scoped_release release;
  return run_job<Job>(options, outputs, quiet, nullptr);
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

}  // namespace filkit::python
