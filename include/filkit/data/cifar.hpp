// The CIFAR-10 binary format ("CIFAR-10 binary version", https://www.cs.toronto.edu/~kriz/cifar.html):
// data_batch_1.bin .. data_batch_5.bin (the 50000 training images) and test_batch.bin (10000).
// A file is a sequence of 3073-byte records: one label byte 0..9, then the 3072 pixel bytes of a
// 32 x 32 colour image, its 1024 red values, then 1024 green, then 1024 blue, each plane row by
// row. That is the channel-major layout of a Dataset row (ImageShape 3 x 32 x 32,
// data/dataset.hpp), so a record's pixel bytes are a row as they stand.
#pragma once

#include "filkit/base/resources.hpp"
#include "filkit/data/dataset.hpp"

#include <string>
#include <vector>

namespace filkit {

/// Bytes of one CIFAR-10 record: a label byte and 3 x 32 x 32 pixel bytes.
inline constexpr Index kCifar10RecordBytes = 1 + 3 * 32 * 32;

/// The training files, then the test file, of CIFAR-10's binary version.
const std::vector<std::string>& cifar10_train_files();
const std::string& cifar10_test_file();

/// CIFAR-10's class names by label: airplane, automobile, bird, cat, deer, dog, frog, horse,
/// ship, truck.
const std::vector<std::string>& cifar10_class_names();

/// The records of the CIFAR-10 binary files `paths`, in file order, whose label is one of
/// `classes` (every record when empty; labels are kept as read, 0..9): raw pixels 0..255, image
/// 3 x 32 x 32, the class names of cifar10_class_names(). `source` is left to the caller.
/// Throws std::invalid_argument naming the file for one that cannot be read, whose size is not a
/// positive multiple of 3073 bytes (CIFAR-100's 3074-byte records are named as such), or with a
/// label above 9 (naming the record); and, before allocating, when a file with the images kept
/// so far, or the kept images' doubles, need more than `max_memory`. Only the kept records'
/// bytes are held while the files are read, one at a time.
Dataset read_cifar10_batches(const std::vector<std::string>& paths, const std::vector<int>& classes,
                             ByteSize max_memory = default_memory_budget());

}  // namespace filkit
