// NumPy .npy arrays (src/data/npy.cpp): the magic string, the header dict, dtypes and sizes.
#include "filkit/data/npy.hpp"

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = filkit::fuzz::write_input("input.npy", filkit::fuzz::as_text(data, size));
  filkit::fuzz::runs_or_rejects([&] {
    const filkit::NpyArray array = filkit::read_npy(path, filkit::fuzz::kFuzzMemory);
    FILKIT_FUZZ_CHECK(array.shape.size() >= 1 && array.shape.size() <= 4);
    std::size_t count = 1;
    for (const filkit::Index dim : array.shape) {
      FILKIT_FUZZ_CHECK(dim >= 0);
      count *= static_cast<std::size_t>(dim);
    }
    FILKIT_FUZZ_CHECK(array.values.size() == count);
  });
  return 0;
}
