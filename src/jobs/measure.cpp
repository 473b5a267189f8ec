#include "filkit/jobs/measure.hpp"

#include "filkit/base/io.hpp"
#include "filkit/data/pipeline.hpp"
#include "filkit/base/summary.hpp"

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<Index> read_row_file(const std::string& path, Index n) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--subset rows=" + path + ": cannot open the file");
  std::vector<Index> rows;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(line, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || line.find_first_not_of(" \t\r", used) != std::string::npos || value < 0 || value >= n)
      throw std::invalid_argument(path + ":" + std::to_string(line_number) + ": expected a row index in 0.." +
                                  std::to_string(n - 1) + ", got '" + line + "'");
    rows.push_back(static_cast<Index>(value));
  }
  if (rows.empty()) throw std::invalid_argument(path + ": no row indices");
  return rows;
}

std::vector<Index> group_rows(const std::string& spec, const Dataset& train) {
  if (spec == "all") return {};
  if (spec.rfind("class=", 0) == 0) {
    const std::vector<Index> label = parse_index_list(spec.substr(6), "--subset class=K");
    if (label.size() != 1) throw std::invalid_argument("--subset '" + spec + "': expected one class index");
    std::vector<Index> rows;
    for (Index i = 0; i < train.n(); ++i)
      if (train.y(i) == static_cast<double>(label[0])) rows.push_back(i);
    if (rows.empty()) throw std::invalid_argument("--subset '" + spec + "': no training example has that class");
    return rows;
  }
  if (spec.rfind("rows=", 0) == 0) return read_row_file(spec.substr(5), train.n());
  throw std::invalid_argument("--subset '" + spec + "': expected all, class=K or rows=FILE");
}

std::vector<Index> attribute_columns(const std::string& attribute, const Dataset& train) {
  const bool numeric = attribute.find_first_not_of("0123456789, ") == std::string::npos;
  if (numeric) {
    std::vector<Index> columns = parse_index_list(attribute, "--attribute");
    for (Index j : columns)
      if (j >= train.d())
        throw std::invalid_argument("--attribute: column " + std::to_string(j) + " is outside 0.." +
                                    std::to_string(train.d() - 1) + " (d after preprocessing)");
    return columns;
  }
  if (train.attributes.empty())
    throw std::invalid_argument("--attribute '" + attribute +
                                "': these data have no named attributes (after PCA, or images); give column "
                                "indices instead");
  return train.attribute(attribute).columns;
}

}  // namespace

std::vector<Index> parse_index_list(const std::string& text, const std::string& what) {
  std::vector<Index> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto begin = item.find_first_not_of(' ');
    const auto end = item.find_last_not_of(' ');
    const std::string trimmed = begin == std::string::npos ? "" : item.substr(begin, end - begin + 1);
    if (trimmed.empty() || trimmed.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(what + ": expected non-negative integers separated by commas, got '" + text + "'");
    values.push_back(static_cast<Index>(std::stoll(trimmed)));
  }
  if (values.empty()) throw std::invalid_argument(what + ": empty list");
  return values;
}

void MeasureOptions::validate() const {
  data.validate();
  preprocess.validate();
  fit.validate();
  fil.validate();
  if (releases < 1)
    throw std::invalid_argument("releases = " + std::to_string(releases) + ": must be >= 1");
}

MeasureOptions default_measure_options() {
  MeasureOptions options;
  options.data.data = "fashion-mnist";
  options.data.classes = {0, 1};
  options.preprocess.scale_pixels = true;
  options.preprocess.row_scaling = RowScaling::kGlobalMax;
  options.preprocess.pca_components = 20;
  options.fit.kind = ModelKind::kLogistic;
  options.fit.l2 = 8e-4;
  options.fil.sigma = 1.0;
  return options;
}

