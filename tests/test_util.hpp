// Shared helpers of the test suite: small synthetic datasets, temporary files, tolerances.
#pragma once

#include "filkit/base/errors.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <zlib.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit::testing {

/// Whether the tests (and the filkit they run) are built with AddressSanitizer
/// (scripts/asan-build.sh): its suite looks for memory errors and undefined behaviour on the paths
/// the Release suite checks the numbers of, so its slowest numerical checks run smaller there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

/// Why a published-value test (the whole of MNIST, minutes under the sanitizers) is left to the
/// Release suite: its code paths run on small data in the sanitizer suite.
inline constexpr const char* kPublishedValuesInRelease =
    "published values are checked by the Release suite; the sanitizers see these paths on small data";

/// Whether a built-in dataset (mnist, fashion-mnist) is installed where filkit looks for it.
inline bool builtin_available(const std::string& name) {
  try {
    builtin_dataset_dir(name);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

/// A fresh temporary directory, removed when the object goes out of scope.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ =
        std::filesystem::temp_directory_path() / ("filkit_test_" + std::to_string(device()) + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `content` to `name` inside the directory and returns the path.
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream out(file(name), std::ios::binary);
    out << content;
    return file(name);
  }

 private:
  std::filesystem::path path_;
};

/// `size` independent N(0, scale^2) values, seeded.
/// Whether every value of v is a float, as a float32 run keeps its state (DpSgdOptions::precision).
inline bool is_float(const VectorXd& v) { return v == v.cast<float>().cast<double>(); }

/// A float32 computation's result against the same computation in float64: equal to `relative` of
/// the float64 result's norm (single precision's rounding, where a wrong formula is off at the
/// percent level) and not equal (the float32 path really ran).
inline void expect_single_precision_of(const MatrixXd& single, const MatrixXd& dbl, const std::string& what,
                                       double relative = 1e-5) {
  ASSERT_EQ(single.rows(), dbl.rows()) << what;
  ASSERT_EQ(single.cols(), dbl.cols()) << what;
  EXPECT_LT((single - dbl).norm(), relative * dbl.norm()) << what;
  EXPECT_NE(single, dbl) << what << ": the float32 computation ran in float64";
}

inline VectorXd normal_vector(Index size, unsigned seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  VectorXd v(size);
  for (Index i = 0; i < size; ++i) v(i) = scale * normal(rng);
  return v;
}

/// n examples in d dimensions with Gaussian features scaled into the unit ball and labels from a
/// noisy linear rule: y in {0,1} (classification) or {0..classes-1}.
inline Dataset random_classification(Index n, Index d, int classes, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Dataset data;
  data.X.resize(n, d);
  data.y.resize(n);
  RowMatrix directions(classes, d);
  for (Index k = 0; k < classes; ++k)
    for (Index j = 0; j < d; ++j) directions(k, j) = normal(rng);
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < d; ++j) data.X(i, j) = normal(rng);
    data.X.row(i) /= std::sqrt(static_cast<double>(d)) * 1.5;
    Eigen::VectorXd scores = directions * data.X.row(i).transpose();
    for (Index k = 0; k < classes; ++k) scores(k) += 0.5 * normal(rng);
    Index best;
    scores.maxCoeff(&best);
    data.y(i) = static_cast<double>(best);
  }
  data.source = "random_classification";
  return data;
}

