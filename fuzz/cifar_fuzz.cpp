// CIFAR-10's binary batches (src/data/cifar.cpp): record sizes, labels, the class selection and
// the memory budget. The first byte picks the classes kept (bit k: class k, 0: every class, 9
// bits used); the rest is the file, read once alone and once as two batches.
#include "filkit/data/cifar.hpp"

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::vector<int> classes;
  for (int k = 0; k < 8; ++k)
    if (data[0] & (1u << k)) classes.push_back(k + 1);
  const std::string path = filkit::fuzz::write_input("data_batch_1.bin", filkit::fuzz::as_text(data + 1, size - 1));
  filkit::Dataset one;
  if (!filkit::fuzz::runs_or_rejects(
          [&] { one = filkit::read_cifar10_batches({path}, classes, filkit::fuzz::kFuzzMemory); }))
    return 0;
  FILKIT_FUZZ_CHECK(one.image.has_value() && one.image->size() == one.d() && one.d() == 3 * 32 * 32);
  FILKIT_FUZZ_CHECK(one.X.rows() == one.y.size());
  for (filkit::Index i = 0; i < one.y.size(); ++i) {
    FILKIT_FUZZ_CHECK(one.y(i) >= 0 && one.y(i) <= 9);
    if (!classes.empty())
      FILKIT_FUZZ_CHECK(std::find(classes.begin(), classes.end(), static_cast<int>(one.y(i))) != classes.end());
  }
  FILKIT_FUZZ_CHECK(((one.X.array() >= 0) && (one.X.array() <= 255)).all());
  // The same file twice: twice the records, in file order.
  filkit::Dataset two;
  if (!filkit::fuzz::runs_or_rejects([&] {
        two = filkit::read_cifar10_batches({path, path}, classes, filkit::fuzz::kFuzzMemory);
      }))
    return 0;  // twice the images may exceed the budget
  FILKIT_FUZZ_CHECK(two.n() == 2 * one.n());
  FILKIT_FUZZ_CHECK(two.X.topRows(one.n()) == one.X && two.X.bottomRows(one.n()) == one.X);
  return 0;
}
