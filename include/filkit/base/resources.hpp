// What a run may take from the machine: a memory budget that the loaders check a file's declared
// size against before allocating, and a bound on the thread count.
#pragma once

#include "filkit/base/errors.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace filkit {

/// A number of bytes as users spell it: "2G", "512M", "64K", "1.5G" (binary units: K = 1024) or
/// a plain count of bytes ("1048576").
struct ByteSize {
  std::uint64_t bytes = 0;
  friend bool operator==(const ByteSize&, const ByteSize&) = default;
};

/// Parses a ByteSize; throws OptionError naming `name` and the accepted spellings for
/// anything else (negative, empty, unknown unit, beyond 2^64 bytes).
ByteSize parse_byte_size(const std::string& name, const std::string& text);

/// The exact spelling of a size, in the largest unit that divides it ("2G", "3951M", "1000"),
/// so that parse_byte_size reads it back to the same number of bytes.
std::string to_string(ByteSize size);

/// A size for people: "4.0 GiB", "512 MiB", "37 bytes".
std::string readable_bytes(std::uint64_t bytes);

/// The machine's physical memory in bytes (sysconf), or 0 if it cannot be told.
std::uint64_t physical_memory_bytes();

/// The default max_memory: half of the physical memory, rounded down to whole MiB (4 GiB if the
/// physical memory cannot be told). Large enough for any real dataset filkit handles on that
/// machine, small enough that a file declaring an absurd shape is refused rather than swapped in.
ByteSize default_memory_budget();

/// a * b, or UINT64_MAX when the product does not fit (sizes from a corrupt header).
std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b);

/// a + b, or UINT64_MAX when the sum does not fit (estimates that add saturated products).
std::uint64_t saturating_sum(std::uint64_t a, std::uint64_t b);

/// Throws MemoryLimitError "<what> needs <bytes>, more than max_memory = <budget>; ..." when
/// `bytes` exceeds `budget`. Loaders call it before allocating what a file declares; `what` may
/// name the options that shrink it (option_name).
void check_memory(std::uint64_t bytes, ByteSize budget, const Message& what);

/// The most iterations a job may ask for: steps, runs, shadow models, epochs and every product of
/// them that forms a loop. 1e15 (the accountant's bound on steps too): a run of that many
/// microsecond steps takes 30 years, so nothing that would end is refused, and the counts and their
/// products stay far below 2^63.
inline constexpr double kMaxIterations = 1e15;

/// One factor of a loop's length: an option (by its declared name) or an expression of options,
/// and its value.
struct IterationFactor {
  IterationFactor(const char* option, long long value) : name(option_name(option)), value(value) {}
  IterationFactor(Message expression, long long value) : name(std::move(expression)), value(value) {}
  Message name;
  long long value;
};

/// Throws OptionError naming every factor ("steps = 9223372036854775807 times runs = 1
/// makes 9.2e+18 iterations, more than 1e15 ...") unless their product is at most kMaxIterations;
/// else returns the product. `what` says what is counted ("DP-SGD steps"). The factors must be >= 0.
long long bounded_iterations(std::initializer_list<IterationFactor> factors, const std::string& what);

/// The hardware threads (std::thread::hardware_concurrency, at least 1): what 0 threads, OpenMP's
/// default, uses unless OMP_NUM_THREADS says otherwise.
int hardware_thread_count();

/// The largest thread count accepted: 4 x the hardware threads, at most 1024 (libgomp cannot
/// start many thousands of threads and crashes trying).
int max_thread_count();

/// Throws OptionError naming `name` unless 0 <= threads <= max_thread_count().
void check_thread_count(const std::string& name, long long threads);

}  // namespace filkit
