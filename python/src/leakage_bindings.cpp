// IRFIL, attribute inference, reconstruction bounds and the GLM reconstruction attack.
#include "bindings.hpp"
#include "job_bindings.hpp"

#include "filkit/leakage/attribute_inference.hpp"
#include "filkit/leakage/bounds.hpp"
#include "filkit/leakage/irfil.hpp"
#include "filkit/leakage/glm_reconstruction.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

namespace {

void bind_irfil(py::module_& m) {
  py::class_<IrfilResult>(m, "IrfilResult", "IRFIL: weights and eta of every iteration.")
      .def_readonly("weights", &IrfilResult::weights, "omega^t, t = 0..T")
      .def_readonly("eta_before", &IrfilResult::eta_before)
      .def_readonly("eta_after", &IrfilResult::eta_after)
      .def_readonly("model", &IrfilResult::model)
      .def_property_readonly("summary", [](const IrfilResult& r) { return json_to_python(r.to_json().dump()); });
  m.def(
      "irfil",
      [](const Dataset& train, const Dataset& test, const std::vector<Index>& attribute_columns,
         const py::kwargs& kwargs) {
        IrfilOptions options;
        std::set<std::string> accepted;
        options.fit = fit_options_from(kwargs, accepted);
        visit_fields(options, KwargsBinder{kwargs, accepted});
        reject_unknown_keywords("irfil", kwargs, accepted);
        options.attribute_columns = attribute_columns;
        py::gil_scoped_release release;
        return irfil(train, test, options);
      },
      py::arg("train"), py::arg("test"), py::arg("attribute_columns") = std::vector<Index>{},
      "Iteratively reweighted FIL (Algorithm 1 of the FIL paper) on given datasets: weights inversely proportional "
      "to eta, example / class / hybrid weighting, clamping, eta of all features or of attribute_columns. Keywords "
      "(the library's defaults): the fit's (model, regression, l2, intercept, tolerance, solver, max_iterations) "
      "and irfil's (iterations, weighting, min_weight, max_weight, sigma, label).");
}

void bind_attacks(py::module_& m) {
  py::class_<AttackResult>(m, "AttackResult", "Attribute inference results by sigma and eta group.")
      .def_readonly("examples", &AttackResult::examples)
      .def_readonly("eta", &AttackResult::eta, "attribute-level eta of the attacked examples at sigma = 1")
      .def_readonly("prior_accuracy", &AttackResult::prior_accuracy)
      .def_readonly("model", &AttackResult::model)
      .def_property_readonly("summary", [](const AttackResult& r) { return json_to_python(r.to_json().dump()); });
  m.def(
      "attribute_inference",
      [](const Dataset& train, const Dataset& test, const std::string& attribute, const VectorXd& weights,
         std::uint64_t seed, const py::kwargs& kwargs) {
        AttackOptions options;
        std::set<std::string> accepted;
        options.fit = fit_options_from(kwargs, accepted);
        visit_fields(options, KwargsBinder{kwargs, accepted});
        reject_unknown_keywords("attribute_inference", kwargs, accepted);
        options.seed = seed;
        const AttributeColumns columns = find_attribute(train, attribute);
        py::gil_scoped_release release;
        return attribute_inference(train, test, columns, options, weights);
      },
      py::arg("train"), py::arg("test"), py::arg("attribute"), py::arg("weights") = VectorXd(), py::arg("seed") = 0,
      "Prior, black-box (Fredrikson et al.) and white-box (FIL threat model) attribute inference against "
      "w' = w* + N(0, sigma^2 I) at each sigma over `trials` seeded noise draws, on given datasets. Keywords (the "
      "library's defaults): the fit's (model, regression, l2, intercept, tolerance, solver, max_iterations) and the "
      "attack's (sigmas, trials, white_box, black_box, white_box_solver, examples, compare_naive, groups).");
}

void bind_reconstruction(py::module_& m) {
  py::class_<ReconstructionBounds>(m, "ReconstructionBounds", "RDP and FIL/dFIL reconstruction MSE bounds.")
      .def_readonly("rdp_epsilon", &ReconstructionBounds::rdp_epsilon)
      .def_readonly("rdp_epsilon_at_data_norm", &ReconstructionBounds::rdp_epsilon_at_data_norm)
      .def_readonly("rdp_mse_bound", &ReconstructionBounds::rdp_mse_bound)
      .def_readonly("rdp_mse_bound_at_data_norm", &ReconstructionBounds::rdp_mse_bound_at_data_norm)
      .def_readonly("perfect_privacy_mse", &ReconstructionBounds::perfect_privacy_mse)
      .def_readonly("fil", &ReconstructionBounds::fil)
      .def_readonly("dfil_bound", &ReconstructionBounds::dfil_bound)
      .def_readonly("fil_bound", &ReconstructionBounds::fil_bound)
      .def_readonly("share_dfil_bound_above_line", &ReconstructionBounds::share_dfil_bound_above_line)
      .def_readonly("share_fil_bound_above_line", &ReconstructionBounds::share_fil_bound_above_line)
      .def_property_readonly("max_row_norm", [](const ReconstructionBounds& b) { return b.norm_check.max_norm; });
  m.def(
      "reconstruction_bounds",
      [](const Model& model, const Dataset& train, double sigma, double diameter, double norm_bound) {
        ReconstructionBoundOptions options;
        options.sigma = sigma;
        options.diameter = diameter;
        options.norm_bound = norm_bound;
        py::gil_scoped_release release;
        return reconstruction_bounds(model, train, options);
      },
      py::arg("model"), py::arg("train"), py::arg("sigma") = 1e-2, py::arg("diameter") = 1.0,
      py::arg("norm_bound") = 1.0,
      "Theorem 1 (RDP, eps = 4R^2/(n lambda sigma)^2) and Theorem 2 (1/eta^2, 1/dFIL^2) of Guo et al. 2022 "
      "for an output-perturbed logistic regression.");
  m.def("output_perturbation_rdp_epsilon", &output_perturbation_rdp_epsilon, py::arg("n"), py::arg("l2"),
        py::arg("sigma"), py::arg("norm_bound") = 1.0);
  m.def("rdp_mse_bound", py::overload_cast<double, double>(&rdp_mse_bound), py::arg("epsilon"),
        py::arg("diameter") = 1.0);

  py::class_<GlmAttackResult>(m, "GlmAttackResult", "The GLM reconstruction attack over many noise draws.")
      .def_readonly("rows", &GlmAttackResult::rows)
      .def_readonly("mean_mse", &GlmAttackResult::mean_mse)
      .def_readonly("guarded", &GlmAttackResult::guarded)
      .def_readonly("linearised_mse", &GlmAttackResult::linearised_mse)
      .def_readonly("mse_standard_error", &GlmAttackResult::mse_standard_error)
      .def_readonly("squared_bias", &GlmAttackResult::squared_bias)
      .def_readonly("squared_bias_standard_error", &GlmAttackResult::squared_bias_standard_error)
      .def_readonly("jacobian_trace", &GlmAttackResult::jacobian_trace)
      .def_readonly("jacobian_trace_standard_error", &GlmAttackResult::jacobian_trace_standard_error)
      .def_readonly("total_guarded", &GlmAttackResult::total_guarded)
      .def_readonly("trials", &GlmAttackResult::trials)
      .def_readonly("reconstruction_rows", &GlmAttackResult::reconstruction_rows)
      .def_readonly("reconstructions", &GlmAttackResult::reconstructions);
  m.def(
      "glm_reconstruction_attack",
      [](const Model& model, const Dataset& train, double sigma, Index trials, std::uint64_t seed,
         const std::vector<Index>& rows, const std::vector<Index>& keep_reconstructions) {
        GlmAttackOptions options;
        options.sigma = sigma;
        options.trials = trials;
        options.seed = seed;
        options.rows = rows;
        options.keep_reconstructions = keep_reconstructions;
        py::gil_scoped_release release;
        return evaluate_glm_attack(model, train, options);
      },
      py::arg("model"), py::arg("train"), py::arg("sigma") = 1e-5, py::arg("trials") = 10000, py::arg("seed") = 0,
      py::arg("rows") = std::vector<Index>{}, py::arg("keep_reconstructions") = std::vector<Index>{},
      "Balle et al.'s GLM attack on w' = w* + N(0, sigma^2 I) (logistic with an intercept): per-example "
      "reconstruction MSE averaged over seeded noise draws.");
}

}  // namespace

void bind_leakage(py::module_& m) {
  bind_irfil(m);
  bind_attacks(m);
  bind_reconstruction(m);
}

}  // namespace filkit::python
