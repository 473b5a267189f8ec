#include "common.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/index_list.hpp"
#include "filkit/jobs/measure.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

namespace filkit::cli {

namespace {
bool is_builtin(const std::string& data) {
  const std::vector<std::string> names = builtin_dataset_names();
  return std::find(names.begin(), names.end(), data) != names.end();
}
}  // namespace

void add_data_flags(CLI::App& command, DataFlags& flags) {
  command.add_option("--data", flags.data,
                     "A built-in dataset (fashion-mnist, mnist; tabular: income-regression, income-classification, "
                     "credit-g) or a file: .csv/.arff (with --target) or .npz "
                     "(arrays X, y, optional X_test, y_test)")
      ->capture_default_str();
  command.add_option("--classes", flags.classes,
                     "Classes to keep, relabelled 0..K-1 in the order given (e.g. 0,1); 'all'; 'auto' = 0,1 for "
                     "built-in datasets, all for files")
      ->capture_default_str();
  command.add_option("--target", flags.target, "CSV/ARFF: the target column");
  command.add_option("--categorical", flags.categorical,
                     "CSV/ARFF: columns to one-hot encode even if numeric (non-numeric columns always are)")
      ->delimiter(',');
  command.add_flag("--regression", flags.regression, "The target is real-valued (least squares only)");
  command.add_option("--missing", flags.missing, "Rows with missing cells: drop, or level (a level of their own)")
      ->check(CLI::IsMember({"drop", "level"}))
      ->capture_default_str();
  command.add_option("--test-fraction", flags.test_fraction,
                     "Files without a test split: share of rows held out (seeded by --seed)")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  command.add_option("--train-size", flags.train_size,
                     "Keep a random subset of this many training examples (drawn with --seed; 0 = all)")
      ->capture_default_str();
  command.add_option("--test-size", flags.test_size,
                     "Keep a random subset of this many test examples (drawn with --seed; 0 = all)")
      ->capture_default_str();
  command.add_option("--pca", flags.pca,
                     "PCA to K dimensions fitted on the training split; 0 = none; auto = 20 for built-in datasets, "
                     "none for files")
      ->capture_default_str();
  command.add_option("--scale", flags.scale,
                     "Row scaling: none, global-max (divide by the largest training row norm, before PCA), "
                     "unit-ball (project rows onto the unit ball)")
      ->check(CLI::IsMember({"none", "global-max", "unit-ball"}))
      ->capture_default_str();
  command.add_option("--pixel-scale", flags.pixel_scale,
                     "Divide pixels by 255: auto (built-in image datasets), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

DataOptions to_data_options(const DataFlags& flags, std::uint64_t seed) {
  DataOptions options;
  options.data = flags.data;
  if (flags.classes == "auto") {
    if (is_builtin(flags.data)) options.classes = {0, 1};
  } else if (flags.classes != "all") {
    for (Index c : parse_index_list(flags.classes, "--classes")) options.classes.push_back(static_cast<int>(c));
  }
  options.target = flags.target;
  options.categorical = flags.categorical;
  options.regression = flags.regression;
  options.missing_policy = parse_enum<MissingPolicy>(flags.missing);
  options.test_fraction = flags.test_fraction;
  options.train_size = flags.train_size;
  options.test_size = flags.test_size;
  options.seed = seed;
  return options;
}

PreprocessOptions to_preprocess_options(const DataFlags& flags) {
  PreprocessOptions options;
  const bool builtin = is_builtin(flags.data);
  options.scale_pixels = flags.pixel_scale == "on" || (flags.pixel_scale == "auto" && builtin);
  options.row_scaling = parse_enum<RowScaling>(flags.scale);
  if (flags.pca == "auto") options.pca_components = builtin ? 20 : 0;
  else options.pca_components = parse_index_list(flags.pca, "--pca").at(0);
  return options;
}

void add_model_flags(CLI::App& command, ModelFlags& flags) {
  command.add_option("--model", flags.model,
                     "least-squares, logistic or softmax; auto = least-squares for a regression, else logistic")
      ->check(CLI::IsMember({"auto", "least-squares", "logistic", "softmax"}))
      ->capture_default_str();
  command.add_option("--l2", flags.l2, "L2 strength lambda of the penalty (n*lambda/2)||w||^2, >= 0")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_flag("--intercept", flags.intercept, "Add a public, regularised intercept");
  command.add_option("--tolerance", flags.tolerance,
                     "Newton stops at ||grad F|| <= tolerance * max(1, ||grad F(0)||)")
      ->capture_default_str();
  command.add_option("--solver", flags.solver,
                     "auto (Newton up to 2000 parameters, else L-BFGS), newton or lbfgs")
      ->check(CLI::IsMember({"auto", "newton", "lbfgs"}))
      ->capture_default_str();
}

FitOptions to_fit_options(const ModelFlags& flags, bool regression) {
  FitOptions options;
  if (flags.model == "auto") options.kind = regression ? ModelKind::kLeastSquares : ModelKind::kLogistic;
  else options.kind = parse_enum<ModelKind>(flags.model);
  options.l2 = flags.l2;
  options.intercept = flags.intercept;
  options.regression = regression;
  options.gradient_tolerance = flags.tolerance;
  options.solver = parse_enum<Solver>(flags.solver);
  return options;
}

void add_run_flags(CLI::App& command, RunFlags& flags, const std::string& out_description) {
  command.add_option("--seed", flags.seed, "Seed of every random choice (recorded in the outputs)")
      ->capture_default_str();
  command.add_option("--threads", flags.threads, "OpenMP threads; 0 = all cores")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_flag("--quiet,-q", flags.quiet, "No progress and no summary table");
  command.add_option("--out", flags.out, out_description);
  command.add_option("--json", flags.json, "Summary JSON: every setting, statistics, timings, seed, version");
}

void apply_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

void write_table(const std::string& path, const std::vector<std::string>& header,
                 const std::vector<std::vector<double>>& rows) {
  CsvTable table(header);
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    cells.reserve(row.size());
    for (double value : row) {
      const bool integral = std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e15;
      cells.push_back(integral ? std::to_string(static_cast<long long>(value)) : format_double(value));
    }
    table.add_row(std::move(cells));
  }
  table.write(path);
}

void write_json(const std::string& path, const nlohmann::json& json) {
  write_file_atomically(path, json.dump(2) + "\n");
}

}  // namespace filkit::cli
