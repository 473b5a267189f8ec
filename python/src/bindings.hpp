// The pybind11 bindings of filkit, one file per library concept; module.cpp calls each bind_*.
// The library's typed errors (base/errors.hpp) become filkit.OptionError and DataError (ValueError),
// ResourceError (OSError), MemoryLimitError (MemoryError) and NumericalError (ArithmeticError),
// all filkit.Error (module.cpp); other exceptions map as pybind11 does by default:
// std::invalid_argument -> ValueError, std::runtime_error -> RuntimeError.
#pragma once

#include <pybind11/pybind11.h>

namespace filkit::python {

void bind_data(pybind11::module_& m);
void bind_models(pybind11::module_& m);
void bind_fil(pybind11::module_& m);
void bind_measure(pybind11::module_& m);
void bind_jobs(pybind11::module_& m);  // filkit.run(job, **options), filkit.defaults(job)
void bind_accounting(pybind11::module_& m);
void bind_dpsgd(pybind11::module_& m);
void bind_leakage(pybind11::module_& m);  // IRFIL, attacks, reconstruction bounds and attack

/// nlohmann::json -> a Python object (through the json module: summaries are small).
pybind11::object json_to_python(const std::string& dumped);

}  // namespace filkit::python