MeasureResult measure(const MeasureOptions& options) {
  options.validate();
  MeasureResult result;
  // Stages: load, preprocess, fit, FIL (the long ones on raw pixels are fit and FIL).
  Progress progress("measure", 4, !options.progress);
  PreparedData prepared = load_and_preprocess(options.data, options.preprocess);
  result.data = std::move(prepared.data);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
  progress.advance(2);
  const Dataset& train = result.data.train;

  auto start = Clock::now();
  result.model = fit(train, options.fit);
  result.seconds["fit"] = seconds_since(start);
  progress.advance();

  start = Clock::now();
  result.sigma = composed_sigma(std::vector<double>(static_cast<std::size_t>(options.releases), options.fil.sigma));
  FilOptions fil_options = options.fil;
  fil_options.sigma = result.sigma;
  const FisherInformationLoss fil(result.model, train, VectorXd(), fil_options);
  result.fil = fil.per_example();
  if (!options.attribute.empty()) {
    result.attribute_columns = attribute_columns(options.attribute, train);
    const CoordinateSelection selection = CoordinateSelection::columns(result.attribute_columns);
    result.attribute_eta = fil.per_example_selection(selection);
    result.attribute_fil = fil.subset({}, selection);
  }
  const CoordinateSelection whole = CoordinateSelection::example(options.fil.label);
  for (const std::string& spec : options.subsets)
    result.groups.push_back({spec, fil.subset(group_rows(spec, train), whole)});
  result.seconds["fil"] = seconds_since(start);
  progress.finish();

  result.loss = per_example_loss(result.model, train);
  result.release = perturb_output(result.model, options.fil.sigma, options.seed);
  const bool classification = !result.model.regression;
  result.train_accuracy = classification ? accuracy(result.model, train) : std::nan("");
  result.test_accuracy = classification ? accuracy(result.model, result.data.test) : std::nan("");
  result.train_mse = mean_squared_error(result.model, train);
  result.test_mse = mean_squared_error(result.model, result.data.test);
  return result;
}

namespace {
nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}
nlohmann::json subset_json(const SubsetFil& fil) {
  return {{"eta", fil.eta}, {"dfil", fil.dfil}, {"examples", fil.examples}, {"coordinates", fil.coordinates}};
}
}  // namespace

nlohmann::json MeasureResult::summary(const MeasureOptions& options) const {
  nlohmann::json json;
  json["filkit_version"] = version();
  json["command"] = "measure";
  json["seed"] = options.seed;
  json["n"] = data.train.n();
  json["n_test"] = data.test.n();
  json["d"] = data.train.d();
  json["private_dims_per_example"] = fil.private_dims;
  json["settings"] = {
      {"data", options.data.data},
      {"source", data.train.source},
      {"classes", options.data.classes},
      {"target", options.data.target},
      {"regression", options.data.regression},
      {"test_fraction", options.data.test_fraction},
      {"preprocessing", preprocessor.to_json()},
      {"model", to_string(options.fit.kind)},
      {"l2", options.fit.l2},
      {"intercept", options.fit.intercept},
      {"gradient_tolerance", options.fit.gradient_tolerance},
      {"sigma", options.fil.sigma},
      {"releases", options.releases},
      {"composed_sigma", sigma},
      {"label", to_string(options.fil.label)},
      {"attribute", options.attribute},
      {"subsets", options.subsets},
  };
  json["fit"] = {{"iterations", model.iterations}, {"gradient_norm", model.gradient_norm}};
  json["eta"] = summarize(fil.eta).to_json();
  json["dfil"] = summarize(fil.dfil).to_json();
  json["example_mse_bound"] = summarize(fil.example_mse_bound()).to_json();
  json["train_accuracy"] = number_or_null(train_accuracy);
  json["test_accuracy"] = number_or_null(test_accuracy);
  json["train_mse"] = number_or_null(train_mse);
  json["test_mse"] = number_or_null(test_mse);
  if (attribute_eta.size()) {
    json["attribute"] = {{"columns", attribute_columns},
                         {"per_example_eta", summarize(attribute_eta).to_json()},
                         {"all_examples", subset_json(attribute_fil)}};
  }
  nlohmann::json group_list = nlohmann::json::array();
  for (const GroupFil& group : groups) {
    nlohmann::json entry = subset_json(group.fil);
    entry["group"] = group.name;
    group_list.push_back(entry);
  }
  json["groups"] = group_list;
  json["seconds"] = seconds;
  return json;
}

std::vector<std::string> MeasureResult::table_header() const {
  std::vector<std::string> header = {"index", "label", "eta", "dfil", "attribute_mse_bound", "example_mse_bound",
                                     "loss", "gradient_norm"};
  if (attribute_eta.size()) header.push_back("attribute_eta");
  return header;
}

std::vector<std::vector<double>> MeasureResult::table_rows() const {
  const VectorXd attribute_bound = fil.attribute_mse_bound(), example_bound = fil.example_mse_bound();
  std::vector<std::vector<double>> rows;
  rows.reserve(static_cast<std::size_t>(data.train.n()));
  for (Index i = 0; i < data.train.n(); ++i) {
    std::vector<double> row = {static_cast<double>(i), data.train.y(i), fil.eta(i), fil.dfil(i), attribute_bound(i),
                               example_bound(i), loss.loss(i), loss.gradient_norm(i)};
    if (attribute_eta.size()) row.push_back(attribute_eta(i));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace filkit
