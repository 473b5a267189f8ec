// What `filkit irfil` and `filkit attack` share: a dataset with its task (regression or
// classification, taken from a built-in tabular dataset or from --regression), the model that
// suits it (--model auto) and the attribute under attack (--attribute, defaulting to a built-in
// dataset's sensitive attribute).
#pragma once

#include "common.hpp"

#include "filkit/data/dataset.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/data/preprocessing.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace filkit::cli {

/// The defaults of the tabular commands: --scale none (tabular features are standardised or
/// one-hot already) and --model auto.
void set_tabular_defaults(DataFlags& data, ModelFlags& model);

struct LoadedTask {
  DatasetSplit data;      ///< after preprocessing
  Preprocessor preprocessor;
  FitOptions fit;         ///< with regression and the model resolved
};

/// Loads and preprocesses the data, resolves the task and the model.
LoadedTask load_task(const DataFlags& data, const ModelFlags& model, std::uint64_t seed);

/// `attribute`, else the sensitive attribute of a built-in tabular dataset; throws
/// std::invalid_argument naming --attribute when neither is there.
std::string attacked_attribute(const DataFlags& data, const std::string& attribute);

/// Data, task and model settings for a summary JSON.
nlohmann::json task_json(const DataFlags& data, const LoadedTask& task);

}  // namespace filkit::cli
