#include "filkit/base/errors.hpp"
#include "data/npy_format.hpp"

#include "base/parsing.hpp"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace filkit {

namespace {

// The element bytes are copied as they are, so the host must share the files' byte order.
static_assert(std::endian::native == std::endian::little, "filkit reads little-endian .npy data");

constexpr std::string_view kMagic = "\x93NUMPY";

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw DataError("'" + where + "' is not a readable .npy array: " + what);
}

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<Index> shape;
};

// A reader of the Python dict literal that numpy writes as the header, e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!accept('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        header.descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        header.shape = tuple();
        seen_shape = true;
      } else {
        fail(where_, "unexpected header key '" + key + "'");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!seen_descr || !seen_order || !seen_shape) {
      fail(where_, "the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c))
      fail(where_, std::string("malformed header: expected '") + c + "' at " + std::to_string(pos_) + " in " +
                       std::string(text_));
  }
  std::string string_literal() {
    skip_space();
    const char quote = pos_ < text_.size() ? text_[pos_] : '\0';
    if (quote != '\'' && quote != '"') expect('\'');
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail(where_, "malformed header: unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    skip_space();
    for (const bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail(where_, "malformed header: expected True or False for 'fortran_order'");
  }
  std::vector<Index> tuple() {
    std::vector<Index> values;
    expect('(');
    while (!accept(')')) {
      skip_space();
      const std::size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ == start || pos_ - start > 18) {  // 19 digits could overflow a 64-bit Index
        fail(where_, "malformed header: expected a dimension in 'shape'");
      }
      values.push_back(std::stoll(std::string(text_.substr(start, pos_ - start))));
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return values;
  }

  std::string_view text_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

std::uint32_t little_endian(std::string_view bytes, std::size_t offset, std::size_t width) {
  std::uint32_t value = 0;
  for (std::size_t k = 0; k < width; ++k) {
    value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[offset + k])) << (8 * k);
  }
  return value;
}

// The header text and where the data starts, for format versions 1.0 (2-byte header length),
// 2.0 and 3.0 (4-byte length; 3.0 allows UTF-8 in the header).
std::pair<std::string_view, std::size_t> split_header(std::string_view bytes, const std::string& where) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic) {
    fail(where, "expected the magic string \\x93NUMPY at the start");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail(where,
         "format version " + std::to_string(major) + "." + std::to_string(minor) + " is not one of 1.0, 2.0, 3.0");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) fail(where, "truncated header");
  const std::size_t start = 8 + length_bytes;
  const std::size_t length = little_endian(bytes, 8, length_bytes);
  if (bytes.size() - start < length) {
    fail(where, "truncated header: expected " + std::to_string(length) + " header bytes");
  }
  return {bytes.substr(start, length), start + length};
}

template <class T>
void convert(const char* data, std::size_t count, double* out) {
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(value);
  }
}

struct Dtype {
  std::string_view descr;
  std::size_t size;
  void (*convert)(const char*, std::size_t, double*);
};
constexpr Dtype kDtypes[] = {
    {"<f8", 8, convert<double>},       {"<f4", 4, convert<float>},        {"|u1", 1, convert<std::uint8_t>},
    {"<i8", 8, convert<std::int64_t>}, {"<i4", 4, convert<std::int32_t>},
};

const Dtype& find_dtype(const std::string& descr, const std::string& where) {
  for (const Dtype& dtype : kDtypes) {
    if (dtype.descr == descr) return dtype;
  }
  fail(where, "dtype '" + descr + "' is not supported; supported: '<f8', '<f4', '|u1', '<i8', '<i4'");
}

void check_layout(const NpyHeader& header, const std::string& where) {
  if (header.fortran_order) {
    fail(where, "the array is in Fortran order; save it in C order (numpy.ascontiguousarray)");
  }
  if (header.shape.empty() || header.shape.size() > 4) {
    fail(where, "the array has " + std::to_string(header.shape.size()) +
                    " dimensions; only 1-D to 4-D arrays are supported (labels, tables, images)");
  }
}

// The layout a .npy header declares: its dtype, shape and where the data start.
struct NpyLayout {
  NpyHeader header;
  const Dtype* dtype = nullptr;
  std::size_t data_start = 0;
  std::uint64_t count = 1;  // values; saturating, as only a corrupt header declares 2^64
};

