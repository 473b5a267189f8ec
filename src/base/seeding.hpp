// Derived seeds: every random stream of a job (a run, a step's probes, an example's probes) is
// seeded from the job's seed through splitmix64, so streams are independent and reproducible.
#pragma once

#include <cstdint>

namespace filkit {

/// Steele, Lea and Flood's SplitMix64 finaliser: a bijective mix of 64 bits.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace filkit
