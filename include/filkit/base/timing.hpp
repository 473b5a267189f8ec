// Wall-clock timing of a job's stages (the "seconds" of every JSON summary).
#pragma once

#include <chrono>

namespace filkit {

/// Wall-clock seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace filkit
