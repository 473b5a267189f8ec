// The CIFAR-10 binary format (src/data/cifar.cpp) on files written here record by record: the
// record layout (label byte, then red, green and blue planes row by row) against known pixels,
// class selection, every malformed file, the memory budget, and the built-in `cifar10` found
// through FILKIT_DATA_DIR or named as cifar10:DIR.
#include "filkit/data/cifar.hpp"
#include "filkit/data/load.hpp"

#include "test_util.hpp"

namespace filkit {
namespace {

using testing::ScopedEnvironment;
using testing::TempDir;

// The pixel of record `index` at channel c, row h, column w: a value that says where it was.
unsigned char pixel(int index, int c, int h, int w) {
  return static_cast<unsigned char>(7 * index + 5 * c + 3 * h + w);
}

// One CIFAR-10 record: the label byte, then 1024 red, 1024 green, 1024 blue bytes, each plane
// row by row.
std::string record(int label, int index) {
  std::string bytes(1, static_cast<char>(label));
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 32; ++h)
      for (int w = 0; w < 32; ++w) bytes += static_cast<char>(pixel(index, c, h, w));
  return bytes;
}

// Records with the given labels; record k has index first + k.
std::string batch(const std::vector<int>& labels, int first = 0) {
  std::string bytes;
  for (std::size_t k = 0; k < labels.size(); ++k) bytes += record(labels[k], first + static_cast<int>(k));
  return bytes;
}

// A miniature CIFAR-10 in `dir`: training batch b (1..5) holds labels b - 1 and b + 4 (record
// indices 10 b, 10 b + 1), the test batch labels 0, 1, 2, 9.
void write_tiny_cifar(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (int b = 1; b <= 5; ++b) {
    std::ofstream(dir + "/data_batch_" + std::to_string(b) + ".bin", std::ios::binary) << batch({b - 1, b + 4}, 10 * b);
  }
  std::ofstream(dir + "/test_batch.bin", std::ios::binary) << batch({0, 1, 2, 9}, 100);
}

TEST(Cifar10, ReadsEachRecordAsAChannelMajorRowWithItsLabel) {
  TempDir dir;
  const std::string path = dir.write("data_batch_1.bin", batch({6, 0, 9}));
  const Dataset data = read_cifar10_batches({path}, {});
  ASSERT_EQ(data.n(), 3);
  ASSERT_EQ(data.d(), 3072);
  EXPECT_EQ(data.image, (ImageShape{3, 32, 32}));
  EXPECT_EQ(data.y, Eigen::Vector3d(6, 0, 9));
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 32; h += 7)
        for (int w = 0; w < 32; w += 5)
          ASSERT_EQ(data.X(i, (c * 32 + h) * 32 + w), pixel(i, c, h, w)) << i << " " << c << " " << h << " " << w;
  EXPECT_EQ(data.class_names, (std::vector<std::string>{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog",
                                                        "horse", "ship", "truck"}));
  EXPECT_NO_THROW(data.validate());
}

TEST(Cifar10, KeepsTheRecordsOfTheListedClassesInFileOrder) {
  TempDir dir;
  const std::string first = dir.write("a.bin", batch({3, 5, 3}, 0));
  const std::string second = dir.write("b.bin", batch({5, 1}, 3));
  const Dataset data = read_cifar10_batches({first, second}, {5, 3});
  EXPECT_EQ(data.y, (VectorXd(4) << 3, 5, 3, 5).finished());  // labels as read: selection relabels later
  EXPECT_EQ(data.X(3, 0), pixel(3, 0, 0, 0));                 // the first record of b.bin
}

TEST(Cifar10, RefusesFilesThatAreNotWholeRecordsNamingTheFileAndTheCount) {
  TempDir dir;
  const std::string ragged = dir.write("ragged.bin", batch({1, 2}) + "12345");
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({ragged}, {}), "'" + ragged + "'", "6151 bytes",
                          "not a multiple of 3073", "2 records and 5 bytes over");
  const std::string empty = dir.write("empty.bin", "");
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({empty}, {}), "'" + empty + "'", "hold no record");
  const std::string cifar100 = dir.write("train.bin", std::string(3 * 3074, '\0'));
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({cifar100}, {}), "not a multiple of 3073", "CIFAR-100");
  EXPECT_THROW_NAMING(read_cifar10_batches({dir.file("absent.bin")}, {}), ResourceError, "cannot open", "absent.bin");
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({dir.file("")}, {}), "is a directory");
}

TEST(Cifar10, RefusesALabelAboveNineNamingTheRecord) {
  TempDir dir;
  const std::string path = dir.write("bad.bin", batch({0, 10, 1}));
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({path}, {}), "'" + path + "'", "record 1", "byte 3073", "label 10",
                          "0..9");
  // Also when the record's class is not kept: a corrupt file is refused whatever is selected.
  EXPECT_INVALID_ARGUMENT(read_cifar10_batches({path}, {0, 1}), "label 10");
}

