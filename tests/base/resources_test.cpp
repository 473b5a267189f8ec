// The memory budget's sizes (2G, 512M), its default and its message; the thread-count bound.
#include "filkit/base/resources.hpp"

#include "test_util.hpp"

#include <thread>

namespace filkit {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

TEST(ByteSize, ReadsSizesInBinaryUnits) {
  EXPECT_EQ(parse_byte_size("max_memory", "2G").bytes, 2048 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "512M").bytes, 512 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "64k").bytes, 64 * 1024u);
  EXPECT_EQ(parse_byte_size("max_memory", "1.5G").bytes, 1536 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "2GiB").bytes, 2048 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "3mb").bytes, 3 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "1T").bytes, 1024 * 1024 * kMiB);
  EXPECT_EQ(parse_byte_size("max_memory", "1048577").bytes, 1048577u);
}

TEST(ByteSize, RefusesAnythingElseNamingTheOption) {
  for (const std::string text : {"", "-1", "2X", "1e3", "G", "1.2.3M", "99999999999999999999", "17179869184G"})
    EXPECT_INVALID_ARGUMENT(parse_byte_size("max_memory", text), "max_memory = '" + text + "'", "2G, 512M");
}

TEST(ByteSize, IsSpelledExactlyInTheLargestUnitThatDividesIt) {
  EXPECT_EQ(to_string(ByteSize{2048 * kMiB}), "2G");
  EXPECT_EQ(to_string(ByteSize{3951 * kMiB}), "3951M");
  EXPECT_EQ(to_string(ByteSize{1000}), "1000");
  for (const std::uint64_t bytes : {std::uint64_t{1536} * kMiB, std::uint64_t{12345}, std::uint64_t{0}})
    EXPECT_EQ(parse_byte_size("x", to_string(ByteSize{bytes})).bytes, bytes);
}

TEST(ByteSize, ReadableSizesForMessages) {
  EXPECT_EQ(readable_bytes(37), "37 bytes");
  EXPECT_EQ(readable_bytes(512 * kMiB), "512 MiB");
  EXPECT_EQ(readable_bytes(4096 * kMiB + 100 * kMiB), "4.1 GiB");
}

TEST(MemoryBudget, DefaultsToHalfThePhysicalMemory) {
  const std::uint64_t physical = physical_memory_bytes();
  const ByteSize budget = default_memory_budget();
  ASSERT_GT(budget.bytes, 0u);
  EXPECT_EQ(budget.bytes % kMiB, 0u);
  if (physical > 0) EXPECT_LE(budget.bytes, physical / 2);
}

TEST(MemoryBudget, RefusesMoreThanTheBudgetNamingWhatAndBoth) {
  EXPECT_NO_THROW(check_memory(kMiB, ByteSize{kMiB}, "x"));
  EXPECT_MEMORY_LIMIT(check_memory(4096 * kMiB, ByteSize{512 * kMiB}, "reading 'big.npy'"),
                      "reading 'big.npy' needs 4.0 GiB", "max_memory = 512M (512 MiB)");
  EXPECT_MEMORY_LIMIT(check_memory(saturating_product(1ULL << 40, 1ULL << 40), ByteSize{kMiB}, "x"),
                      "more than 2^64 bytes");
}

TEST(ThreadCount, IsBoundedByTheMachine) {
  const int most = max_thread_count();
  EXPECT_GE(most, 4);
  EXPECT_LE(most, 1024);
  EXPECT_EQ(most, static_cast<int>(std::min(1024u, 4 * std::max(1u, std::thread::hardware_concurrency()))));
  EXPECT_NO_THROW(check_thread_count("threads", 0));
  EXPECT_NO_THROW(check_thread_count("threads", most));
  EXPECT_INVALID_ARGUMENT(check_thread_count("--threads", 100000), "--threads = 100000",
                          "expected 0.." + std::to_string(most), "hardware threads");
  EXPECT_INVALID_ARGUMENT(check_thread_count("threads", -1), "threads = -1");
}

// The bound every loop count and product of counts meets (steps x runs, shadow models x steps, ...).
TEST(BoundedIterations, ReturnsTheProductUpToTheBoundAndNamesEveryFactorBeyondIt) {
  EXPECT_EQ(bounded_iterations({{"steps", 1000}, {"runs", 3}}, "steps"), 3000);
  EXPECT_EQ(bounded_iterations({{"steps", 1000000000000000}}, "steps"), 1000000000000000);  // exactly 1e15
  EXPECT_INVALID_ARGUMENT(bounded_iterations({{"steps", 1000000000000001}}, "steps"),
                          "steps = 1000000000000001 makes 1e+15 steps, more than 1e15, which no run would finish");
  // A product beyond 2^63 is formed in double, not wrapped.
  EXPECT_INVALID_ARGUMENT(bounded_iterations({{"steps", 9223372036854775807}, {"runs", 2}}, "DP-SGD steps"),
                          "steps = 9223372036854775807 times runs = 2 makes 1.845e+19 DP-SGD steps, more than 1e15");
  EXPECT_EQ(bounded_iterations({{"steps", 9223372036854775807}, {"runs", 0}}, "steps"), 0);
}

}  // namespace
}  // namespace filkit
