// NumPy .npz archives (src/data/npz.cpp: the zip directory, stored and deflated members, CRC-32;
// each member through src/data/npy.cpp), then the .npz loader (src/data/load.cpp: arrays X, y and
// optionally X_test, y_test) for classification and for regression.
#include "filkit/data/load.hpp"
#include "filkit/data/npy.hpp"

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = filkit::fuzz::write_input("input.npz", filkit::fuzz::as_text(data, size));
  std::map<std::string, filkit::NpyArray> arrays;
  if (!filkit::fuzz::runs_or_rejects([&] { arrays = filkit::read_npz(path, filkit::fuzz::kFuzzMemory); })) return 0;
  for (const auto& [name, array] : arrays) {
    std::size_t count = 1;
    for (const filkit::Index dim : array.shape) count *= static_cast<std::size_t>(dim);
    FILKIT_FUZZ_CHECK(array.values.size() == count);
  }
  for (const bool regression : {false, true}) {
    filkit::DataOptions options;
    options.data = path;
    options.regression = regression;
    options.max_memory = filkit::fuzz::kFuzzMemory;
    filkit::fuzz::runs_or_rejects([&] {
      const filkit::DatasetSplit split = filkit::load_dataset(options);
      FILKIT_FUZZ_CHECK(split.train.d() == split.test.d());
    });
  }
  return 0;
}