/// n examples with a categorical attribute "group" of `levels` levels (one-hot, the last level
/// dropped, so columns 0..levels-2) followed by `numeric` Gaussian features, and a target from a
/// noisy linear rule in which the attribute matters: real-valued (regression) or its sign as
/// class 0/1. The column map names the attribute and the numeric columns "f0", "f1", ...
/// `effect` scales the attribute's weights (level k adds effect * (k + 1)).
inline Dataset random_categorical(Index n, Index numeric, int levels, bool regression, unsigned seed,
                                  double effect = 1.5) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> level(0, levels - 1);
  const Index block = levels - 1;
  Dataset data;
  data.X = RowMatrix::Zero(n, block + numeric);
  data.y.resize(n);
  Eigen::VectorXd weights(block + numeric);
  for (Index j = 0; j < weights.size(); ++j) weights(j) = j < block ? effect * static_cast<double>(j + 1) : normal(rng);
  for (Index i = 0; i < n; ++i) {
    const int v = level(rng);
    if (v < block) data.X(i, v) = 1.0;
    for (Index j = 0; j < numeric; ++j) data.X(i, block + j) = normal(rng);
    const double score = data.X.row(i).dot(weights) - 1.0 + 0.5 * normal(rng);
    data.y(i) = regression ? score : (score > 0.0 ? 1.0 : 0.0);
  }
  AttributeColumns group;
  group.name = "group";
  group.categorical = true;
  for (Index k = 0; k < block; ++k) {
    group.columns.push_back(k);
    group.levels.push_back("g" + std::to_string(k));
    data.feature_names.push_back("group=g" + std::to_string(k));
  }
  group.dropped_level = "g" + std::to_string(block);
  data.attributes.push_back(group);
  for (Index j = 0; j < numeric; ++j) {
    data.attributes.push_back({"f" + std::to_string(j), {block + j}, {}, "", false});
    data.feature_names.push_back("f" + std::to_string(j));
  }
  if (!regression) data.class_names = {"0", "1"};
  data.source = "random_categorical";
  return data;
}

/// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    had_ = std::getenv(name_.c_str()) != nullptr;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// ---------------------------------------------------------------------------------------------
// Binary fixtures of the data loaders, written byte by byte so that the tests need no numpy.

/// Expects `statement` to throw `type` whose message contains every one of `fragments`.
#define EXPECT_THROW_NAMING(statement, type, ...)                                 \
  do {                                                                            \
    try {                                                                         \
      statement;                                                                  \
      ADD_FAILURE() << "expected " #type " from " #statement;                     \
    } catch (const type& error) {                                                 \
      for (const std::string& fragment : std::vector<std::string>{__VA_ARGS__}) { \
        EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)    \
            << "message: " << error.what() << "\nlacks: " << fragment;            \
      }                                                                           \
    }                                                                             \
  } while (false)

/// Expects `statement` to throw std::invalid_argument whose message contains every one of
/// `fragments`.
#define EXPECT_INVALID_ARGUMENT(statement, ...) EXPECT_THROW_NAMING(statement, std::invalid_argument, __VA_ARGS__)

/// Expects `statement` to refuse a size beyond the memory budget (filkit::MemoryLimitError) with
/// every one of `fragments` in its message.
#define EXPECT_MEMORY_LIMIT(statement, ...) EXPECT_THROW_NAMING(statement, ::filkit::MemoryLimitError, __VA_ARGS__)

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string big_endian_u32(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

inline std::string little_endian(std::uint64_t value, int bytes) {
  std::string out;
  for (int k = 0; k < bytes; ++k) out += static_cast<char>(value >> (8 * k));
  return out;
}

// A resume file's frame, as src/dpsgd/resume_state.hpp documents it: magic (8 bytes), version (4),
// payload length (8), CRC32 of the payload (4), then the CBOR payload.
inline constexpr std::size_t kResumeHeaderSize = 24;

/// The CBOR payload of a resume file's bytes.
inline nlohmann::json resume_payload(const std::string& file) {
  return nlohmann::json::from_cbor(file.substr(kResumeHeaderSize));
}

/// `original`'s magic and version around `cbor`, with the length and CRC32 a valid file has.
inline std::string reframed_resume_file(const std::string& original, const std::string& cbor) {
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(cbor.data()), static_cast<uInt>(cbor.size()));
  return original.substr(0, 12) + little_endian(cbor.size(), 8) + little_endian(crc, 4) + cbor;
}

/// A resume file with `payload` instead of its own, valid in every check but its content's.
inline std::string with_resume_payload(const std::string& original, const nlohmann::json& payload) {
  const std::vector<std::uint8_t> cbor = nlohmann::json::to_cbor(payload);
  return reframed_resume_file(original, std::string(cbor.begin(), cbor.end()));
}

/// An IDX file: magic number, big-endian dimensions, then the bytes.
inline std::string idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const std::string& data) {
  std::string out = big_endian_u32(magic);
  for (std::uint32_t dim : dims) out += big_endian_u32(dim);
  return out + data;
}

/// Writes `content` gzip-compressed to `path`.
inline void write_gzip(const std::string& path, const std::string& content) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, content.data(), static_cast<unsigned>(content.size())), static_cast<int>(content.size()));
  gzclose(file);
}

