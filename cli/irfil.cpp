#include "irfil.hpp"
#include "report.hpp"

#include "filkit/leakage/attribute_inference.hpp"
#include "task.hpp"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>

namespace filkit::cli {

void setup_irfil(CLI::App& app) {
  auto options = std::make_shared<IrfilCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "irfil",
      "Iteratively reweighted FIL (Algorithm 1 of the FIL paper): refit with per-example weights inversely "
      "proportional to each example's FIL until every example leaks alike. E.g. --data income-regression "
      "--attribute MARITAL.STATUS --intercept.");
  add_data_flags(*command, options->data);
  add_model_flags(*command, options->model);
  command->add_option("--iterations,-T", options->iterations, "Reweighting updates T (T + 1 fits), >= 0")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--weighting", options->weighting,
                      "example: omega = u; class: the class mean of u; hybrid: u times its class mean of u")
      ->check(CLI::IsMember({"example", "class", "hybrid"}))
      ->capture_default_str();
  command->add_option("--min-weight", options->min_weight, "Clamp weights below at this value, >= 0")
      ->capture_default_str();
  command->add_option("--max-weight", options->max_weight, "Clamp weights above at this value (default: none)");
  command->add_option("--sigma", options->sigma, "Noise standard deviation the eta refer to, > 0 (does not change weights)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--label", options->label, "Example-level eta: labels private or public")
      ->check(CLI::IsMember({"private", "public"}))
      ->capture_default_str();
  command->add_option("--attribute", options->attribute,
                      "Drive the update by the FIL of this attribute (a name of the column map, or columns 3,4,5) "
                      "instead of the whole example");
  command->add_option("--history-out", options->history_out,
                      "CSV of the training weights of every iteration: index, label, iteration_0..iteration_T");
  add_run_flags(*command, options->run,
                "Per-example CSV: index, label, weight (final), eta_before, eta_after");
  auto report = std::make_shared<std::string>();
  add_report_flag(*command, *report);
  command->callback([options, report] {
    run_with_report(*report, options->run, [&] { run_irfil(*options, std::cout); }, std::cout);
  });
}

namespace {

IrfilOptions to_irfil_options(const IrfilCommandOptions& options, const LoadedTask& task) {
  IrfilOptions irfil_options;
  irfil_options.fit = task.fit;
  irfil_options.fil.sigma = options.sigma;
  irfil_options.fil.label = label_privacy_from_string(options.label);
  irfil_options.iterations = options.iterations;
  irfil_options.weighting = irfil_weighting_from_string(options.weighting);
  irfil_options.min_weight = options.min_weight;
  irfil_options.max_weight = options.max_weight;
  if (!options.attribute.empty())
    irfil_options.attribute_columns = find_attribute(task.data.train, options.attribute).columns;
  irfil_options.progress = !options.run.quiet;
  return irfil_options;
}

void write_outputs(const IrfilCommandOptions& options, const LoadedTask& task, const IrfilOptions& irfil_options,
                   const IrfilResult& result) {
  const Dataset& train = task.data.train;
  if (!options.run.out.empty()) {
    std::vector<std::vector<double>> rows;
    for (Index i = 0; i < train.n(); ++i)
      rows.push_back({static_cast<double>(i), train.y(i), result.weights.back()(i), result.eta_before(i),
                      result.eta_after(i)});
    write_table(options.run.out, {"index", "label", "weight", "eta_before", "eta_after"}, rows);
  }
  if (!options.history_out.empty()) {
    std::vector<std::string> header = {"index", "label"};
    for (std::size_t t = 0; t < result.weights.size(); ++t) header.push_back("iteration_" + std::to_string(t));
    std::vector<std::vector<double>> rows;
    for (Index i = 0; i < train.n(); ++i) {
      std::vector<double> row = {static_cast<double>(i), train.y(i)};
      for (const VectorXd& omega : result.weights) row.push_back(omega(i));
      rows.push_back(std::move(row));
    }
    write_table(options.history_out, header, rows);
  }
  if (!options.run.json.empty()) {
    nlohmann::json json = result.to_json();
    json["filkit_version"] = version();
    json["command"] = "irfil";
    json["seed"] = options.run.seed;
    json["settings"] = task_json(options.data, task);
    json["settings"]["iterations"] = irfil_options.iterations;
    json["settings"]["weighting"] = to_string(irfil_options.weighting);
    json["settings"]["min_weight"] = irfil_options.min_weight;
    json["settings"]["max_weight"] = std::isfinite(irfil_options.max_weight) ? nlohmann::json(irfil_options.max_weight)
                                                                              : nlohmann::json("inf");
    json["settings"]["sigma"] = irfil_options.fil.sigma;
    json["settings"]["label"] = to_string(irfil_options.fil.label);
    json["settings"]["attribute"] = options.attribute;
    json["settings"]["attribute_columns"] = irfil_options.attribute_columns;
    write_json(options.run.json, json);
  }
}

void print_table(std::ostream& out, const IrfilCommandOptions& options, const LoadedTask& task,
                 const IrfilResult& result) {
  const bool regression = task.fit.regression;
  out << "filkit irfil: " << options.data.data << ", n = " << task.data.train.n() << ", d = " << task.data.train.d()
      << ", " << to_string(task.fit.kind) << ", lambda = " << task.fit.l2 << ", weighting " << options.weighting
      << ", eta of " << (options.attribute.empty() ? "the whole example" : "attribute " + options.attribute)
      << " at sigma = " << options.sigma << "\n";
  out << std::setw(5) << "iter" << std::setw(12) << "eta mean" << std::setw(12) << "eta std" << std::setw(12)
      << "eta max" << std::setw(12) << (regression ? "train MSE" : "train acc") << std::setw(12)
      << (regression ? "test MSE" : "test acc") << std::setw(12) << "weight min" << std::setw(12) << "weight max"
      << "\n";
  for (const IrfilIteration& it : result.iterations) {
    out << std::setw(5) << it.iteration << std::scientific << std::setprecision(3) << std::setw(12) << it.eta.mean
        << std::setw(12) << it.eta.std << std::setw(12) << it.eta.max << std::defaultfloat << std::setprecision(4)
        << std::setw(12) << (regression ? it.train_mse : it.train_accuracy) << std::setw(12)
        << (regression ? it.test_mse : it.test_accuracy) << std::setw(12) << it.weight_min << std::setw(12)
        << it.weight_max << "\n";
  }
}

}  // namespace

IrfilResult run_irfil(const IrfilCommandOptions& options, std::ostream& out) {
  apply_threads(options.run.threads);
  const LoadedTask task = load_task(options.data, options.model, options.run.seed);
  const IrfilOptions irfil_options = to_irfil_options(options, task);
  const IrfilResult result = irfil(task.data.train, task.data.test, irfil_options);
  write_outputs(options, task, irfil_options, result);
  if (!options.run.quiet) print_table(out, options, task, result);
  return result;
}

}  // namespace filkit::cli
