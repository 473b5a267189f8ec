// IDX images and labels (src/data/idx.cpp) from the input as it is: raw files, and gzip streams
// whose header, trailer or data the fuzzer corrupts (seeds in corpus/idx/ hold both).
#include "idx_readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view content = filkit::fuzz::as_text(data, size);
  filkit::fuzz::read_idx_every_way(filkit::fuzz::write_input("input-idx-ubyte", content));
  return 0;
}
