#include "filkit/data/cifar.hpp"

#include "filkit/base/errors.hpp"
#include "base/parsing.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace filkit {

namespace {

constexpr Index kImageBytes = kCifar10RecordBytes - 1;
constexpr Index kCifar100RecordBytes = kCifar10RecordBytes + 1;  // a coarse and a fine label byte

// A file must hold whole records, at least one: checked on the size a regular file reports before
// it is read, and again on the bytes read (a FIFO or device reports no size).
void check_record_bytes(const std::string& path, std::uint64_t size) {
  if (size > 0 && size % kCifar10RecordBytes == 0) return;
  std::string message = "'" + path + "' is not a CIFAR-10 binary batch: its " + std::to_string(size) + " bytes ";
  if (size == 0) {
    message += "hold no record";
  } else {
    message += "are not a multiple of " + std::to_string(kCifar10RecordBytes) +
               " (a record is 1 label byte and 3072 pixel bytes; " + std::to_string(size / kCifar10RecordBytes) +
               " records and " + std::to_string(size % kCifar10RecordBytes) + " bytes over)";
    if (size % kCifar100RecordBytes == 0)
      message += "; its size fits CIFAR-100's 3074-byte records (2 label bytes), which filkit does not read";
  }
  throw DataError(message);
}

}  // namespace

const std::vector<std::string>& cifar10_train_files() {
  static const std::vector<std::string> files = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                                 "data_batch_4.bin", "data_batch_5.bin"};
  return files;
}

const std::string& cifar10_test_file() {
  static const std::string file = "test_batch.bin";
  return file;
}

const std::vector<std::string>& cifar10_class_names() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                 "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

Dataset read_cifar10_batches(const std::vector<std::string>& paths, const std::vector<int>& classes,
                             ByteSize max_memory) {
  const auto classes_known = static_cast<int>(cifar10_class_names().size());
  std::string kept;  // the pixel bytes of the kept records, one after another
  std::vector<double> labels;
  for (const std::string& path : paths) {
    const std::string reading =
        "reading '" + path + "'" +
        (labels.empty() ? "" : " with the " + std::to_string(labels.size()) + " images kept so far");
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) {
      const std::uint64_t size = std::filesystem::file_size(path, error);
      if (!error) {
        check_record_bytes(path, size);
        check_memory(kept.size() + size, max_memory, reading);
      }
    }
    const std::string bytes = detail::read_file_bytes(path, max_memory);
    check_record_bytes(path, bytes.size());
    check_memory(kept.size() + bytes.size(), max_memory, reading);
    const auto records = static_cast<Index>(bytes.size()) / kCifar10RecordBytes;
    for (Index r = 0; r < records; ++r) {
      const std::size_t offset = static_cast<std::size_t>(r * kCifar10RecordBytes);
      const int label = static_cast<unsigned char>(bytes[offset]);
      if (label >= classes_known) {
        throw DataError("'" + path + "': record " + std::to_string(r) + " (byte " + std::to_string(offset) +
                        ") has label " + std::to_string(label) + "; CIFAR-10's labels are 0..9");
      }
      if (!classes.empty() && std::find(classes.begin(), classes.end(), label) == classes.end()) continue;
      kept.append(bytes, offset + 1, static_cast<std::size_t>(kImageBytes));
      labels.push_back(label);
    }
  }
  const auto n = static_cast<Index>(labels.size());
  check_memory(saturating_product(static_cast<std::uint64_t>(n) * kImageBytes, sizeof(double)) + kept.size(),
               max_memory, "converting " + std::to_string(n) + " CIFAR-10 images to doubles");
  Dataset data;
  using ByteRows = Eigen::Matrix<unsigned char, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  data.X =
      Eigen::Map<const ByteRows>(reinterpret_cast<const unsigned char*>(kept.data()), n, kImageBytes).cast<double>();
  data.y = Eigen::Map<const VectorXd>(labels.data(), n);
  data.class_names = cifar10_class_names();
  data.image = ImageShape{3, 32, 32};
  return data;
}

}  // namespace filkit
