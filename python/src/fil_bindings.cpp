#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/leakage/fil.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <optional>

namespace py = pybind11;

namespace filkit::python {

namespace {

CoordinateSelection selection_for(const std::optional<std::vector<Index>>& columns, std::optional<bool> label,
                                  LabelPrivacy default_label) {
  CoordinateSelection selection =
      columns ? CoordinateSelection::columns(*columns) : CoordinateSelection::example(default_label);
  if (label) selection.label = *label;
  return selection;
}

// FisherInformationLoss' keywords: FilOptions' declared fields (sigma, label) and structured.
template <class Visit>
void visit_constructor_fields(FilOptions& options, Visit&& visit) {
  visit_fields(options, visit);
  visit("structured", options.structured, "Use the Hessian's structure (exact either way; faster)");
}

FilOptions fil_options_from(const py::kwargs& kwargs, std::set<std::string>& accepted) {
  FilOptions options;
  visit_constructor_fields(options, KwargsBinder{kwargs, accepted});
  return options;
}

}  // namespace

void bind_fil(py::module_& m) {
  keyword_registry()["FisherInformationLoss"] = [] {
    py::list keywords;
    add_keywords(keywords, FilOptions{}, [](FilOptions& o, auto&& visit) { visit_constructor_fields(o, visit); });
    return keywords;
  };
  py::class_<PerExampleFil> per_example(m, "PerExampleFil", "FIL (eta) and dFIL of every training example.");
  ReadonlyClass(per_example)
      .field("eta", &PerExampleFil::eta)
      .field("dfil", &PerExampleFil::dfil)
      .field("private_dims", &PerExampleFil::private_dims)
      .done();
  per_example.def("attribute_mse_bound", &PerExampleFil::attribute_mse_bound, "1/eta^2 per example")
      .def("example_mse_bound", &PerExampleFil::example_mse_bound, "1/dFIL^2 per example");

  py::class_<SubsetFil> subset(m, "SubsetFil",
                               "FIL of a set of private coordinates taken together: eta and dFIL of the set (numbers: "
                               "one set), the examples and coordinates in it.");
  ReadonlyClass(subset)
      .field("eta", &SubsetFil::eta)
      .field("dfil", &SubsetFil::dfil)
      .field("examples", &SubsetFil::examples)
      .field("coordinates", &SubsetFil::coordinates)
      .done();
  subset.def("__repr__", [](const SubsetFil& s) {
    return "<filkit.SubsetFil eta=" + std::to_string(s.eta) + " dfil=" + std::to_string(s.dfil) + ">";
  });

  py::class_<FisherInformationLoss>(
      m, "FisherInformationLoss",
      "The Jacobian of the minimiser with respect to the training data and the FIL derived from it. "
      "H is factorised once at construction; keeps `data` alive.")
      .def(py::init([](const Model& model, const Dataset& data, const VectorXd& weights, const py::kwargs& kwargs) {
             std::set<std::string> accepted;
             const FilOptions options = fil_options_from(kwargs, accepted);
             reject_unknown_keywords("FisherInformationLoss", kwargs, accepted);
             return FisherInformationLoss(model, data, weights, options);
           }),
           py::arg("model"), py::arg("data"), py::arg("weights") = VectorXd(), py::keep_alive<1, 3>())
      .def(
          "per_example",
          [](const FisherInformationLoss& fil) {
            py::gil_scoped_release release;
            return fil.per_example();
          },
          "eta and dFIL of every example (all its private coordinates)")
      .def(
          "per_example_attribute",
          [](const FisherInformationLoss& fil, const std::vector<Index>& columns) {
            py::gil_scoped_release release;
            return fil.per_example_selection(CoordinateSelection::columns(columns));
          },
          py::arg("columns"), "eta of the given feature columns (an attribute) of every example")
      .def(
          "subset",
          [](const FisherInformationLoss& fil, const std::vector<Index>& rows,
             const std::optional<std::vector<Index>>& columns, std::optional<bool> label) {
            return fil.subset(rows, selection_for(columns, label, fil.options().label));
          },
          py::arg("rows") = std::vector<Index>{}, py::arg("columns") = py::none(), py::arg("label") = py::none(),
          "Joint FIL of the chosen coordinates (columns; None = all features, and the label as the "
          "object's label privacy says) of the chosen rows (empty = all)")
      .def(
          "jacobian",
          [](const FisherInformationLoss& fil, Index i, const std::optional<std::vector<Index>>& columns,
             std::optional<bool> label) { return fil.jacobian(i, selection_for(columns, label, fil.options().label)); },
          py::arg("i"), py::arg("columns") = py::none(), py::arg("label") = py::none(),
          "The dense Jacobian J_i (p x private coordinates)")
      .def_property_readonly("hessian", &FisherInformationLoss::hessian)
      .def_property_readonly("num_params", &FisherInformationLoss::num_params);

  m.def("composed_sigma", &composed_sigma, py::arg("sigmas"),
        "Effective sigma of independent releases: (sum sigma_k^-2)^(-1/2).");
  m.def("composed_fil", &composed_fil, py::arg("information_matrices"),
        "sqrt(lambda_max(sum_k I_k)) of independent releases.");
}

}  // namespace filkit::python
