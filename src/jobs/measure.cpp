#include "filkit/jobs/measure.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/timing.hpp"

#include "filkit/base/communicator.hpp"

#include "filkit/base/index_list.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/data/pipeline.hpp"
#include "filkit/leakage/result_checks.hpp"

#include "base/parsing.hpp"

#include <iomanip>
#include <ostream>

#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

// The rows listed in `path`, one a line. A row listed twice is refused: a group counts each example
// once, and the repetition is more likely a mistake in the file than a wish to weigh the row twice.
std::vector<Index> read_row_file(const std::string& path, Index n, ByteSize budget) {
  std::istringstream in;
  try {
    in.str(detail::read_file_bytes(path, budget));
  } catch (const std::exception& error) {
    option_error("subset", "rows=" + path, error.what());
  }
  std::vector<Index> rows;
  std::unordered_map<Index, int> first_line;
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
      throw DataError(path + ":" + std::to_string(line_number) + ": expected a row index in 0.." +
                      std::to_string(n - 1) + ", got '" + line + "'");
    const auto [seen, added] = first_line.emplace(static_cast<Index>(value), line_number);
    if (!added)
      throw DataError(path + ":" + std::to_string(line_number) + ": row " + std::to_string(value) +
                      " is listed again (first on line " + std::to_string(seen->second) +
                      "); a group counts each example once");
    rows.push_back(static_cast<Index>(value));
  }
  if (rows.empty()) throw DataError(path + ": no row indices");
  return rows;
}

// The rows of this rank's shard (starting at example `offset` of `n_all`) in the group `spec`;
// every rank reads a row file whole (one index a line) and keeps its own rows.
std::vector<Index> group_rows(const std::string& spec, const Dataset& train, Index offset, Index n_all, ByteSize budget,
                              const Communicator& comm) {
  std::vector<Index> rows;
  if (spec == "all") {
    rows.resize(static_cast<std::size_t>(train.n()));
    std::iota(rows.begin(), rows.end(), Index{0});
  } else if (spec.rfind("class=", 0) == 0) {
    const std::vector<Index> label = parse_index_list(spec.substr(6), "subset class=K");
    if (label.size() != 1) option_error("subset", "'" + spec + "'", "expected one class index");
    for (Index i = 0; i < train.n(); ++i)
      if (train.y(i) == static_cast<double>(label[0])) rows.push_back(i);
  } else if (spec.rfind("rows=", 0) == 0) {
    for (Index row : read_row_file(spec.substr(5), n_all, budget))
      if (row >= offset && row < offset + train.n()) rows.push_back(row - offset);
  } else {
    option_error("subset", "'" + spec + "'", "expected all, class=K or rows=FILE");
  }
  if (comm.sum(static_cast<Index>(rows.size())) == 0)
    option_error("subset", "'" + spec + "'", "no training example has that class");
  return rows;
}

// Rank 0 gets every rank's per-example results, in example order.
void gather_per_example(MeasureResult& result, const Communicator& comm) {
  result.labels = comm.gather(result.data.train.y);
  if (!comm.distributed()) return;
  result.fil.eta = comm.gather(result.fil.eta);
  result.fil.dfil = comm.gather(result.fil.dfil);
  result.loss.loss = comm.gather(result.loss.loss);
  result.loss.gradient_norm = comm.gather(result.loss.gradient_norm);
  if (result.attribute_eta.size()) result.attribute_eta = comm.gather(result.attribute_eta);
}

std::vector<Index> attribute_columns(const std::string& attribute, const Dataset& train) {
  const bool numeric = attribute.find_first_not_of("0123456789, ") == std::string::npos;
  if (numeric) {
    std::vector<Index> columns = parse_index_list(attribute, "attribute");
    for (Index j : columns)
      if (j >= train.d())
        option_error("attribute", "'" + attribute + "'",
                     "column " + std::to_string(j) + " is outside 0.." + std::to_string(train.d() - 1) +
                         " (d after preprocessing)");
    return columns;
  }
  if (train.attributes.empty())
    option_error("attribute", "'" + attribute + "'",
                 "these data have no named attributes (after PCA, or images); give column indices instead");
  return train.attribute(attribute).columns;
}

}  // namespace

void MeasureOptions::validate() const {
  task.validate();
  fil.validate();
  require_positive("releases", releases);
}

MeasureResult run_measure(const MeasureOptions& requested, bool show_progress) {
  MeasureResult result = result_with_resolved_task<MeasureResult>(requested);
  const MeasureOptions& options = result.options;
  const Communicator& comm = Communicator::world();
  show_progress = show_progress && comm.is_root();
  // Stages: load, preprocess, fit, FIL (the long ones on raw pixels are fit and FIL).
  Progress progress("measure", 4, !show_progress);
  Task task = prepare_task(options.task, options.seed, comm);
  result.ranks = task.ranks;
  const FitOptions fit = move_task_into(std::move(task), result);
  const Index offset = comm.exclusive_prefix_sum(result.data.train.n());
  progress.advance(2);
  const Dataset& train = result.data.train;

  result.model = fit_stage(train, fit, comm, result.seconds);
  progress.advance();

  auto start = Clock::now();
  const StageScope stage("computing FIL");
  // R identical releases compose to sigma / sqrt(R) (composed_sigma's precision sum, in closed form).
  result.sigma = composed_sigma({options.fil.sigma}) / std::sqrt(static_cast<double>(options.releases));
  FilOptions fil_options = options.fil;
  fil_options.sigma = result.sigma;
  const FisherInformationLoss fil(result.model, train, VectorXd(), fil_options, comm);
  result.fil = fil.per_example();
  require_finite_fil(result.fil, "FIL");
  if (!options.attribute.empty()) {
    result.attribute_columns = attribute_columns(options.attribute, train);
    const CoordinateSelection selection = CoordinateSelection::columns(result.attribute_columns);
    result.attribute_eta = fil.per_example_selection(selection);
    result.attribute_fil = fil.subset({}, selection);
  }
  const CoordinateSelection whole = CoordinateSelection::example(options.fil.label);
  for (const std::string& spec : options.subsets)
    result.groups.push_back(
        {spec, fil.subset_of_rows(group_rows(spec, train, offset, result.n_train, options.task.data.max_memory, comm),
                                  whole)});
  result.seconds["fil"] = seconds_since(start);
  progress.finish();

  result.loss = per_example_loss(result.model, train);
  result.release = perturb_output(result.model, options.fil.sigma, options.seed);
  const bool classification = !result.model.regression;
  const Dataset& test = result.data.test;
  result.train_accuracy = classification ? accuracy_over_ranks(result.model, train, comm) : std::nan("");
  result.test_accuracy = classification ? accuracy_over_ranks(result.model, test, comm) : std::nan("");
  result.train_mse = mean_squared_error_over_ranks(result.model, train, comm);
  result.test_mse = mean_squared_error_over_ranks(result.model, test, comm);
  gather_per_example(result, comm);
  return result;
}

