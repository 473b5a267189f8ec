#include "bindings.hpp"

#include "filkit/base/stage.hpp"
#include "filkit/base/types.hpp"

#include <new>

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
  // A MemoryError that says what filkit was doing, as the command line does.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError,
                      (filkit::out_of_memory_message() +
                       "; try a smaller subset (train_size, classes) or a lower max_memory, which makes filkit "
                       "refuse inputs larger than that before loading them")
                          .c_str());
    }
  });
}

namespace filkit::python {

py::object json_to_python(const std::string& dumped) {
  return py::module_::import("json").attr("loads")(dumped);
}

}  // namespace filkit::python
