#include "filkit/jobs/task.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/timing.hpp"
#include "filkit/data/tabular_datasets.hpp"
#include "filkit/leakage/result_checks.hpp"

#include <nlohmann/json.hpp>
#include <chrono>
#include <cstdint>

namespace filkit {

namespace {
bool is_regression(const DataPipelineOptions& data) {
  const TabularDatasetInfo* builtin = find_tabular_dataset(data.data);
  return data.regression || (builtin != nullptr && builtin->task == TabularTask::kRegression);
}

// The fit (Newton's Hessian and its factorisation) and FIL (the FIM's eigenvectors) each hold
// p x p matrices for p parameters: refused before loading work starts on them if they cannot fit.
void check_model_memory(const Dataset& train, const FitOptions& fit, ByteSize budget) {
  const auto d = static_cast<std::uint64_t>(train.d() + (fit.intercept ? 1 : 0));
  const std::uint64_t classes =
      fit.kind == ModelKind::kSoftmax && train.n() > 0 ? static_cast<std::uint64_t>(train.y.maxCoeff()) + 1 : 1;
  const std::uint64_t p = d * classes;
  check_memory(p > (std::uint64_t{1} << 28) ? UINT64_MAX : 3 * p * p * sizeof(double), budget,
               "a model of " + std::to_string(p) + " parameters (" + std::to_string(train.d()) +
                   " features; three p x p matrices for the fit and FIL)");
}

}  // namespace

void TaskOptions::resolve() {
  data.resolve();
  if (!model) model = is_regression(data) ? ModelKind::kLeastSquares : ModelKind::kLogistic;
}

FitOptions TaskOptions::fit_options() const {
  FitOptions options = fit;
  options.regression = is_regression(data);
  options.kind = model.value_or(options.regression ? ModelKind::kLeastSquares : ModelKind::kLogistic);
  return options;
}

void TaskOptions::validate() const {
  data.validate();
  fit_options().validate();
}

Task prepare_task(const TaskOptions& options, std::uint64_t seed, const Communicator& comm) {
  Task task;
  PreparedData prepared = load_and_preprocess(options.data, seed, comm);
  task.data = std::move(prepared.data);
  task.preprocessor = std::move(prepared.preprocessor);
  task.seconds = std::move(prepared.seconds);
  task.fit = options.fit_options();
  task.ranks = comm.size();
  task.n_train = comm.sum(task.data.train.n());
  task.n_test = comm.sum(task.data.test.n());
  if (task.n_train < comm.size())  // every rank needs an example: its shard's statistics are formed from them
    throw ResourceError(std::to_string(comm.size()) + " MPI ranks for " + std::to_string(task.n_train) +
                        " training examples: run on at most as many ranks as examples");
  check_model_memory(task.data.train, task.fit, options.data.max_memory);
  return task;
}

nlohmann::json data_rows_json(const DatasetSplit& data) {
  return {{"dropped_rows", {{"train", data.train.dropped_rows}, {"test", data.test.dropped_rows}}},
          {"unseen_level_rows", data.test.unseen_level_rows}};
}

nlohmann::json Task::to_json() const {
  nlohmann::json json = {{"source", data.train.source},
                         {"n", n_train},
                         {"n_test", n_test},
                         {"d", data.train.d()},
                         {"preprocessing", preprocessor.to_json()}};
  json.update(data_rows_json(data));
  return json;
}

Model fit_stage(const Dataset& train, const FitOptions& fit_options, const Communicator& comm,
                std::map<std::string, double>& seconds) {
  const auto start = std::chrono::steady_clock::now();
  Model model;
  {
    const StageScope stage("fitting the model");
    model = fit(train, fit_options, VectorXd(), comm);
  }
  require_finite_model(model);
  seconds["fit"] = seconds_since(start);
  return model;
}

}  // namespace filkit
