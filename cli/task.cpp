#include "task.hpp"

#include "filkit/data/pipeline.hpp"
#include "filkit/data/tabular_datasets.hpp"

#include <stdexcept>

namespace filkit::cli {

void set_tabular_defaults(DataFlags& data, ModelFlags& model) {
  data.scale = "none";
  model.model = "auto";
}

LoadedTask load_task(const DataFlags& data, const ModelFlags& model, std::uint64_t seed) {
  const TabularDatasetInfo* builtin = find_tabular_dataset(data.data);
  const bool regression = data.regression || (builtin != nullptr && builtin->task == TabularTask::kRegression);
  LoadedTask task;
  PreparedData prepared = load_and_preprocess(to_data_options(data, seed), to_preprocess_options(data));
  task.data = std::move(prepared.data);
  task.preprocessor = std::move(prepared.preprocessor);
  task.fit = to_fit_options(model, regression);
  return task;
}

std::string attacked_attribute(const DataFlags& data, const std::string& attribute) {
  if (!attribute.empty()) return attribute;
  if (const TabularDatasetInfo* builtin = find_tabular_dataset(data.data)) return builtin->sensitive_attribute;
  throw std::invalid_argument("--attribute is required for '" + data.data +
                              "' (only the built-in tabular datasets have a default sensitive attribute)");
}

nlohmann::json task_json(const DataFlags& data, const LoadedTask& task) {
  return {{"data", data.data},
          {"source", task.data.train.source},
          {"n", task.data.train.n()},
          {"n_test", task.data.test.n()},
          {"d", task.data.train.d()},
          {"dropped_rows", {{"train", task.data.train.dropped_rows}, {"test", task.data.test.dropped_rows}}},
          {"missing", data.missing},
          {"test_fraction", data.test_fraction},
          {"preprocessing", task.preprocessor.to_json()},
          {"model", to_string(task.fit.kind)},
          {"regression", task.fit.regression},
          {"l2", task.fit.l2},
          {"intercept", task.fit.intercept},
          {"gradient_tolerance", task.fit.gradient_tolerance}};
}

}  // namespace filkit::cli
