#include "bindings.hpp"

#include "filkit/dpsgd.hpp"

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <set>

namespace py = pybind11;

namespace filkit::python {

namespace {

DpSgdOptions dpsgd_options(const py::kwargs& kwargs) {
  DpSgdOptions options;
  const std::set<std::string> known = {
      "model", "intercept", "label", "batch_size", "sampling", "steps", "step_size", "clip_norm",
      "noise_multiplier", "momentum", "weight_decay", "subsampling", "kappa_delta", "trace", "spectral",
      "probes", "power_iterations", "runs", "seed", "report_epochs", "rdp_delta"};
  for (const auto& item : kwargs)
    if (!known.count(py::str(item.first)))
      throw std::invalid_argument("train_dpsgd(): unknown option '" + std::string(py::str(item.first)) + "'");
  auto get = [&](const char* key, auto& target) {
    if (kwargs.contains(key)) target = kwargs[key].cast<std::decay_t<decltype(target)>>();
  };
  auto text = [&](const char* key) { return kwargs[key].cast<std::string>(); };
  if (kwargs.contains("model")) options.kind = model_kind_from_string(text("model"));
  get("intercept", options.intercept);
  if (kwargs.contains("label")) options.label = label_privacy_from_string(text("label"));
  get("batch_size", options.batch_size);
  if (kwargs.contains("sampling")) options.sampling = batch_sampling_from_string(text("sampling"));
  get("steps", options.steps);
  get("step_size", options.step_size);
  get("clip_norm", options.clip_norm);
  get("noise_multiplier", options.noise_multiplier);
  get("momentum", options.momentum);
  get("weight_decay", options.weight_decay);
  if (kwargs.contains("subsampling")) options.subsampling = subsampling_factor_from_string(text("subsampling"));
  get("kappa_delta", options.kappa_delta);
  if (kwargs.contains("trace")) options.trace = trace_method_from_string(text("trace"));
  if (kwargs.contains("spectral")) options.spectral = spectral_method_from_string(text("spectral"));
  get("probes", options.probes);
  get("power_iterations", options.power_iterations);
  get("runs", options.runs);
  get("seed", options.seed);
  get("report_epochs", options.report_epochs);
  get("rdp_delta", options.rdp_delta);
  return options;
}

}  // namespace

void bind_dpsgd(py::module_& m) {
  py::class_<DpSgdCheckpoint>(m, "DpSgdCheckpoint", "The FIL accountant (mean over runs) at one step.")
      .def_readonly("step", &DpSgdCheckpoint::step)
      .def_readonly("epoch", &DpSgdCheckpoint::epoch)
      .def_readonly("fisher_trace", &DpSgdCheckpoint::fisher_trace)
      .def_readonly("fisher_trace_standard_error", &DpSgdCheckpoint::fisher_trace_standard_error)
      .def_readonly("fisher_spectral", &DpSgdCheckpoint::fisher_spectral)
      .def_readonly("times_sampled", &DpSgdCheckpoint::times_sampled)
      .def_readonly("train_accuracy", &DpSgdCheckpoint::train_accuracy)
      .def_readonly("test_accuracy", &DpSgdCheckpoint::test_accuracy)
      .def_readonly("privacy", &DpSgdCheckpoint::privacy)
      .def_readonly("rdp_order2", &DpSgdCheckpoint::rdp_order2)
      .def("rdp_mse_bound", &DpSgdCheckpoint::rdp_mse_bound)
      .def("dfil", &DpSgdCheckpoint::dfil, py::arg("private_dims"))
      .def("eta", &DpSgdCheckpoint::eta);

  py::class_<DpSgdResult>(m, "DpSgdResult", "DP-SGD runs with per-example FIL accounting.")
      .def_readonly("n", &DpSgdResult::n)
      .def_readonly("num_classes", &DpSgdResult::num_classes)
      .def_readonly("private_dims", &DpSgdResult::private_dims)
      .def_readonly("sampling_rate", &DpSgdResult::sampling_rate)
      .def_readonly("step_epsilon", &DpSgdResult::step_epsilon)
      .def_readonly("kappa", &DpSgdResult::kappa)
      .def_readonly("run_seeds", &DpSgdResult::run_seeds)
      .def_readonly("checkpoints", &DpSgdResult::checkpoints)
      .def_readonly("models", &DpSgdResult::models)
      .def_readonly("seconds", &DpSgdResult::seconds)
      .def_property_readonly("final_checkpoint", &DpSgdResult::final_checkpoint);

  m.def(
      "train_dpsgd",
      [](const Dataset& train, const Dataset& test, const py::kwargs& kwargs) {
        const DpSgdOptions options = dpsgd_options(kwargs);
        DpSgdResult result;
        {
          py::gil_scoped_release release;
          result = train_dpsgd(train, test, options);
        }
        py::object summary = json_to_python(result.summary(options).dump());
        return py::make_tuple(std::move(result), summary);
      },
      py::arg("train"), py::arg("test"),
      "Train logistic/softmax regression by DP-SGD (GELU clipping, Gaussian noise) with the per-example FIL "
      "accountant of the reconstruction paper's Algorithm 1. Keyword options: model, intercept, label, "
      "batch_size, sampling, steps, step_size, clip_norm, noise_multiplier, momentum, weight_decay, subsampling, "
      "kappa_delta, trace, spectral, probes, power_iterations, runs, seed, report_epochs, rdp_delta. "
      "Returns (result, summary dict).");
  m.def("subsampling_kappa", &subsampling_kappa, py::arg("q"), py::arg("noise_multiplier"), py::arg("delta"));
}

}  // namespace filkit::python
