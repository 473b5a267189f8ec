#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/jobs/measure.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

void bind_measure(py::module_& m) {
  py::class_<GroupFil> group(m, "GroupFil");
  ReadonlyClass(group).field("name", &GroupFil::name).field("fil", &GroupFil::fil).done();

  py::class_<MeasureResult> result(m, "MeasureResult", "Everything the measurement job computed.");
  ReadonlyClass(result)
      .field("data", &MeasureResult::data)
      .field("model", &MeasureResult::model)
      .field("release", &MeasureResult::release)
      .field("sigma", &MeasureResult::sigma)
      .field("fil", &MeasureResult::fil)
      .property(
          "loss", [](const MeasureResult& r) { return r.loss.loss; },
          [](MeasureResult& r, const py::handle& value) { r.loss.loss = value.cast<VectorXd>(); })
      .property(
          "gradient_norm", [](const MeasureResult& r) { return r.loss.gradient_norm; },
          [](MeasureResult& r, const py::handle& value) { r.loss.gradient_norm = value.cast<VectorXd>(); })
      .field("attribute_columns", &MeasureResult::attribute_columns)
      .field("attribute_eta", &MeasureResult::attribute_eta)
      .field("attribute_fil", &MeasureResult::attribute_fil)
      .field("groups", &MeasureResult::groups)
      .field("train_accuracy", &MeasureResult::train_accuracy)
      .field("test_accuracy", &MeasureResult::test_accuracy)
      .field("train_mse", &MeasureResult::train_mse)
      .field("test_mse", &MeasureResult::test_mse)
      .field("seconds", &MeasureResult::seconds)
      .field("labels", &MeasureResult::labels, "The training labels, in the order of fil")
      .field("n_train", &MeasureResult::n_train)
      .field("n_test", &MeasureResult::n_test)
      .done();

  keyword_registry()["measure"] = [] { return job_keywords<MeasureJob>(); };
  m.def(
      "measure",
      [](const py::kwargs& kwargs) {
        MeasureResult result = run_job_from_kwargs<MeasureJob>(kwargs);
        py::object summary = json_to_python(result.to_json().dump());
        return py::make_tuple(std::move(result), summary);
      },
      "The measurement job (load -> preprocess -> fit -> FIL), the same computation and options as `filkit "
      "measure` (filkit.defaults('measure') lists them), with out/json/report paths, threads and quiet. Returns "
      "(result, summary dict).");
}

}  // namespace filkit::python
