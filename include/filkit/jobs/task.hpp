// What the GLM jobs (measure, irfil, attack, bound, reconstruct) share: a dataset with its
// preprocessing and the GLM that suits its task (least squares for a regression, else logistic,
// unless the model is given).
#pragma once

#include "filkit/data/pipeline.hpp"
#include "filkit/models/glm.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace filkit {

struct TaskOptions {
  DataPipelineOptions data;
  /// least-squares, logistic or softmax; auto = least squares for a regression, else logistic.
  std::optional<ModelKind> model = ModelKind::kLogistic;
  FitOptions fit{};

  /// Resolves the autos of data and model for this dataset (a built-in tabular dataset brings
  /// its own task: regression or classification).
  void resolve();
  /// The fit options with the model kind and `regression` resolved.
  FitOptions fit_options() const;
  void validate() const;
};

template <class Visit>
void visit_fields(TaskOptions& o, Visit&& visit) {
  visit_fields(o.data, visit);
  visit("model", o.model, "least-squares, logistic or softmax; auto = least-squares for a regression, else logistic");
  visit_fields(o.fit, visit);
}

/// The prepared task: preprocessed data and the resolved fit options.
struct Task {
  DatasetSplit data;  ///< after preprocessing
  Preprocessor preprocessor;
  FitOptions fit;
  std::map<std::string, double> seconds;  ///< "load", "preprocess"
  Index n_train = 0;                      ///< training examples of all ranks (data.train is this rank's shard)
  Index n_test = 0;                       ///< test examples of all ranks
  int ranks = 1;                          ///< MPI ranks
  /// n, d, source, dropped rows and the fitted preprocessing, for the summaries.
  nlohmann::json to_json() const;
};

/// The rows a tabular loader left out or encoded with zeros, for every job's summary:
/// {"dropped_rows": {"train": .., "test": ..}, "unseen_level_rows": ..} (DataOptions::missing_policy
/// and unseen_levels; all 0 for images).
nlohmann::json data_rows_json(const DatasetSplit& data);

/// Loads and preprocesses `options.data` with dataset seed `seed`.
/// On several ranks of `comm`: this rank's shard, preprocessed with statistics of all (collective).
Task prepare_task(const TaskOptions& options, std::uint64_t seed, const Communicator& comm = Communicator::local());

/// The "fitting the model" stage of a job: fits `fit` on `train` (collective on `comm`), refuses a
/// model that is not finite, and records its seconds as seconds["fit"].
Model fit_stage(const Dataset& train, const FitOptions& fit, const Communicator& comm,
                std::map<std::string, double>& seconds);

/// The start of a GLM job: its result holding the options as run (`requested`, validated, then
/// the autos of its `task` resolved).
template <class Result, class Options>
Result result_with_resolved_task(const Options& requested) {
  requested.validate();
  Result result;
  result.options = requested;
  result.options.task.resolve();
  return result;
}

/// Moves a prepared task's data, preprocessing, example counts and stage seconds into a result
/// that keeps them as fields of these names (measure's, bound's); returns the fit options left.
template <class Result>
FitOptions move_task_into(Task&& task, Result& result) {
  result.data = std::move(task.data);
  result.preprocessor = std::move(task.preprocessor);
  result.seconds = std::move(task.seconds);
  result.n_train = task.n_train;
  result.n_test = task.n_test;
  return task.fit;
}

}  // namespace filkit
