// The CSV and ARFF loaders end to end, shared by csv_fuzz.cpp and arff_fuzz.cpp: the reader
// (data/text_table.hpp), then load_dataset (the split, the tabular encoder, class selection).
//
// The input is 4 bytes of loader options, then the file:
//   byte 0  the target column (index into the header, modulo its width)
//   byte 1  bit 0 regression, bit 1 missing policy "level", bit 2 a categorical column (byte 2),
//           bit 3 a dropped column (byte 3), bits 4-5 the test fraction (0, 0.2, 0.5, 0.9),
//           bits 6-7 classes (all, {0,1}, {1,0}, {0,2})
//   bytes 2-3  the columns of bits 2 and 3; their xor seeds the split
#pragma once

#include "filkit/data/load.hpp"
#include "filkit/data/text_table.hpp"

#include "fuzz_util.hpp"

namespace filkit::fuzz {

inline void load_tabular(const std::uint8_t* data, std::size_t size, const std::string& file_name,
                         TextTable (*read)(const std::string&, ByteSize)) {
  if (size < 4) return;
  const std::string path = write_input(file_name, as_text(data + 4, size - 4));
  TextTable table;
  if (!runs_or_rejects([&] { table = read(path, kFuzzMemory); })) return;
  FILKIT_FUZZ_CHECK(!table.header.empty() && table.types.size() == table.header.size());
  FILKIT_FUZZ_CHECK(table.lines.size() == table.rows.size());
  for (const auto& row : table.rows) FILKIT_FUZZ_CHECK(row.size() == table.header.size());

  const auto column = [&](std::uint8_t byte) { return table.header[byte % table.header.size()]; };
  const unsigned flags = data[1];
  DataOptions options;
  options.data = path;
  options.max_memory = kFuzzMemory;
  options.target = column(data[0]);
  options.regression = flags & 1u;
  options.missing_policy = flags & 2u ? MissingPolicy::kLevel : MissingPolicy::kDrop;
  if ((flags & 4u) && column(data[2]) != options.target) options.categorical.push_back(column(data[2]));
  if ((flags & 8u) && column(data[3]) != options.target && column(data[3]) != column(data[2]))
    options.drop.push_back(column(data[3]));
  options.test_fraction = std::vector<double>{0.0, 0.2, 0.5, 0.9}[(flags >> 4) & 3u];
  const std::vector<std::vector<int>> classes = {{}, {0, 1}, {1, 0}, {0, 2}};
  if (!options.regression) options.classes = classes[(flags >> 6) & 3u];
  options.seed = data[2] ^ data[3];
  runs_or_rejects([&] {
    const DatasetSplit split = load_dataset(options);
    FILKIT_FUZZ_CHECK(split.train.d() == split.test.d());
    FILKIT_FUZZ_CHECK(split.train.n() + split.test.n() + split.train.dropped_rows + split.test.dropped_rows <=
                      static_cast<Index>(table.rows.size()));
  });
}

}  // namespace filkit::fuzz
