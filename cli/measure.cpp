#include "measure.hpp"

#include "report.hpp"

#include "filkit/base/summary.hpp"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

namespace filkit::cli {

void setup_measure(CLI::App& app) {
  auto options = std::make_shared<MeasureCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "measure",
      "Fit a GLM and measure the Fisher information loss (FIL) of its output-perturbed release for every "
      "training example. Without --data: Fashion-MNIST 0 vs 1, global-max scaling, PCA 20, logistic, "
      "lambda 8e-4, sigma 1.");
  add_data_flags(*command, options->data);
  add_model_flags(*command, options->model);
  command->add_option("--sigma", options->sigma, "Standard deviation of the output perturbation, > 0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--releases", options->releases,
                      "Independent releases at --sigma, composed (FIL grows by sqrt(releases))")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--label", options->label, "Whether labels are private coordinates: private or public")
      ->check(CLI::IsMember({"private", "public"}))
      ->capture_default_str();
  command->add_option("--attribute", options->attribute,
                      "Attribute-level FIL: a source attribute's name (CSV/ARFF) or feature columns, e.g. 3,4,5");
  command->add_option("--subset", options->subsets,
                      "Joint FIL of a group: all, class=K or rows=FILE (0-based indices, one per line); repeatable");
  command->add_option("--release-out", options->release_out,
                      "CSV of the released weights w' = w* + N(0, sigma^2 I), seeded by --seed");
  add_run_flags(*command, options->run,
                "Per-example CSV: index, label, eta, dfil, Cramer-Rao bounds, loss, gradient norm");
  command->add_option("--report", options->report,
                      "Also write a report here: figures and report.html (as `filkit report`); the summary and "
                      "table go here too unless --json/--out name them");
  command->callback([options] { run_measure(*options, std::cout); });
}

MeasureOptions to_measure_options(const MeasureCommandOptions& options) {
  MeasureOptions measure_options;
  measure_options.data = to_data_options(options.data, options.run.seed);
  measure_options.preprocess = to_preprocess_options(options.data);
  measure_options.fit = to_fit_options(options.model, options.data.regression);
  measure_options.fil.sigma = options.sigma;
  measure_options.fil.label = label_privacy_from_string(options.label);
  measure_options.releases = options.releases;
  measure_options.attribute = options.attribute;
  measure_options.subsets = options.subsets;
  measure_options.seed = options.run.seed;
  measure_options.progress = !options.run.quiet;
  return measure_options;
}

namespace {

void print_row(std::ostream& out, const std::string& name, const Summary& s) {
  out << "  " << std::left << std::setw(18) << name << std::right << std::scientific << std::setprecision(3)
      << std::setw(11) << s.mean << std::setw(11) << s.std << std::setw(11) << s.min << std::setw(11) << s.median
      << std::setw(11) << s.max << "\n";
}

void print_summary(std::ostream& out, const MeasureCommandOptions& options, const MeasureResult& result) {
  const Dataset& train = result.data.train;
  out << "filkit measure: " << options.data.data << ", n = " << train.n() << ", d = " << train.d() << ", "
      << options.model.model << ", lambda = " << options.model.l2 << ", sigma = " << result.sigma
      << (options.releases > 1 ? " (" + std::to_string(options.releases) + " releases composed)" : "")
      << ", label " << options.label << "\n";
  out << "  " << std::left << std::setw(18) << "" << std::right << std::setw(11) << "mean" << std::setw(11) << "std"
      << std::setw(11) << "min" << std::setw(11) << "median" << std::setw(11) << "max" << "\n";
  print_row(out, "eta (FIL)", summarize(result.fil.eta));
  print_row(out, "dFIL", summarize(result.fil.dfil));
  print_row(out, "MSE bound 1/dFIL^2", summarize(result.fil.example_mse_bound()));
  if (result.attribute_eta.size()) print_row(out, "attribute eta", summarize(result.attribute_eta));
  out << std::defaultfloat << std::setprecision(6);
  if (result.attribute_eta.size())
    out << "  attribute over all examples: eta = " << result.attribute_fil.eta << ", dFIL = " << result.attribute_fil.dfil
        << "\n";
  for (const GroupFil& group : result.groups)
    out << "  group " << group.name << " (" << group.fil.examples << " examples): eta = " << group.fil.eta
        << ", dFIL = " << group.fil.dfil << "\n";
  if (!result.model.regression)
    out << "  accuracy: train " << result.train_accuracy << ", test " << result.test_accuracy << "\n";
  else
    out << "  MSE: train " << result.train_mse << ", test " << result.test_mse << "\n";
  out << "  seconds:";
  for (const auto& [stage, seconds] : result.seconds) out << " " << stage << " " << std::setprecision(3) << seconds;
  out << "\n";
}

// The report reads the outputs from disk, like `filkit report` would, so both draw the same.
void write_measure_report(const MeasureCommandOptions& options, const MeasureResult& result,
                          const MeasureOptions& measure_options, std::ostream& out) {
  std::filesystem::create_directories(options.report);
  const std::filesystem::path dir(options.report);
  ReportOptions report;
  report.out_dir = options.report;
  report.inputs = {options.run.json.empty() ? (dir / "summary.json").string() : options.run.json};
  report.tables = {options.run.out.empty() ? (dir / "per-example.csv").string() : options.run.out};
  if (options.run.json.empty()) write_json(report.inputs[0], result.summary(measure_options));
  if (options.run.out.empty()) write_table(report.tables[0], result.table_header(), result.table_rows());
  const ReportResult written = write_report(report);
  if (!options.run.quiet) print_report_result(written, out);
}

}  // namespace

MeasureResult run_measure(const MeasureCommandOptions& options, std::ostream& out) {
  apply_threads(options.run.threads);
  const MeasureOptions measure_options = to_measure_options(options);
  const MeasureResult result = measure(measure_options);
  if (!options.run.out.empty()) write_table(options.run.out, result.table_header(), result.table_rows());
  if (!options.run.json.empty()) write_json(options.run.json, result.summary(measure_options));
  if (!options.release_out.empty()) {
    const VectorXd w = result.release.flat();
    write_table(options.release_out, {"coordinate", "released_weight"}, [&] {
      std::vector<std::vector<double>> rows;
      for (Index k = 0; k < w.size(); ++k) rows.push_back({static_cast<double>(k), w(k)});
      return rows;
    }());
  }
  if (!options.run.quiet) print_summary(out, options, result);
  if (!options.report.empty()) write_measure_report(options, result, measure_options, out);
  return result;
}

}  // namespace filkit::cli
