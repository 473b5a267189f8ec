// CSV files through the CSV loader (src/data/csv.cpp, text_table.cpp, tabular_encoder.cpp,
// load.cpp): see tabular_loader.hpp for the input's 4 option bytes.
#include "tabular_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  filkit::fuzz::load_tabular(data, size, "input.csv", filkit::read_csv);
  return 0;
}