TEST(Cifar10, ChecksTheMemoryBudgetBeforeReadingAndBeforeConverting) {
  TempDir dir;
  const std::string path = dir.write("two.bin", batch({1, 2}));  // 6146 bytes
  EXPECT_MEMORY_LIMIT(read_cifar10_batches({path}, {}, ByteSize{6000}), "reading '" + path + "'", "max_memory = 6000");
  // A second file counts the bytes kept from the first.
  EXPECT_MEMORY_LIMIT(read_cifar10_batches({path, path}, {}, ByteSize{10000}), "reading '" + path + "'",
                      "2 images kept");
  // Reading fits, the doubles (2 x 3072 x 8 bytes) do not.
  EXPECT_MEMORY_LIMIT(read_cifar10_batches({path}, {}, ByteSize{20000}), "converting 2 CIFAR-10 images to doubles",
                      "max_memory");
  EXPECT_EQ(read_cifar10_batches({path}, {2}, ByteSize{40000}).n(), 1);  // one image's doubles fit
}

TEST(Cifar10, IsABuiltInFoundUnderFilkitDataDir) {
  TempDir dir;
  write_tiny_cifar(dir.file("data/cifar10"));
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("data"));
  EXPECT_EQ(builtin_dataset_dir("cifar10"), dir.file("data") + "/cifar10");
  DataOptions options;
  options.data = "cifar10";
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 10);
  EXPECT_EQ(split.test.n(), 4);
  EXPECT_EQ(split.train.image, (ImageShape{3, 32, 32}));
  EXPECT_EQ(split.test.image, (ImageShape{3, 32, 32}));
  EXPECT_EQ(split.train.y, (VectorXd(10) << 0, 5, 1, 6, 2, 7, 3, 8, 4, 9).finished());
  EXPECT_EQ(split.train.X(2, 1), pixel(20, 0, 0, 1));  // batch 2's first record
  EXPECT_NE(split.train.source.find("cifar10 train"), std::string::npos) << split.train.source;
  EXPECT_NE(split.test.source.find("test_batch.bin"), std::string::npos) << split.test.source;
  // Classes are kept while reading and relabelled in the order given.
  options.classes = {9, 0};
  const DatasetSplit picked = load_dataset(options);
  EXPECT_EQ(picked.train.y, (VectorXd(2) << 1, 0).finished());
  EXPECT_EQ(picked.test.y, (VectorXd(2) << 1, 0).finished());
  EXPECT_EQ(picked.train.class_names, (std::vector<std::string>{"truck", "airplane"}));
  EXPECT_EQ(picked.train.image, (ImageShape{3, 32, 32}));
  options.classes = {0, 10};
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "classes: contains 10", "cifar10 (labels 0..9)");
}

TEST(Cifar10, IsReadFromTheArchivesDirectoryOrOneNamedAfterAColon) {
  TempDir dir;
  write_tiny_cifar(dir.file("data/cifar10/cifar-10-batches-bin"));
  write_tiny_cifar(dir.file("mine"));
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("data"));
  EXPECT_EQ(builtin_dataset_dir("cifar10"), dir.file("data") + "/cifar10/cifar-10-batches-bin");
  DataOptions options;
  options.data = "cifar10:" + dir.file("mine");
  const DatasetSplit split = load_dataset(options);
  EXPECT_EQ(split.train.n(), 10);
  EXPECT_NE(split.train.source.find(dir.file("mine")), std::string::npos) << split.train.source;
  options.regression = true;
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "regression = true", "classification");
}

TEST(Cifar10, MissingBatchFilesAreNamedWithEveryPlaceSearched) {
  TempDir dir;
  write_tiny_cifar(dir.file("data/cifar10"));
  std::filesystem::remove(dir.file("data/cifar10/data_batch_3.bin"));
  std::filesystem::remove(dir.file("data/cifar10/test_batch.bin"));
  const ScopedEnvironment data_dir("FILKIT_DATA_DIR", dir.file("data"));
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.file("cache"));
  EXPECT_THROW_NAMING(builtin_dataset_dir("cifar10"), ResourceError, "built-in dataset 'cifar10' not found",
                      dir.file("data") + "/cifar10/cifar-10-batches-bin", dir.file("cache") + "/filkit/cifar10",
                      "'" + dir.file("data") + "/cifar10' lacks 'data_batch_3.bin', 'test_batch.bin'",
                      "data_batch_1.bin .. data_batch_5.bin and test_batch.bin", "cifar-10-binary.tar.gz",
                      "cifar10:DIR", "FILKIT_DATA_DIR");
  DataOptions options;
  options.data = "cifar10:" + dir.file("data/cifar10");
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "lacks 'data_batch_3.bin', 'test_batch.bin' of cifar10");
  options.data = "cifar10:" + dir.file("nowhere");
  EXPECT_INVALID_ARGUMENT(load_dataset(options), "nowhere' (from 'cifar10:", "is not a directory", "test_batch.bin");
}

}  // namespace
}  // namespace filkit
