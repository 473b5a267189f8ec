#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/npy.hpp"

#include "base/parsing.hpp"
#include "data/npy_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace filkit {

namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50;
constexpr std::uint32_t kDirectoryEntry = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::size_t kEndOfDirectorySize = 22;
constexpr std::size_t kDirectoryEntrySize = 46;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr const char* kNpz = ".npz (zip) archive";

// Bounds-checked little-endian reads from a zip archive held in memory: the whole file, or the
// part of it from `base` to its end (offsets stay those of the file).
class ZipBytes {
 public:
  ZipBytes(std::string bytes, std::string path, std::size_t base = 0, const char* kind = kNpz)
      : bytes_(std::move(bytes)), path_(std::move(path)), base_(base), kind_(kind) {}

  std::uint32_t u16(std::size_t offset) const { return read(offset, 2); }
  std::uint32_t u32(std::size_t offset) const { return read(offset, 4); }
  std::string_view view(std::size_t offset, std::size_t size) const {
    if (offset < base_ || offset - base_ > bytes_.size() || bytes_.size() - (offset - base_) < size)
      fail("it is truncated");
    return std::string_view(bytes_).substr(offset - base_, size);
  }
  std::size_t size() const { return base_ + bytes_.size(); }  // the file's
  std::size_t base() const { return base_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw DataError("'" + path_ + "' is not a readable " + kind_ + ": " + what);
  }

 private:
  std::uint32_t read(std::size_t offset, std::size_t width) const {
    const std::string_view field = view(offset, width);
    std::uint32_t value = 0;
    for (std::size_t k = 0; k < width; ++k) {
      value |= static_cast<std::uint32_t>(static_cast<unsigned char>(field[k])) << (8 * k);
    }
    return value;
  }

  std::string bytes_;
  std::string path_;
  std::size_t base_ = 0;
  const char* kind_;
};

struct Member {
  std::string name;
  std::uint32_t flags = 0, method = 0, crc = 0;
  std::size_t compressed_size = 0, size = 0, local_offset = 0;
};

// The end-of-central-directory record sits in the last 22 bytes plus up to 64 KiB of comment.
std::size_t find_end_of_directory(const ZipBytes& zip) {
  if (zip.size() < kEndOfDirectorySize) zip.fail("it is too short to be a zip archive");
  const std::size_t last = zip.size() - kEndOfDirectorySize;
  const std::size_t first = std::max(last > 0xFFFF ? last - 0xFFFF : 0, zip.base());
  for (std::size_t offset = last + 1; offset-- > first;) {
    if (zip.u32(offset) == kEndOfDirectory) return offset;
  }
  zip.fail("no end-of-central-directory record found");
}

std::vector<Member> read_directory(const ZipBytes& zip) {
  const std::size_t end = find_end_of_directory(zip);
  const std::size_t count = zip.u16(end + 10);
  std::size_t offset = zip.u32(end + 16);
  if (count == 0xFFFF || offset == 0xFFFFFFFF) zip.fail("ZIP64 archives are not supported");
  std::vector<Member> members;
  for (std::size_t k = 0; k < count; ++k) {
    if (zip.u32(offset) != kDirectoryEntry) zip.fail("corrupt central directory");
    Member member;
    member.flags = zip.u16(offset + 8);
    member.method = zip.u16(offset + 10);
    member.crc = zip.u32(offset + 16);
    member.compressed_size = zip.u32(offset + 20);
    member.size = zip.u32(offset + 24);
    member.local_offset = zip.u32(offset + 42);
    const std::size_t name_length = zip.u16(offset + 28);
    member.name = std::string(zip.view(offset + kDirectoryEntrySize, name_length));
    if (member.size == 0xFFFFFFFF || member.compressed_size == 0xFFFFFFFF || member.local_offset == 0xFFFFFFFF) {
      zip.fail("member '" + member.name + "' uses ZIP64 sizes, which are not supported");
    }
    offset += kDirectoryEntrySize + name_length + zip.u16(offset + 30) + zip.u16(offset + 32);
    members.push_back(std::move(member));
  }
  return members;
}

