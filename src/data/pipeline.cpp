#include "filkit/data/pipeline.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/timing.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <stdexcept>

namespace filkit {

namespace {

/// What a rank loaded, which every rank must agree on: the columns, image shape and classes, its
/// shard's size, and the hash of every row it read when it read the source whole.
nlohmann::json loaded_identity(const DatasetSplit& split, const std::optional<std::uint64_t>& whole_hash) {
  const Dataset& train = split.train;
  nlohmann::json identity = {{"d", train.d()},
                             {"classes", train.class_names},
                             {"features", train.feature_names},
                             {"train", train.n()},
                             {"test", split.test.n()}};
  if (train.image) identity["image"] = to_string(*train.image);
  if (whole_hash) identity["hash"] = std::to_string(*whole_hash);
  return identity;
}

/// Under mpirun, once every rank has loaded its shard: stops every rank, with one message from
/// rank 0, unless they loaded the same data. The settings and the files they name were compared
/// before (check_ranks_agree, jobs/job.hpp); this compares what was read: a source that names no
/// file (a built-in found in each machine's cache) or that was read differently.
void check_ranks_loaded_alike(const DatasetSplit& split, const std::optional<std::uint64_t>& whole_hash,
                              const DataOptions& options, const Communicator& comm) {
  if (!comm.distributed()) return;
  const std::vector<std::string> identities = comm.gather(loaded_identity(split, whole_hash).dump());
  std::exception_ptr problem;
  if (comm.is_root()) {
    std::vector<nlohmann::json> ranks;
    Index train_rows = 0, test_rows = 0;
    for (const std::string& text : identities) {
      ranks.push_back(nlohmann::json::parse(text));
      train_rows += ranks.back()["train"].get<Index>();
      test_rows += ranks.back()["test"].get<Index>();
    }
    const nlohmann::json& zero = ranks.front();
    for (int rank = 0; rank < comm.size() && !problem; ++rank) {
      const nlohmann::json& other = ranks[static_cast<std::size_t>(rank)];
      std::string what;
      if (other["train"].get<Index>() != RowShard::of(train_rows, rank, comm.size()).size() ||
          other["test"].get<Index>() != RowShard::of(test_rows, rank, comm.size()).size())
        what = "loaded " + other["train"].dump() + " + " + other["test"].dump() + " rows, not its share of the " +
               std::to_string(train_rows) + " + " + std::to_string(test_rows) + " all ranks loaded";
      else if (rank == 0) continue;
      else if (other["d"] != zero["d"] || other.value("image", "") != zero.value("image", ""))
        what = "has " + other["d"].dump() + " columns" +
               (other.contains("image") ? " (images " + other["image"].get<std::string>() + ")" : "") + ", rank 0 " +
               zero["d"].dump();
      else if (other["classes"] != zero["classes"] || other["features"] != zero["features"])
        what = "has other class or column names than rank 0";
      else if (other.value("hash", "") != zero.value("hash", ""))
        what = "read other rows than rank 0 (the hash of every row differs)";
      if (what.empty()) continue;
      problem = std::make_exception_ptr(
          OptionError::with_text("data", "the MPI ranks loaded different data: " + option_name("data") + " " +
                                             options.data + " on rank " + std::to_string(rank) + " " + what +
                                             "; every rank must read the same files (docs/distributed.md)"));
    }
  }
  comm.stop_all_if(problem);
}

}  // namespace

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
    std::optional<std::uint64_t> whole_hash;
    raw = load_dataset(data, &whole_hash);
    check_ranks_loaded_alike(raw, whole_hash, data, comm);
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
