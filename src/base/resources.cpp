#include "filkit/base/resources.hpp"

#include "filkit/base/checks.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace filkit {

namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr const char* kUnits = "KMGT";

// The multiplier of a unit suffix ("", "K", "MB", "GiB", any case); 0 for an unknown one.
std::uint64_t unit_bytes(std::string_view unit) {
  std::string lower(unit);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.empty() || lower == "b") return 1;
  if (lower.size() == 3 && lower.substr(1) == "ib") lower.resize(1);
  if (lower.size() == 2 && lower[1] == 'b') lower.resize(1);
  if (lower.size() != 1) return 0;
  std::uint64_t bytes = kKiB;
  for (const char* unit_letter = kUnits; *unit_letter != '\0'; ++unit_letter, bytes *= kKiB)
    if (std::tolower(*unit_letter) == lower[0]) return bytes;
  return 0;
}

}  // namespace

ByteSize parse_byte_size(const std::string& name, const std::string& text) {
  const auto fail = [&] {
    option_error(name, "'" + text + "'", "expected a size such as 2G, 512M, 64K or a number of bytes");
  };
  const std::size_t unit_start = text.find_first_not_of("0123456789.");
  const std::string_view number = std::string_view(text).substr(0, unit_start);
  const std::uint64_t unit = unit_bytes(unit_start == std::string::npos ? "" : text.substr(unit_start));
  if (number.empty() || unit == 0) fail();
  if (number.find('.') == std::string_view::npos) {
    std::uint64_t count = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (error != std::errc() || end != number.data() + number.size()) fail();
    const std::uint64_t bytes = saturating_product(count, unit);
    if (bytes == UINT64_MAX) fail();
    return {bytes};
  }
  double count = 0.0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
  if (error != std::errc() || end != number.data() + number.size()) fail();
  const double bytes = std::floor(count * static_cast<double>(unit));
  if (!(bytes < 0x1p64)) fail();
  return {static_cast<std::uint64_t>(bytes)};
}

std::string to_string(ByteSize size) {
  std::uint64_t value = size.bytes;
  int unit = -1;
  while (value != 0 && value % kKiB == 0 && kUnits[unit + 1] != '\0') {
    value /= kKiB;
    ++unit;
  }
  return std::to_string(value) + (unit >= 0 ? std::string(1, kUnits[unit]) : "");
}

std::string readable_bytes(std::uint64_t bytes) {
  if (bytes < kKiB) return std::to_string(bytes) + " bytes";
  const char* names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / static_cast<double>(kKiB);
  int unit = 0;
  while (value >= 1024.0 && unit + 1 < 6) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, value < 10.0 ? "%.1f %s" : "%.0f %s", value, names[unit]);
  return buffer;
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return saturating_product(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page_size));
}

ByteSize default_memory_budget() {
  const std::uint64_t physical = physical_memory_bytes();
  constexpr std::uint64_t kMiB = kKiB * kKiB;
  if (physical == 0) return {4 * kKiB * kMiB};
  return {physical / 2 / kMiB * kMiB};
}

std::uint64_t saturating_product(std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

std::uint64_t saturating_sum(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

void check_memory(std::uint64_t bytes, ByteSize budget, const Message& what) {
  if (bytes <= budget.bytes) return;
  const std::string needed = bytes == UINT64_MAX ? "more than 2^64 bytes" : readable_bytes(bytes);
  throw MemoryLimitError(what + " needs " + needed + ", more than " + option_name("max_memory") + " = " +
                         to_string(budget) + " (" + readable_bytes(budget.bytes) + "); use a smaller input, or raise " +
                         option_name("max_memory") + " if the machine has the memory");
}

long long bounded_iterations(std::initializer_list<IterationFactor> factors, const std::string& what) {
  double product = 1.0;  // in double: the product of unchecked factors can pass 2^63
  Message named;
  std::string subject;  // the first option named: what the error is about
  for (const IterationFactor& factor : factors) {
    product *= static_cast<double>(factor.value);
    if (&factor != factors.begin()) named += " times ";
    named += factor.name + " = " + std::to_string(factor.value);
    if (subject.empty() && !factor.name.options().empty()) subject = factor.name.options().front();
  }
  static_assert(kMaxIterations == 1e15, "the message below spells the bound");
  if (product == 0.0) return 0;  // a zero factor: the others may be huge
  if (product <= kMaxIterations) {
    long long exact = 1;  // below 1e15 (and 2^53): the double is the product, exactly
    for (const IterationFactor& factor : factors) exact *= factor.value;
    return exact;
  }
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.4g", product);
  throw OptionError::with_text(
      subject, named + " makes " + shown + " " + what + ", more than 1e15, which no run would finish; ask for fewer");
}

int hardware_thread_count() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int max_thread_count() { return std::min(1024, 4 * hardware_thread_count()); }

void check_thread_count(const std::string& name, long long threads) {
  const int most = max_thread_count();
  if (threads >= 0 && threads <= most) return;
  option_error(name, std::to_string(threads),
               "expected 0.." + std::to_string(most) + " (0 = all cores; at most 4 x the " +
                   std::to_string(hardware_thread_count()) + " hardware threads, and never above 1024)");
}

}  // namespace filkit
