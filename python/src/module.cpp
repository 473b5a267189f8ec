#include "bindings.hpp"

#include "filkit/base/types.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_filkit, m) {
  m.doc() = "filkit: Fisher information loss of trained models (C++ core)";
  m.attr("__version__") = filkit::version();
  filkit::python::bind_data(m);
  filkit::python::bind_models(m);
  filkit::python::bind_fil(m);
  filkit::python::bind_measure(m);
  filkit::python::bind_jobs(m);
  filkit::python::bind_accounting(m);
  filkit::python::bind_dpsgd(m);
  filkit::python::bind_leakage(m);
}

namespace filkit::python {

py::object json_to_python(const std::string& dumped) {
  return py::module_::import("json").attr("loads")(dumped);
}

}  // namespace filkit::python
