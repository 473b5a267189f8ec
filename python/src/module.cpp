#include "bindings.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/types.hpp"

#include <new>

namespace py = pybind11;

namespace {

// filkit's error kinds (base/errors.hpp) as Python exceptions: filkit.Error and its subclasses,
// each also the built-in exception Python code expects for it.
struct PythonErrors {
  PyObject* error = nullptr;         // filkit.Error(Exception)
  PyObject* option = nullptr;        // filkit.OptionError(Error, ValueError); .option: the keyword
  PyObject* data = nullptr;          // filkit.DataError(Error, ValueError)
  PyObject* resource = nullptr;      // filkit.ResourceError(Error, OSError)
  PyObject* memory_limit = nullptr;  // filkit.MemoryLimitError(ResourceError, MemoryError)
  PyObject* numerical = nullptr;     // filkit.NumericalError(Error, ArithmeticError)
};
PythonErrors g_errors;

PyObject* add_exception(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  py::tuple base_tuple(bases.size());
  std::size_t i = 0;
  for (PyObject* base : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(base);
  PyObject* type = PyErr_NewExceptionWithDoc((std::string("filkit.") + name).c_str(), doc, base_tuple.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;  // a reference kept for the module's lifetime
}

void raise(PyObject* type, const std::string& message, const char* option = nullptr) {
  py::object error = py::reinterpret_borrow<py::object>(type)(message);
  if (option != nullptr) error.attr("option") = option;
  PyErr_SetObject(type, error.ptr());
}

}  // namespace

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
  g_errors.error = add_exception(m, "Error", {PyExc_Exception}, "Base of filkit's errors.");
  g_errors.option = add_exception(m, "OptionError", {g_errors.error, PyExc_ValueError},
                                  "An option's value breaks its rule; .option is the keyword.");
  g_errors.data =
      add_exception(m, "DataError", {g_errors.error, PyExc_ValueError}, "An input file or array is malformed.");
  g_errors.resource = add_exception(m, "ResourceError", {g_errors.error, PyExc_OSError},
                                    "The machine cannot do what was asked: files, devices, processes, memory.");
  g_errors.memory_limit = add_exception(m, "MemoryLimitError", {g_errors.resource, PyExc_MemoryError},
                                        "A size beyond the memory budget (max_memory), or an allocation that failed.");
  g_errors.numerical = add_exception(m, "NumericalError", {g_errors.error, PyExc_ArithmeticError},
                                     "A computation failed: a result that must be finite is not.");
  // The library's typed errors as those classes (options named as keywords: their declared
  // names); a MemoryError that says what filkit was doing, as the command line does.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const filkit::OptionError& e) {
      raise(g_errors.option, e.what(), e.option().c_str());
    } catch (const filkit::DataError& e) {
      raise(g_errors.data, e.what());
    } catch (const filkit::MemoryLimitError& e) {
      raise(g_errors.memory_limit, e.what());
    } catch (const filkit::ResourceError& e) {
      raise(g_errors.resource, e.what());
    } catch (const filkit::NumericalError& e) {
      raise(g_errors.numerical, e.what());
    } catch (const std::bad_alloc&) {
      raise(g_errors.memory_limit,
            filkit::out_of_memory_message() +
                "; try a smaller subset (train_size, classes) or a lower max_memory, which makes filkit "
                "refuse inputs larger than that before loading them");
    }
  });
}

namespace filkit::python {

py::object json_to_python(const std::string& dumped) { return py::module_::import("json").attr("loads")(dumped); }

}  // namespace filkit::python