NpyLayout read_layout(std::string_view bytes, const std::string& where) {
  const auto [header_text, data_start] = split_header(bytes, where);
  NpyLayout layout;
  layout.header = HeaderParser(header_text, where).parse();
  layout.dtype = &find_dtype(layout.header.descr, where);
  check_layout(layout.header, where);
  layout.data_start = data_start;
  for (Index dim : layout.header.shape)
    layout.count = saturating_product(layout.count, static_cast<std::uint64_t>(dim));
  return layout;
}

std::uint64_t data_bytes(const NpyLayout& layout) { return saturating_product(layout.count, layout.dtype->size); }

// "(3, 4)" for the element at flat index k of a 2-D array, "(3)" of a 1-D one, "(0, 2, 1, 5)" of
// a 4-D one (C order: the last index runs fastest).
std::string element_position(const std::vector<Index>& shape, std::size_t k) {
  auto index = static_cast<Index>(k);
  std::vector<Index> indices(shape.size());
  for (std::size_t axis = shape.size(); axis-- > 1;) {  // an element exists, so no dimension is 0
    indices[axis] = index % shape[axis];
    index /= shape[axis];
  }
  indices[0] = index;
  std::string text;
  for (const Index i : indices) text += (text.empty() ? "(" : ", ") + std::to_string(i);
  return text + ")";
}

// NaN, Inf and magnitudes beyond kMaxInputMagnitude are refused with the element's position.
void check_values(const NpyArray& array, const std::string& where) {
  for (std::size_t k = 0; k < array.values.size(); ++k) {
    if (std::abs(array.values[k]) <= kMaxInputMagnitude) continue;  // false for NaN
    throw DataError("'" + where + "': element " + element_position(array.shape, k) + " " +
                    input_value_problem(array.values[k]));
  }
}

}  // namespace

namespace detail {

NpySize npy_size(std::string_view leading_bytes, const std::string& where) {
  const NpyLayout layout = read_layout(leading_bytes, where);
  const std::uint64_t bytes = data_bytes(layout);
  return {bytes == UINT64_MAX ? bytes : layout.data_start + bytes, layout.count};
}

NpyDataLayout npy_data_layout(std::string_view leading_bytes, const std::string& where) {
  const NpyLayout layout = read_layout(leading_bytes, where);
  return {layout.header.shape, layout.dtype->size, layout.data_start, layout.dtype->convert};
}

NpyArray parse_npy(std::string_view bytes, const std::string& where, ByteSize max_memory) {
  const NpyLayout layout = read_layout(bytes, where);
  const std::uint64_t expected = data_bytes(layout);
  const auto found = static_cast<std::uint64_t>(bytes.size() - layout.data_start);
  if (found != expected) {
    fail(where, "the header declares " + std::to_string(layout.count) + " values of " +
                    std::to_string(layout.dtype->size) + " bytes, but " + std::to_string(found) + " data bytes follow" +
                    (found < expected ? " (truncated file?)" : ""));
  }
  check_memory(bytes.size() + layout.count * sizeof(double), max_memory,
               "converting the " + std::to_string(layout.count) + " values of '" + where + "' to doubles");
  NpyArray array{layout.header.shape, std::vector<double>(static_cast<std::size_t>(layout.count))};
  layout.dtype->convert(bytes.data() + layout.data_start, array.values.size(), array.values.data());
  check_values(array, where);
  return array;
}

}  // namespace detail

std::string npy_bytes(const RowMatrix& values) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(values.rows()) + ", " +
                       std::to_string(values.cols()) + "), }";
  // numpy pads the header with spaces and a newline so that the data start at a multiple of 64.
  const std::size_t preamble = kMagic.size() + 4;  // magic, version 1.0, the header's length (2 bytes)
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header.push_back('\n');
  std::string bytes(kMagic);
  bytes.push_back('\x01');
  bytes.push_back('\x00');
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  const std::size_t data = bytes.size();
  bytes.resize(data + sizeof(double) * static_cast<std::size_t>(values.size()));
  if (values.size() > 0)
    std::memcpy(bytes.data() + data, values.data(), sizeof(double) * static_cast<std::size_t>(values.size()));
  return bytes;
}

NpyArray read_npy(const std::string& path, ByteSize max_memory) {
  return detail::parse_npy(detail::read_file_bytes(path, max_memory), path, max_memory);
}

}  // namespace filkit