/// The raw little-endian bytes of `values` (the host is little-endian, as filkit requires).
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// A .npy file with header dict {'descr': descr, 'fortran_order': ..., 'shape': shape}
/// (shape spelled as Python does, e.g. "(2, 3)" or "(4,)"), padded to 64 bytes as numpy does.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                             int major_version = 1, bool fortran_order = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  const std::size_t prefix = major_version == 1 ? 10 : 12;
  header += std::string(63 - (prefix + header.size()) % 64, ' ') + "\n";
  return std::string("\x93NUMPY", 6) + static_cast<char>(major_version) + '\0' +
         little_endian(header.size(), major_version == 1 ? 2 : 4) + header + data;
}

/// A float64 C-order .npy of a rows x cols matrix (cols = 0: a 1-D array of `rows` values).
inline std::string npy_f8(const std::vector<double>& values, std::size_t rows, std::size_t cols = 0) {
  const std::string shape =
      cols == 0 ? "(" + std::to_string(rows) + ",)" : "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
  return npy_bytes("<f8", shape, raw_bytes(values));
}

/// `data` compressed as a raw deflate stream (no zlib header), as zip archives hold it.
inline std::string raw_deflate(const std::string& data) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

/// A zip archive of (name, content) members, stored (method 0) or deflated (method 8).
inline std::string zip_bytes(const std::vector<std::pair<std::string, std::string>>& members, bool deflated) {
  std::string archive, directory;
  for (const auto& [name, content] : members) {
    const std::string payload = deflated ? raw_deflate(content) : content;
    const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size()));
    // version, flags, method, time, date, crc, compressed size, size
    const std::string common = little_endian(20, 2) + little_endian(0, 2) + little_endian(deflated ? 8 : 0, 2) +
                               little_endian(0, 4) + little_endian(crc, 4) + little_endian(payload.size(), 4) +
                               little_endian(content.size(), 4) + little_endian(name.size(), 2) + little_endian(0, 2);
    directory += little_endian(0x02014b50, 4) + little_endian(20, 2) + common + little_endian(0, 2) +
                 little_endian(0, 2) + little_endian(0, 2) + little_endian(0, 4) + little_endian(archive.size(), 4) +
                 name;
    archive += little_endian(0x04034b50, 4) + common + name + payload;
  }
  const std::string end = little_endian(0x06054b50, 4) + little_endian(0, 4) + little_endian(members.size(), 2) +
                          little_endian(members.size(), 2) + little_endian(directory.size(), 4) +
                          little_endian(archive.size(), 4) + little_endian(0, 2);
  return archive + directory + end;
}

/// A small .npz dataset (float64 arrays X and y) written into `dir`; returns its path.
inline std::string write_npz_dataset(const TempDir& dir, const Dataset& data, const std::string& name = "small.npz") {
  const std::vector<double> x(data.X.data(), data.X.data() + data.X.size());
  const std::vector<double> y(data.y.data(), data.y.data() + data.y.size());
  const std::string bytes =
      zip_bytes({{"X.npy", npy_f8(x, static_cast<std::size_t>(data.n()), static_cast<std::size_t>(data.d()))},
                 {"y.npy", npy_f8(y, static_cast<std::size_t>(data.n()))}},
                false);
  return dir.write(name, bytes);
}

/// The lines of a text file (empty if it cannot be read).
// A small CSV with a categorical attribute `group` (levels g0..g2), two numeric features f0, f1
// and a target (numbers, or yes/no for a classification), as a user would bring.
inline std::string write_categorical_csv(const TempDir& dir, Index n, bool regression, unsigned seed,
                                         const std::string& name) {
  const Dataset data = random_categorical(n, 2, 3, regression, seed);
  std::ostringstream csv;
  csv << "group,f0,f1,target\n";
  for (Index i = 0; i < data.n(); ++i) {
    const Index level = data.X(i, 0) != 0 ? 0 : data.X(i, 1) != 0 ? 1 : 2;
    csv << "g" << level << "," << data.X(i, 2) << "," << data.X(i, 3) << ",";
    if (regression) csv << data.y(i) << "\n";
    else csv << (data.y(i) > 0 ? "yes" : "no") << "\n";
  }
  return dir.write(name, csv.str());
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Runs a shell command with stderr joined to stdout: (exit status, output).
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  return {pclose(pipe), output};
}