namespace {
nlohmann::json subset_json(const SubsetFil& fil) {
  return {{"eta", fil.eta}, {"dfil", fil.dfil}, {"examples", fil.examples}, {"coordinates", fil.coordinates}};
}
}  // namespace

nlohmann::json MeasureResult::to_json() const {
  nlohmann::json json = job_summary_header(MeasureJob::name, options.seed);
  json["n"] = n_train;
  json["n_test"] = n_test;
  json["d"] = data.train.d();
  json["private_dims_per_example"] = fil.private_dims;
  json["settings"] = settings_json(options);
  json["source"] = data.train.source;
  json.update(data_rows_json(data));
  json["class_names"] = data.train.class_names;  // label k is class_names[k] (the report's legends)
  json["preprocessing"] = preprocessor.to_json();
  json["composed_sigma"] = sigma;
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

NumericTable MeasureResult::table() const {
  NumericTable table;
  std::vector<std::string>& header = table.header;
  header = {"index", "label", "eta", "dfil", "attribute_mse_bound", "example_mse_bound", "loss", "gradient_norm"};
  if (attribute_eta.size()) header.push_back("attribute_eta");
  const VectorXd attribute_bound = fil.attribute_mse_bound(), example_bound = fil.example_mse_bound();
  std::vector<std::vector<double>>& rows = table.rows;
  rows.reserve(static_cast<std::size_t>(fil.eta.size()));
  for (Index i = 0; i < fil.eta.size(); ++i) {
    std::vector<double> row = {static_cast<double>(i), labels(i),        fil.eta(i),   fil.dfil(i),
                               attribute_bound(i),     example_bound(i), loss.loss(i), loss.gradient_norm(i)};
    if (attribute_eta.size()) row.push_back(attribute_eta(i));
    rows.push_back(std::move(row));
  }
  return table;
}

NumericTable MeasureResult::extra_table(const std::string& name) const {
  if (name != "release_out") return JobResult::extra_table(name);
  NumericTable table{{"coordinate", "released_weight"}, {}};
  const VectorXd w = release.flat();
  for (Index k = 0; k < w.size(); ++k) table.rows.push_back({static_cast<double>(k), w(k)});
  return table;
}

namespace {
void print_row(std::ostream& out, const std::string& name, const Summary& s) {
  out << "  " << std::left << std::setw(18) << name << std::right << std::scientific << std::setprecision(3)
      << std::setw(11) << s.mean << std::setw(11) << s.std << std::setw(11) << s.min << std::setw(11) << s.median
      << std::setw(11) << s.max << "\n";
}
}  // namespace

void MeasureResult::print_summary(std::ostream& out) const {
  const Dataset& train = data.train;
  out << "filkit measure: " << options.task.data.data << ", n = " << n_train << ", d = " << train.d()
      << (ranks > 1 ? " on " + std::to_string(ranks) + " MPI ranks" : "") << ", " << to_string(model.kind)
      << ", lambda = " << options.task.fit.l2 << ", sigma = " << sigma
      << (options.releases > 1 ? " (" + std::to_string(options.releases) + " releases composed)" : "") << ", label "
      << to_string(options.fil.label) << "\n";
  out << "  " << std::left << std::setw(18) << "" << std::right << std::setw(11) << "mean" << std::setw(11) << "std"
      << std::setw(11) << "min" << std::setw(11) << "median" << std::setw(11) << "max"
      << "\n";
  print_row(out, "eta (FIL)", summarize(fil.eta));
  print_row(out, "dFIL", summarize(fil.dfil));
  print_row(out, "MSE bound 1/dFIL^2", summarize(fil.example_mse_bound()));
  if (attribute_eta.size()) print_row(out, "attribute eta", summarize(attribute_eta));
  out << std::defaultfloat << std::setprecision(6);
  if (attribute_eta.size())
    out << "  attribute over all examples: eta = " << attribute_fil.eta << ", dFIL = " << attribute_fil.dfil << "\n";
  for (const GroupFil& group : groups)
    out << "  group " << group.name << " (" << group.fil.examples << " examples): eta = " << group.fil.eta
        << ", dFIL = " << group.fil.dfil << "\n";
  if (!model.regression) out << "  accuracy: train " << train_accuracy << ", test " << test_accuracy << "\n";
  else out << "  MSE: train " << train_mse << ", test " << test_mse << "\n";
  out << "  seconds:";
  for (const auto& [stage, seconds] : seconds) out << " " << stage << " " << std::setprecision(3) << seconds;
  out << "\n";
}

}  // namespace filkit