// The first `size` bytes a raw deflate stream inflates to; with `whole`, the stream must end
// there (else an error naming `where`), without, it may go on (a prefix, to read a header).
std::string inflate_raw(std::string_view compressed, std::size_t size, const std::string& where, bool whole) {
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw ResourceError("zlib inflateInit2 failed");
  std::string out(size, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(size);
  const int status = inflate(&stream, whole ? Z_FINISH : Z_SYNC_FLUSH);
  const std::string message = stream.msg != nullptr ? stream.msg : "wrong size";
  const uLong produced = stream.total_out;
  inflateEnd(&stream);
  const bool failed = whole ? status != Z_STREAM_END || produced != size
                            : status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR;
  if (failed) {
    throw DataError(where + " does not inflate to its recorded " + std::to_string(size) + " bytes (zlib: " + message +
                    ")");
  }
  out.resize(produced);
  return out;
}

// Enough bytes for any .npy header numpy writes (they are padded to 64 bytes, rarely past 4 KiB).
constexpr std::size_t kNpyHeaderPrefix = std::size_t{1} << 16;

// Before a member is inflated: the size the archive records for it must be the size its array
// header declares (read from the first inflated bytes), and fit the budget with the array's
// doubles. A 4 KB archive recording a 4 GiB member, or a zip bomb, stops here.
void check_member_size(const ZipBytes& zip, const Member& member, std::string_view stored, const std::string& where,
                       ByteSize max_memory) {
  const std::string npy_where = zip.path() + ":" + member.name;
  const std::string leading = inflate_raw(stored, std::min(member.size, kNpyHeaderPrefix), where, false);
  detail::NpySize declared;
  try {
    declared = detail::npy_size(leading, npy_where);
  } catch (const std::invalid_argument& error) {  // garbage from a corrupt stream, or not an array
    zip.fail(where + " does not inflate to an .npy array (" + error.what() + ")");
  }
  if (declared.file_bytes != member.size) {
    zip.fail(where + " records " + std::to_string(member.size) + " uncompressed bytes, but its array header declares " +
             (declared.file_bytes == UINT64_MAX ? "more than 2^64" : std::to_string(declared.file_bytes)));
  }
  check_memory(saturating_product(declared.values, sizeof(double)) + member.size, max_memory,
               "inflating " + where + " (" + std::to_string(declared.values) + " values)");
}

// Where a member's data start, from its local header (`zip` must hold the header's 30 bytes),
// once the header, encryption, method and stored sizes are checked.
std::size_t member_data(const ZipBytes& zip, const Member& member, const std::string& where) {
  if (zip.u32(member.local_offset) != kLocalHeader) zip.fail("corrupt local header of " + where);
  if (member.flags & 1u) zip.fail(where + " is encrypted");
  if (member.method != 0 && member.method != 8)
    zip.fail(where + " uses compression method " + std::to_string(member.method) +
             "; supported: 0 (stored) and 8 (deflate)");
  if (member.method == 0 && member.compressed_size != member.size)
    zip.fail(where + " is stored with two different sizes");
  // The local header's extra field may differ from the central directory's (numpy writes ZIP64
  // extras there), so its own lengths locate the data.
  return member.local_offset + kLocalHeaderSize + zip.u16(member.local_offset + 26) + zip.u16(member.local_offset + 28);
}

// The uncompressed bytes of a member, checked against its CRC-32.
std::string member_bytes(const ZipBytes& zip, const Member& member, ByteSize max_memory) {
  const std::string where = "member '" + member.name + "' of '" + zip.path() + "'";
  const std::string_view stored = zip.view(member_data(zip, member, where), member.compressed_size);
  std::string bytes;
  if (member.method == 0) {
    bytes = std::string(stored);
  } else {
    check_member_size(zip, member, stored, where, max_memory);
    bytes = inflate_raw(stored, member.size, where, true);
  }
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
  if (crc != member.crc) {
    char message[64];
    std::snprintf(message, sizeof message, " (stored 0x%08X, computed 0x%08X)", member.crc, static_cast<unsigned>(crc));
    zip.fail(where + " fails its CRC-32 check" + message);
  }
  return bytes;
}

// The uncompressed bytes of one member, read forward from the file in pieces (stored members
// seek, deflated ones inflate from the start), never the whole member at once.
class MemberReader {
 public:
  MemberReader(std::ifstream& in, std::size_t data, const Member& member, std::string where)
      : in_(in), data_(data), member_(member), where_(std::move(where)) {
    if (member.method == 8 && inflateInit2(&stream_, -MAX_WBITS) != Z_OK)
      throw ResourceError("zlib inflateInit2 failed");
  }
  ~MemberReader() {
    if (member_.method == 8) inflateEnd(&stream_);
  }
  MemberReader(const MemberReader&) = delete;
  MemberReader& operator=(const MemberReader&) = delete;

  /// Skips forward to `position` (>= the current one).
  void skip_to(std::size_t position) {
    if (member_.method == 0) {
      position_ = position;
      return;
    }
    std::vector<char> scratch(std::size_t{1} << 20);
    while (position_ < position) read(scratch.data(), std::min(scratch.size(), position - position_));
  }

  /// The next `count` bytes.
  void read(char* out, std::size_t count) {
    if (count > member_.size || position_ > member_.size - count)
      throw DataError(where_ + " ends before its array does");
    if (member_.method == 0) {
      in_.seekg(static_cast<std::streamoff>(data_ + position_));
      if (!in_.read(out, static_cast<std::streamsize>(count))) throw DataError(where_ + " is truncated");
    } else {
      inflate_into(out, count);
    }
    position_ += count;
  }

 private:
  void inflate_into(char* out, std::size_t count) {
    stream_.next_out = reinterpret_cast<Bytef*>(out);
    stream_.avail_out = static_cast<uInt>(count);
    while (stream_.avail_out > 0) {
      if (stream_.avail_in == 0) {  // the next piece of the compressed bytes
        const std::size_t piece = std::min(input_.size(), member_.compressed_size - consumed_);
        if (piece == 0) throw DataError(where_ + " ends before its array does (deflate stream)");
        in_.seekg(static_cast<std::streamoff>(data_ + consumed_));
        if (!in_.read(input_.data(), static_cast<std::streamsize>(piece))) throw DataError(where_ + " is truncated");
        consumed_ += piece;
        stream_.next_in = reinterpret_cast<Bytef*>(input_.data());
        stream_.avail_in = static_cast<uInt>(piece);
      }
      const int status = inflate(&stream_, Z_NO_FLUSH);
      if (status != Z_OK && !(status == Z_STREAM_END && stream_.avail_out == 0))
        throw DataError(where_ + " does not inflate (zlib: " +
                        (stream_.msg != nullptr ? std::string(stream_.msg) : "stream ends early") + ")");
    }
  }

  std::ifstream& in_;
  std::size_t data_;
  const Member& member_;
  std::string where_;
  std::size_t position_ = 0;  // in the uncompressed bytes
  z_stream stream_{};
  std::vector<char> input_ = std::vector<char>(std::size_t{1} << 20);
  std::size_t consumed_ = 0;  // compressed bytes read
};

std::string read_range(std::ifstream& in, std::size_t offset, std::size_t size, const std::string& path,
                       const char* kind = kNpz) {
  std::string bytes(size, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw DataError("'" + path + "' is not a readable " + kind + ": it is truncated");
  return bytes;
}

// The directory of the archive at `path`, read from its end (the members' data are not read).
std::vector<Member> read_directory_of_file(std::ifstream& in, std::size_t size, const std::string& path,
                                           const char* kind = kNpz) {
  const std::size_t tail = std::min(size, kEndOfDirectorySize + 0xFFFF);
  const ZipBytes end_part(read_range(in, size - tail, tail, path, kind), path, size - tail, kind);
  const std::size_t end = find_end_of_directory(end_part);
  const std::size_t directory = end_part.u32(end + 16);
  if (directory == 0xFFFFFFFF || directory > end) end_part.fail("corrupt end-of-central-directory record");
  return read_directory(ZipBytes(read_range(in, directory, size - directory, path, kind), path, directory, kind));
}

}  // namespace

namespace detail {

namespace {
std::ifstream open_archive(const std::string& path, std::size_t& size) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw DataError("'" + path + "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw ResourceError("cannot open '" + path + "' for reading");
  size = static_cast<std::size_t>(in.tellg());
  return in;
}
}  // namespace

std::vector<std::string> npz_array_names(const std::string& path) {
  std::size_t size = 0;
  std::ifstream in = open_archive(path, size);
  std::vector<std::string> names;
  for (const Member& member : read_directory_of_file(in, size, path))
    if (member.name.ends_with(".npy")) names.push_back(member.name.substr(0, member.name.size() - 4));
  return names;
}

}  // namespace detail

std::uint64_t verify_zip_members(const std::string& path, const char* kind) {
  std::size_t size = 0;
  std::ifstream in = detail::open_archive(path, size);
  std::uint64_t total = 0;
  for (const Member& member : read_directory_of_file(in, size, path, kind)) {
    total = saturating_sum(total, member.size);
    const std::string where = "member '" + member.name + "'";
    const ZipBytes local(read_range(in, member.local_offset, kLocalHeaderSize, path, kind), path, member.local_offset,
                         kind);
    const std::size_t data = member_data(local, member, where);
    if (data > size || size - data < member.compressed_size) local.fail(where + " is truncated");
    MemberReader reader(in, data, member, where);
    std::vector<char> piece(std::size_t{1} << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (std::size_t done = 0; done < member.size;) {
      const std::size_t count = std::min(piece.size(), member.size - done);
      reader.read(piece.data(), count);
      crc = crc32(crc, reinterpret_cast<const Bytef*>(piece.data()), static_cast<uInt>(count));
      done += count;
    }
    if (crc != member.crc) {
      char message[64];
      std::snprintf(message, sizeof message, " (stored 0x%08X, computed 0x%08X)", member.crc,
                    static_cast<unsigned>(crc));
      local.fail(where + " fails its CRC-32 check" + std::string(message) + ": the file is damaged");
    }
  }
  return total;
}

namespace detail {

NpyArray read_npz_rows(const std::string& path, const std::string& name, const std::vector<Index>* rows,
                       ByteSize max_memory, Index* all_rows) {
  std::size_t size = 0;
  std::ifstream in = open_archive(path, size);
  const std::vector<Member> members = read_directory_of_file(in, size, path);
  const auto found =
      std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.name == name + ".npy"; });
  if (found == members.end()) {
    std::vector<std::string> names;
    for (const Member& m : members)
      names.push_back(m.name.ends_with(".npy") ? m.name.substr(0, m.name.size() - 4) : m.name);
    throw DataError("'" + path + "' has no array '" + name +
                    "'; it holds: " + (names.empty() ? "nothing" : detail::quoted_list(names)));
  }
  const Member& member = *found;
  const std::string where = "member '" + member.name + "' of '" + path + "'";
  const ZipBytes local(read_range(in, member.local_offset, kLocalHeaderSize, path), path, member.local_offset);
  const std::size_t data = member_data(local, member, where);
  if (data > size || size - data < member.compressed_size) local.fail(where + " is truncated");

  const std::string npy_where = path + ":" + member.name;
  NpyDataLayout layout;
  {
    MemberReader header(in, data, member, where);
    std::string leading(std::min(member.size, kNpyHeaderPrefix), '\0');
    header.read(leading.data(), leading.size());
    layout = npy_data_layout(leading, npy_where);
  }
  std::uint64_t row_values = 1;
  for (std::size_t axis = 1; axis < layout.shape.size(); ++axis)
    row_values = saturating_product(row_values, static_cast<std::uint64_t>(layout.shape[axis]));
  const Index n = layout.shape[0];
  if (all_rows != nullptr) *all_rows = n;
  const std::uint64_t row_bytes = saturating_product(row_values, layout.value_bytes);
  if (saturating_product(row_bytes, static_cast<std::uint64_t>(n)) != member.size - layout.data_start)
    local.fail(where + " holds " + std::to_string(member.size - layout.data_start) +
               " data bytes, but its array header "
               "declares " +
               std::to_string(n) + " rows of " + std::to_string(row_bytes));
  const auto count = rows ? static_cast<Index>(rows->size()) : n;
  check_memory(
      saturating_product(saturating_product(static_cast<std::uint64_t>(count), row_values), sizeof(double)) + row_bytes,
      max_memory, "reading " + std::to_string(count) + " rows of " + npy_where);
  NpyArray array{layout.shape, std::vector<double>(static_cast<std::size_t>(count * static_cast<Index>(row_values)))};
  array.shape[0] = count;
  MemberReader reader(in, data, member, where);
  std::vector<char> row(static_cast<std::size_t>(row_bytes));
  Index previous = -1;
  for (Index k = 0; k < count; ++k) {
    const Index r = rows ? (*rows)[static_cast<std::size_t>(k)] : k;
    if (r <= previous || r >= n)
      throw OptionError::with_text("rows", "read_npz_rows: row " + std::to_string(r) + " of " + npy_where +
                                               " is out of order or outside 0.." + std::to_string(n - 1));
    previous = r;
    reader.skip_to(layout.data_start + static_cast<std::size_t>(r) * row.size());
    reader.read(row.data(), row.size());
    double* out = array.values.data() + k * static_cast<Index>(row_values);
    layout.to_double(row.data(), static_cast<std::size_t>(row_values), out);
    for (std::uint64_t j = 0; j < row_values; ++j)
      if (!(std::abs(out[j]) <= kMaxInputMagnitude))
        throw DataError("'" + npy_where + "': an element of row " + std::to_string(r) + " " +
                        input_value_problem(out[j]));
  }
  return array;
}

}  // namespace detail

std::map<std::string, NpyArray> read_npz(const std::string& path, ByteSize max_memory) {
  const ZipBytes zip(detail::read_file_bytes(path, max_memory), path);
  std::map<std::string, NpyArray> arrays;
  for (const Member& member : read_directory(zip)) {
    if (!member.name.ends_with(".npy")) zip.fail("member '" + member.name + "' is not an .npy array");
    const std::string name = member.name.substr(0, member.name.size() - 4);
    const std::string where = path + ":" + member.name;
    if (!arrays.emplace(name, detail::parse_npy(member_bytes(zip, member, max_memory), where, max_memory)).second) {
      zip.fail("member '" + member.name + "' appears twice");
    }
  }
  return arrays;
}

}  // namespace filkit
