// IRFIL, attribute inference, reconstruction bounds and the GLM reconstruction attack.
#include "bindings.hpp"
#include "job_bindings.hpp"
#include "readonly_class.hpp"

#include "filkit/base/io.hpp"
#include "filkit/leakage/attribute_inference.hpp"
#include "filkit/leakage/bounds.hpp"
#include "filkit/leakage/glm_reconstruction.hpp"
#include "filkit/leakage/irfil.hpp"

#include <nlohmann/json.hpp>
#include <pybind11/eigen.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace filkit::python {

namespace {

// The keywords of irfil() and attribute_inference(): the fit's, the method's, threads and quiet.
template <class Options>
py::list method_keywords() {
  py::list keywords;
  add_keywords(keywords, FitOptions{}, [](FitOptions& o, auto&& visit) { visit_fit_keywords(o, visit); });
  add_keywords(keywords, Options{});
  add_keywords(keywords, RunKeywords{});
  return keywords;
}

void bind_irfil(py::module_& m) {
  py::class_<IrfilResult> result(m, "IrfilResult", "IRFIL: weights and eta of every iteration.", py::dynamic_attr());
  ReadonlyClass(result)
      .field("weights", &IrfilResult::weights, "omega^t, t = 0..T")
      .field("eta_before", &IrfilResult::eta_before)
      .field("eta_after", &IrfilResult::eta_after)
      .field("model", &IrfilResult::model)
      .done();
  keyword_registry()["irfil"] = [] { return method_keywords<IrfilOptions>(); };
  m.def(
      "irfil",
      [](const Dataset& train, const Dataset& test, const std::vector<Index>& attribute_columns,
         const py::kwargs& kwargs) {
        IrfilOptions options;
        std::set<std::string> accepted;
        options.fit = fit_options_from(kwargs, accepted);
        visit_fields(options, KwargsBinder{kwargs, accepted});
        const RunKeywords run = take_run_keywords(kwargs, accepted);
        reject_unknown_keywords("irfil", kwargs, accepted);
        options.attribute_columns = attribute_columns;
        options.progress = !run.quiet;
        IrfilResult result;
        {
          py::gil_scoped_release release;
          const ThreadsForCall threads(run.threads);
          result = irfil(train, test, options);
        }
        // The summary is kept with the result (and pickled with it): a dict, as the jobs'.
        py::object out = py::cast(std::move(result));
        out.attr("summary") = json_to_python(out.cast<const IrfilResult&>().to_json().dump());
        return out;
      },
      py::arg("train"), py::arg("test"), py::arg("attribute_columns") = std::vector<Index>{},
      "Iteratively reweighted FIL (Algorithm 1 of the FIL paper) on given datasets: weights inversely proportional "
      "to eta, example / class / hybrid weighting, clamping, eta of all features or of attribute_columns. Keywords "
      "(the library's defaults): the fit's (model, regression, max_iterations, l2, intercept, tolerance, solver), "
      "irfil's (iterations, weighting, min_weight, max_weight, sigma, label), threads and quiet. The result's "
      "summary is the JSON summary as a dict.");
}

void bind_attacks(py::module_& m) {
  py::class_<AttackResult> result(m, "AttackResult", "Attribute inference results by sigma and eta group.",
                                  py::dynamic_attr());
  ReadonlyClass(result)
      .field("examples", &AttackResult::examples)
      .field("eta", &AttackResult::eta, "attribute-level eta of the attacked examples at sigma = 1")
      .field("prior_accuracy", &AttackResult::prior_accuracy)
      .field("model", &AttackResult::model)
      .done();
  keyword_registry()["attribute_inference"] = [] { return method_keywords<AttackOptions>(); };
  m.def(
      "attribute_inference",
      [](const Dataset& train, const Dataset& test, const std::string& attribute, const VectorXd& weights,
         std::uint64_t seed, const py::kwargs& kwargs) {
        AttackOptions options;
        std::set<std::string> accepted;
        options.fit = fit_options_from(kwargs, accepted);
        visit_fields(options, KwargsBinder{kwargs, accepted});
        const RunKeywords run = take_run_keywords(kwargs, accepted);
        reject_unknown_keywords("attribute_inference", kwargs, accepted);
        options.seed = seed;
        options.progress = !run.quiet;
        const AttributeColumns columns = find_attribute(train, attribute);
        AttackResult result;
        {
          py::gil_scoped_release release;
          const ThreadsForCall threads(run.threads);
          result = attribute_inference(train, test, columns, options, weights);
        }
        py::object out = py::cast(std::move(result));
        out.attr("summary") = json_to_python(out.cast<const AttackResult&>().to_json().dump());
        return out;
      },
      py::arg("train"), py::arg("test"), py::arg("attribute"), py::arg("weights") = VectorXd(),
      py::arg("seed") = AttackOptions{}.seed,
      "Prior, black-box (Fredrikson et al.) and white-box (FIL threat model) attribute inference against "
      "w' = w* + N(0, sigma^2 I) at each sigma over `trials` seeded noise draws, on given datasets. Keywords (the "
      "library's defaults): the fit's (model, regression, max_iterations, l2, intercept, tolerance, solver), the "
      "attack's (sigmas, trials, white_box, black_box, white_box_solver, examples, compare_naive, groups), threads "
      "and quiet. The result's summary is the JSON summary as a dict.");
}

void bind_reconstruction(py::module_& m) {
  py::class_<ReconstructionBounds> bounds(m, "ReconstructionBounds", "RDP and FIL/dFIL reconstruction MSE bounds.");
  ReadonlyClass(bounds)
      .field("rdp_epsilon", &ReconstructionBounds::rdp_epsilon)
      .field("rdp_epsilon_at_data_norm", &ReconstructionBounds::rdp_epsilon_at_data_norm)
      .field("rdp_mse_bound", &ReconstructionBounds::rdp_mse_bound)
      .field("rdp_mse_bound_at_data_norm", &ReconstructionBounds::rdp_mse_bound_at_data_norm)
      .field("perfect_privacy_mse", &ReconstructionBounds::perfect_privacy_mse)
      .field("fil", &ReconstructionBounds::fil)
      .field("dfil_bound", &ReconstructionBounds::dfil_bound)
      .field("fil_bound", &ReconstructionBounds::fil_bound)
      .field("share_dfil_bound_above_line", &ReconstructionBounds::share_dfil_bound_above_line)
      .field("share_fil_bound_above_line", &ReconstructionBounds::share_fil_bound_above_line)
      .property(
          "max_row_norm", [](const ReconstructionBounds& b) { return b.norm_check.max_norm; },
          [](ReconstructionBounds& b, const py::handle& value) { b.norm_check.max_norm = value.cast<double>(); })
      .done();
  const ReconstructionBoundOptions bound_defaults;
  m.def(
      "reconstruction_bounds",
      [](const Model& model, const Dataset& train, double sigma, double diameter, double norm_bound,
         long long threads) {
        ReconstructionBoundOptions options;
        options.sigma = sigma;
        options.diameter = diameter;
        options.norm_bound = norm_bound;
        check_thread_count("threads", threads);
        py::gil_scoped_release release;
        const ThreadsForCall on(threads);
        return reconstruction_bounds(model, train, options);
      },
      py::arg("model"), py::arg("train"), py::arg("sigma") = bound_defaults.sigma,
      py::arg("diameter") = bound_defaults.diameter, py::arg("norm_bound") = bound_defaults.norm_bound,
      py::arg("threads") = RunKeywords{}.threads,
      "Theorem 1 (RDP, eps = 4R^2/(n lambda sigma)^2) and Theorem 2 (1/eta^2, 1/dFIL^2) of Guo et al. 2022 "
      "for an output-perturbed logistic regression.");
  m.def("output_perturbation_rdp_epsilon", &output_perturbation_rdp_epsilon, py::arg("n"), py::arg("l2"),
        py::arg("sigma"), py::arg("norm_bound") = bound_defaults.norm_bound);
  m.def("rdp_mse_bound", py::overload_cast<double, double>(&rdp_mse_bound), py::arg("epsilon"),
        py::arg("diameter") = bound_defaults.diameter);

  py::class_<GlmAttackResult> attack(m, "GlmAttackResult", "The GLM reconstruction attack over many noise draws.");
  ReadonlyClass(attack)
      .field("rows", &GlmAttackResult::rows)
      .field("mean_mse", &GlmAttackResult::mean_mse)
      .field("guarded", &GlmAttackResult::guarded)
      .field("linearised_mse", &GlmAttackResult::linearised_mse)
      .field("mse_standard_error", &GlmAttackResult::mse_standard_error)
      .field("squared_bias", &GlmAttackResult::squared_bias)
      .field("squared_bias_standard_error", &GlmAttackResult::squared_bias_standard_error)
      .field("jacobian_trace", &GlmAttackResult::jacobian_trace)
      .field("jacobian_trace_standard_error", &GlmAttackResult::jacobian_trace_standard_error)
      .field("total_guarded", &GlmAttackResult::total_guarded)
      .field("examples_all_guarded", &GlmAttackResult::examples_all_guarded)
      .field("trials", &GlmAttackResult::trials)
      .field("reconstruction_rows", &GlmAttackResult::reconstruction_rows)
      .field("reconstructions", &GlmAttackResult::reconstructions)
      .field("originals", &GlmAttackResult::originals)
      .done();
  const GlmAttackOptions attack_defaults;
  m.def(
      "glm_reconstruction_attack",
      [](const Model& model, const Dataset& train, double sigma, Index trials, std::uint64_t seed,
         const std::vector<Index>& rows, const std::vector<Index>& save_reconstructions, double divisor_guard,
         long long threads, bool quiet) {
        GlmAttackOptions options;
        options.sigma = sigma;
        options.trials = trials;
        options.seed = seed;
        options.rows = rows;
        options.keep_reconstructions = save_reconstructions;
        options.divisor_guard = divisor_guard;
        check_thread_count("threads", threads);
        py::gil_scoped_release release;
        const ThreadsForCall on(threads);
        Progress progress("glm_reconstruction_attack", trials, quiet);
        Index reported = 0;
        return evaluate_glm_attack(model, train, options, [&](Index done, Index) {
          progress.advance(done - reported);
          reported = done;
        });
      },
      py::arg("model"), py::arg("train"), py::arg("sigma") = attack_defaults.sigma,
      py::arg("trials") = attack_defaults.trials, py::arg("seed") = attack_defaults.seed,
      py::arg("rows") = attack_defaults.rows, py::arg("save_reconstructions") = attack_defaults.keep_reconstructions,
      py::arg("divisor_guard") = attack_defaults.divisor_guard, py::arg("threads") = RunKeywords{}.threads,
      py::arg("quiet") = RunKeywords{}.quiet,
      "Balle et al.'s GLM attack on w' = w* + N(0, sigma^2 I) (logistic with an intercept): per-example "
      "reconstruction MSE averaged over seeded noise draws; save_reconstructions names the rows whose mean "
      "reconstruction is kept (as filkit reconstruct --save-reconstructions).");
}

}  // namespace

void bind_leakage(py::module_& m) {
  bind_irfil(m);
  bind_attacks(m);
  bind_reconstruction(m);
}

}  // namespace filkit::python
