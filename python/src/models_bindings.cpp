#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/models/glm.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

void bind_models(py::module_& m) {
  py::class_<Model> model(m, "Model", "A fitted GLM: weights p x K (row 0 is the intercept when there is one).");
  ReadonlyClass(model)
      .property(
          "kind", [](const Model& model) { return to_string(model.kind); },
          [](Model& model, const py::handle& value) { model.kind = parse_enum<ModelKind>(value.cast<std::string>()); })
      .field("intercept", &Model::intercept)
      .field("regression", &Model::regression)
      .field("l2", &Model::l2)
      .field("n_train", &Model::n_train)
      .field("num_classes", &Model::num_classes)
      .field("weights", &Model::weights)
      .field("iterations", &Model::iterations)
      .field("gradient_norm", &Model::gradient_norm)
      .done();
  model.def_property_readonly("flat", &Model::flat, "Parameters flattened column by column")
      .def("__repr__", [](const Model& model) {
        return "<filkit.Model " + to_string(model.kind) + " p=" + std::to_string(model.weights.rows()) +
               " K=" + std::to_string(model.weights.cols()) + ">";
      });

  keyword_registry()["fit"] = [] {
    py::list keywords;
    add_keywords(keywords, FitOptions{}, [](FitOptions& o, auto&& visit) { visit_fit_keywords(o, visit); });
    add_keywords(keywords, RunKeywords{});
    return keywords;
  };
  m.def(
      "fit",
      [](const Dataset& data, const VectorXd& weights, const py::kwargs& kwargs) {
        std::set<std::string> accepted;
        const FitOptions options = fit_options_from(kwargs, accepted);
        const RunKeywords run = take_run_keywords(kwargs, accepted);
        reject_unknown_keywords("fit", kwargs, accepted);
        py::gil_scoped_release release;
        const ThreadsForCall threads(run.threads);
        return fit(data, options, weights);
      },
      py::arg("data"), py::arg("weights") = VectorXd(),
      "Fit least-squares, logistic or softmax regression minimising sum_i w_i l(w.x_i, y_i) + (n*l2/2)||w||^2. "
      "Keywords (the library's defaults): model, regression, max_iterations, l2, intercept, tolerance, solver; "
      "threads.");
  m.def("perturb_output", &perturb_output, py::arg("model"), py::arg("sigma"), py::arg("seed"),
        "The Gaussian mechanism: a copy of the model with N(0, sigma^2) added to every weight.");
  m.def("predict", &predict, py::arg("model"), py::arg("X"));
  m.def("accuracy", &accuracy, py::arg("model"), py::arg("data"));
  m.def("mean_squared_error", &mean_squared_error, py::arg("model"), py::arg("data"));
  m.def(
      "per_example_loss",
      [](const Model& model, const Dataset& data) {
        PerExampleLoss loss = per_example_loss(model, data);
        return py::make_tuple(std::move(loss.loss), std::move(loss.gradient_norm));
      },
      py::arg("model"), py::arg("data"), "(loss, gradient norm) of every example.");
}

}  // namespace filkit::python