// ---------------------------------------------------------------------------------------------
// Thread-count independence: what filkit promises to compute bit for bit alike on any number of
// OpenMP threads is computed on 1, 2 and 3 (which shares fixed blocks unevenly) and compared.

/// compute() run with OpenMP set to `threads` threads; the previous setting is restored after.
template <class Compute>
auto with_threads(int threads, const Compute& compute) {
  struct Restore {
    int threads;
    ~Restore() { omp_set_num_threads(threads); }
  } restore{omp_get_max_threads()};
  omp_set_num_threads(threads);
  return compute();
}

/// Whether a and b hold the same doubles bit for bit (signed zeros and NaNs included).
template <class A, class B>
::testing::AssertionResult same_bits(const Eigen::DenseBase<A>& a, const Eigen::DenseBase<B>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    return ::testing::AssertionFailure() << "shapes " << a.rows() << " x " << a.cols() << " and " << b.rows() << " x "
                                         << b.cols();
  for (Index j = 0; j < a.cols(); ++j)
    for (Index i = 0; i < a.rows(); ++i) {
      const double x = a(i, j), y = b(i, j);
      if (std::bit_cast<std::uint64_t>(x) != std::bit_cast<std::uint64_t>(y))
        return ::testing::AssertionFailure()
               << "first difference at (" << i << ", " << j << "): " << std::setprecision(17) << x << " and " << y;
    }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult same_bits(double x, double y) {
  if (std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::setprecision(17) << x << " and " << y;
}

/// Runs compute() on 1, 2 and 3 threads and calls expect_same(on one thread, on more) for 2
/// and 3, each under a trace naming the count. Under AddressSanitizer, whose suite is for memory
/// errors and not for bits, compute() runs once, on 2 threads (3 would wait on each other on the
/// two cores ctest -j2 shares), and expect_same reads that result twice: the Release suite
/// compares the counts.
template <class Compute, class ExpectSame>
void expect_same_for_any_thread_count(const Compute& compute, const ExpectSame& expect_same) {
  if constexpr (kAddressSanitizer) {
    const auto two = with_threads(2, compute);
    expect_same(two, two);
    return;
  }
  const auto one = with_threads(1, compute);
  for (int threads : {2, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads against 1");
    expect_same(one, with_threads(threads, compute));
  }
}

/// Whether two tables of numbers hold the same doubles bit for bit.
inline ::testing::AssertionResult same_bits(const std::vector<std::vector<double>>& a,
                                            const std::vector<std::vector<double>>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " and " << b.size() << " rows";
  for (std::size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size()) return ::testing::AssertionFailure() << "row " << r << " differs in length";
    for (std::size_t c = 0; c < a[r].size(); ++c)
      if (!same_bits(a[r][c], b[r][c]))
        return ::testing::AssertionFailure()
               << "row " << r << ", column " << c << ": " << same_bits(a[r][c], b[r][c]).message();
  }
  return ::testing::AssertionSuccess();
}

/// A job summary without its wall times (every key naming seconds, at any depth).
template <class Json>
Json without_timings(Json json) {
  if (json.is_object()) {
    Json kept = Json::object();
    for (auto& [key, value] : json.items())
      if (key.find("seconds") == std::string::npos) kept[key] = without_timings(value);
    return kept;
  }
  if (json.is_array())
    for (auto& element : json) element = without_timings(element);
  return json;
}

/// Job (a job description of jobs/job.hpp) run on 1, 2 and 3 threads writes the same outputs:
/// its table and further tables bit for bit, its summary but for wall times character for
/// character.
template <class Job>
void expect_same_job_outputs_for_any_thread_count(const typename Job::Options& options) {
  expect_same_for_any_thread_count(
      [&] { return Job::run(options, false); },
      [](const auto& one, const auto& more) {
        EXPECT_EQ(one.table().header, more.table().header);
        EXPECT_TRUE(same_bits(one.table().rows, more.table().rows));
        for (const auto& extra : Job::extra_outputs())
          EXPECT_TRUE(same_bits(one.extra_table(extra.name).rows, more.extra_table(extra.name).rows)) << extra.name;
        EXPECT_EQ(without_timings(one.to_json()).dump(), without_timings(more.to_json()).dump());
      });
}

}  // namespace filkit::testing
