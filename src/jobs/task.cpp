#include "filkit/jobs/task.hpp"

#include "filkit/data/tabular_datasets.hpp"

namespace filkit {

namespace {
bool is_regression(const DataPipelineOptions& data) {
  const TabularDatasetInfo* builtin = find_tabular_dataset(data.data);
  return data.regression || (builtin != nullptr && builtin->task == TabularTask::kRegression);
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

Task prepare_task(const TaskOptions& options, std::uint64_t seed) {
  Task task;
  PreparedData prepared = load_and_preprocess(options.data, seed);
  task.data = std::move(prepared.data);
  task.preprocessor = std::move(prepared.preprocessor);
  task.seconds = std::move(prepared.seconds);
  task.fit = options.fit_options();
  return task;
}

nlohmann::json Task::to_json() const {
  return {{"source", data.train.source},
          {"n", data.train.n()},
          {"n_test", data.test.n()},
          {"d", data.train.d()},
          {"dropped_rows", {{"train", data.train.dropped_rows}, {"test", data.test.dropped_rows}}},
          {"preprocessing", preprocessor.to_json()}};
}

}  // namespace filkit
