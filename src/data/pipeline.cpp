#include "filkit/data/pipeline.hpp"

#include "filkit/base/stage.hpp"
#include "filkit/base/timing.hpp"

#include <algorithm>
#include <stdexcept>

namespace filkit {

PreparedData load_and_preprocess(const DataOptions& whole, const PreprocessOptions& preprocessing,
                                 const Communicator& comm) {
  DataOptions data = whole;
  data.shard_rank = comm.rank();
  data.shard_count = comm.size();
  PreparedData prepared;
  auto start = std::chrono::steady_clock::now();
  DatasetSplit raw;
  {
    const StageScope stage("loading the data");
    raw = load_dataset(data);
  }
  prepared.seconds["load"] = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const StageScope stage("preprocessing the data");
  prepared.data = preprocess(raw, preprocessing, &prepared.preprocessor, comm);
  prepared.seconds["preprocess"] = seconds_since(start);
  return prepared;
}

bool is_builtin_image_dataset(const std::string& data) { return !builtin_dataset_name(data).empty(); }

void DataPipelineOptions::resolve() {
  const bool builtin = is_builtin_image_dataset(data);
  if (!classes) classes = builtin ? std::vector<int>{0, 1} : std::vector<int>{};
  if (!pca) pca = builtin ? 20 : 0;
  if (!scale_pixels) scale_pixels = builtin;
}

DataOptions DataPipelineOptions::data_options(std::uint64_t seed) const {
  DataPipelineOptions resolved = *this;
  resolved.resolve();
  DataOptions options;
  options.data = data;
  options.classes = *resolved.classes;
  options.target = target;
  options.categorical = categorical;
  options.drop = drop;
  options.regression = regression;
  options.missing_policy = missing;
  options.unseen_levels = unseen_levels;
  options.test_fraction = test_fraction;
  options.seed = seed;
  options.train_size = train_size;
  options.test_size = test_size;
  options.max_memory = max_memory;
  options.image_layout = image_layout;
  return options;
}

PreprocessOptions DataPipelineOptions::preprocess_options() const {
  DataPipelineOptions resolved = *this;
  resolved.resolve();
  PreprocessOptions options;
  options.scale_pixels = *resolved.scale_pixels;
  options.standardize = standardize;
  options.row_scaling = row_scaling;
  options.pca_components = *resolved.pca;
  return options;
}

void DataPipelineOptions::validate() const {
  data_options(0).validate();
  preprocess_options().validate();
}

PreparedData load_and_preprocess(const DataPipelineOptions& options, std::uint64_t seed, const Communicator& comm) {
  return load_and_preprocess(options.data_options(seed), options.preprocess_options(), comm);
}

}  // namespace filkit
