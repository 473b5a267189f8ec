#include "bindings.hpp"

#include "filkit/jobs/measure.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <set>

namespace py = pybind11;

namespace filkit::python {

namespace {

// Keyword arguments override the default job's options; None keeps the default.
MeasureOptions measure_options(const py::kwargs& kwargs) {
  MeasureOptions options = default_measure_options();
  const std::set<std::string> known = {"data",  "classes", "target",  "regression", "test_fraction", "pca",
                                       "scale", "pixel_scale", "model", "l2", "intercept", "tolerance",
                                       "sigma", "releases", "label", "attribute", "subsets", "seed"};
  for (const auto& item : kwargs) {
    const std::string key = py::str(item.first);
    if (!known.count(key)) throw std::invalid_argument("measure(): unknown option '" + key + "'");
  }
  auto get = [&](const char* key, auto& target) {
    if (kwargs.contains(key) && !kwargs[key].is_none()) target = kwargs[key].cast<std::decay_t<decltype(target)>>();
  };
  get("data", options.data.data);
  if (kwargs.contains("data") && !kwargs.contains("classes")) {
    const auto names = builtin_dataset_names();
    if (std::find(names.begin(), names.end(), options.data.data) == names.end()) options.data.classes.clear();
  }
  get("classes", options.data.classes);
  get("target", options.data.target);
  get("regression", options.data.regression);
  get("test_fraction", options.data.test_fraction);
  get("pca", options.preprocess.pca_components);
  if (kwargs.contains("scale")) options.preprocess.row_scaling = row_scaling_from_string(kwargs["scale"].cast<std::string>());
  get("pixel_scale", options.preprocess.scale_pixels);
  if (kwargs.contains("model")) options.fit.kind = model_kind_from_string(kwargs["model"].cast<std::string>());
  get("l2", options.fit.l2);
  get("intercept", options.fit.intercept);
  get("tolerance", options.fit.gradient_tolerance);
  options.fit.regression = options.data.regression;
  get("sigma", options.fil.sigma);
  get("releases", options.releases);
  if (kwargs.contains("label")) options.fil.label = label_privacy_from_string(kwargs["label"].cast<std::string>());
  get("attribute", options.attribute);
  get("subsets", options.subsets);
  get("seed", options.seed);
  options.data.seed = options.seed;
  return options;
}

}  // namespace

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
        const MeasureOptions options = measure_options(kwargs);
        MeasureResult result;
        {
          py::gil_scoped_release release;
          result = measure(options);
        }
        py::object summary = json_to_python(result.summary(options).dump());
        return py::make_tuple(std::move(result), summary);
      },
      "The measurement job (load -> preprocess -> fit -> FIL), the same computation as `filkit measure`. "
      "Keyword arguments override the default job (Fashion-MNIST 0 vs 1, pixels/255, global-max, PCA 20, "
      "logistic, l2 8e-4, sigma 1): data, classes, target, regression, test_fraction, pca, scale, "
      "pixel_scale, model, l2, intercept, tolerance, sigma, releases, label, attribute, subsets, seed. "
      "Returns (result, summary dict).");
}

}  // namespace filkit::python
