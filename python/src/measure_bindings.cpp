#include "bindings.hpp"
#include "job_bindings.hpp"

#include "filkit/jobs/measure.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>


namespace py = pybind11;

namespace filkit::python {


void bind_measure(py::module_& m) {
  py::class_<GroupFil>(m, "GroupFil").def_readonly("name", &GroupFil::name).def_readonly("fil", &GroupFil::fil);

  py::class_<MeasureResult>(m, "MeasureResult", "Everything the measurement job computed.")
      .def_readonly("data", &MeasureResult::data)
      .def_readonly("model", &MeasureResult::model)
      .def_readonly("release", &MeasureResult::release)
      .def_readonly("sigma", &MeasureResult::sigma)
      .def_readonly("fil", &MeasureResult::fil)
      .def_property_readonly("loss", [](const MeasureResult& r) { return r.loss.loss; })
      .def_property_readonly("gradient_norm", [](const MeasureResult& r) { return r.loss.gradient_norm; })
      .def_readonly("attribute_columns", &MeasureResult::attribute_columns)
      .def_readonly("attribute_eta", &MeasureResult::attribute_eta)
      .def_readonly("attribute_fil", &MeasureResult::attribute_fil)
      .def_readonly("groups", &MeasureResult::groups)
      .def_readonly("train_accuracy", &MeasureResult::train_accuracy)
      .def_readonly("test_accuracy", &MeasureResult::test_accuracy)
      .def_readonly("train_mse", &MeasureResult::train_mse)
      .def_readonly("test_mse", &MeasureResult::test_mse)
      .def_readonly("seconds", &MeasureResult::seconds);

  m.def(
      "measure",
      [](const py::kwargs& kwargs) {
        MeasureResult result = run_job_from_kwargs<MeasureJob>(kwargs);
        py::object summary = json_to_python(result.to_json().dump());
        return py::make_tuple(std::move(result), summary);
      },
      "The measurement job (load -> preprocess -> fit -> FIL), the same computation and options as `filkit "
      "measure` (filkit.defaults('measure') lists them). Returns (result, summary dict).");
}

}  // namespace filkit::python
