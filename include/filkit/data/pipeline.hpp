// The stages every job starts with: load a dataset, fit its preprocessing on the training split
// and apply it to both splits, timing each stage for the outputs.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/preprocessing.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// The data stages as users set them: DataOptions and PreprocessOptions with the choices that
/// depend on the dataset left "auto" (empty) until it is known. Jobs hold one of these; their
/// JSON settings record the resolved values.
struct DataPipelineOptions {
  std::string data = DataOptions{}.data;  // the loader's defaults, written once (load.hpp)
  /// Classes to keep, relabelled 0..K-1 in the order given; empty = all; auto = 0,1 for the
  /// built-in image datasets, all for files.
  std::optional<std::vector<int>> classes{};
  std::string target{};
  std::vector<std::string> categorical{};
  std::vector<std::string> drop{};
  bool regression = false;
  MissingPolicy missing = DataOptions{}.missing_policy;
  UnseenLevelPolicy unseen_levels = DataOptions{}.unseen_levels;
  double test_fraction = DataOptions{}.test_fraction;
  Index train_size = 0;
  Index test_size = 0;
  /// PCA components fitted on the training split; 0 = none; auto = 20 for built-in image datasets,
  /// none for files.
  std::optional<Index> pca{};
  RowScaling row_scaling = RowScaling::kGlobalMax;
  /// Divide pixels by 255; auto = for the built-in image datasets.
  std::optional<bool> scale_pixels{};
  Standardization standardize = PreprocessOptions{}.standardize;
  ByteSize max_memory = DataOptions{}.max_memory;
  std::optional<ImageLayout> image_layout{};

  /// The concrete options for dataset seed `seed` (autos resolved).
  DataOptions data_options(std::uint64_t seed) const;
  PreprocessOptions preprocess_options() const;
  /// Fills in every auto with the value it stands for here.
  void resolve();
  void validate() const;
};

template <class Visit>
void visit_fields(DataPipelineOptions& o, Visit&& visit) {
  visit("data", o.data,
        "A built-in dataset (images: fashion-mnist, mnist, cifar10, or NAME:DIR with its files in DIR; tabular: "
        "income-regression, income-classification, credit-g) or a file: .csv/.arff (with target) or .npz (arrays X, "
        "y, optional X_test, y_test; X a table (n, d) or images (n, H, W), (n, C, H, W), (n, H, W, C))");
  visit("classes", o.classes,
        "Classes to keep, relabelled 0..K-1 in the order given (e.g. 0,1); empty (or 'all') = all; auto = 0,1 for "
        "built-in image datasets, all for files");
  visit("target", o.target, "CSV/ARFF: the target column");
  visit("categorical", o.categorical, "CSV/ARFF: columns to one-hot encode even if numeric");
  visit("drop", o.drop, "CSV/ARFF: columns to ignore");
  visit("regression", o.regression, "The target is real-valued (least squares only)");
  visit("missing", o.missing, "Rows with missing cells: drop, or level (a level of their own)");
  visit("unseen_levels", o.unseen_levels, kUnseenLevelsHelp);
  visit("image_layout", o.image_layout, kImageLayoutHelp);
  visit("test_fraction", o.test_fraction, "Files without a test split: share of rows held out (seeded by seed)");
  visit("train_size", o.train_size, "Keep a random subset of this many training examples (seeded; 0 = all)");
  visit("test_size", o.test_size, "Keep a random subset of this many test examples (seeded; 0 = all)");
  visit("pca", o.pca,
        "PCA to K dimensions fitted on the training split; 0 = none; auto = 20 for built-in image datasets");
  visit("row_scaling", o.row_scaling,
        "Row scaling: none, global-max (divide by the largest training row norm, before PCA), unit-ball");
  visit("scale_pixels", o.scale_pixels, "Divide pixels by 255; auto = for built-in image datasets");
  visit("standardize", o.standardize, kStandardizeHelp);
  visit("max_memory", o.max_memory, kMaxMemoryHelp);
}

/// Whether `data` names a built-in image dataset (fashion-mnist, mnist, cifar10, or NAME:DIR).
bool is_builtin_image_dataset(const std::string& data);

struct PreparedData {
  DatasetSplit data;                      ///< after preprocessing
  Preprocessor preprocessor;              ///< fitted on the training split
  std::map<std::string, double> seconds;  ///< wall time of "load" and "preprocess"
};

/// load_dataset, then preprocess; throws whatever they throw.
/// On several ranks of `comm`, each loads its shard (DataOptions::shard_rank) and the preprocessing
/// is fitted on all of them together (collective).
PreparedData load_and_preprocess(const DataOptions& data, const PreprocessOptions& preprocessing,
                                 const Communicator& comm = Communicator::local());
/// The same for the users' options (resolved first).
PreparedData load_and_preprocess(const DataPipelineOptions& options, std::uint64_t seed,
                                 const Communicator& comm = Communicator::local());

}  // namespace filkit
