// The stages every job starts with: load a dataset, fit its preprocessing on the training split
// and apply it to both splits, timing each stage for the outputs.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/preprocessing.hpp"

#include <chrono>
#include <map>
#include <string>

namespace filkit {

struct PreparedData {
  DatasetSplit data;                      ///< after preprocessing
  Preprocessor preprocessor;              ///< fitted on the training split
  std::map<std::string, double> seconds;  ///< wall time of "load" and "preprocess"
};

/// load_dataset, then preprocess; throws whatever they throw.
PreparedData load_and_preprocess(const DataOptions& data, const PreprocessOptions& preprocessing);

/// Wall-clock seconds since `start`.
double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace filkit
