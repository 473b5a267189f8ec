// The DP-SGD job, load -> preprocess -> train privately with FIL accounting -> summary, as one
// library call so that the command line (`filkit dpsgd`) and the Python bindings compute
// identical numbers (the counterpart of measure.hpp for private SGD).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/data/preprocessing.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace filkit {

struct DpSgdJobOptions {
  DataOptions data;
  /// The MSE bounds 1/dFIL^2 and 1/(4(e^eps - 1)) assume every coordinate lies in an interval of
  /// length 1: for images, pixels / 255 and nothing else (the paper's setting, the CLI's default).
  PreprocessOptions preprocess;
  DpSgdOptions dpsgd;
  /// Show progress on stderr.
  bool progress = false;
  void validate() const;
};

struct DpSgdJobResult {
  DatasetSplit data;  ///< after preprocessing
  Preprocessor preprocessor;
  DpSgdResult training;
  std::map<std::string, double> seconds;  ///< "load", "preprocess", and training's stages

  /// Every setting (data, preprocessing, DP-SGD), seeds, n, d, the accountant's summary at each
  /// checkpoint, accuracies, timings and the version.
  nlohmann::json summary(const DpSgdJobOptions& options) const;
  /// One row per (checkpoint, training example); see DpSgdResult::table_header.
  std::vector<std::string> table_header() const { return training.table_header(); }
  std::vector<std::vector<double>> table_rows() const { return training.table_rows(data.train); }
};

DpSgdJobResult run_dpsgd_job(const DpSgdJobOptions& options);

}  // namespace filkit
