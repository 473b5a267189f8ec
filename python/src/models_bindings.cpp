#include "bindings.hpp"
#include "job_bindings.hpp"

#include "filkit/models/glm.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

void bind_models(py::module_& m) {
  py::class_<Model>(m, "Model", "A fitted GLM: weights p x K (row 0 is the intercept when there is one).")
      .def_property_readonly("kind", [](const Model& model) { return to_string(model.kind); })
      .def_readonly("intercept", &Model::intercept)
      .def_readonly("regression", &Model::regression)
      .def_readonly("l2", &Model::l2)
      .def_readonly("n_train", &Model::n_train)
      .def_readonly("num_classes", &Model::num_classes)
      .def_readonly("weights", &Model::weights)
      .def_readonly("iterations", &Model::iterations)
      .def_readonly("gradient_norm", &Model::gradient_norm)
      .def_property_readonly("flat", &Model::flat, "Parameters flattened column by column")
      .def("__repr__", [](const Model& model) {
        return "<filkit.Model " + to_string(model.kind) + " p=" + std::to_string(model.weights.rows()) +
               " K=" + std::to_string(model.weights.cols()) + ">";
      });

  m.def(
      "fit",
      [](const Dataset& data, const VectorXd& weights, const py::kwargs& kwargs) {
        std::set<std::string> accepted;
        const FitOptions options = fit_options_from(kwargs, accepted);
        reject_unknown_keywords("fit", kwargs, accepted);
        py::gil_scoped_release release;
        return fit(data, options, weights);
      },
      py::arg("data"), py::arg("weights") = VectorXd(),
      "Fit least-squares, logistic or softmax regression minimising sum_i w_i l(w.x_i, y_i) + (n*l2/2)||w||^2. "
      "Keywords (the library's defaults): model, regression, l2, intercept, tolerance, solver, max_iterations.");
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
