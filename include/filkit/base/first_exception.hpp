// Exceptions out of an OpenMP loop: an exception must not leave a parallel region, so each
// iteration catches, the first one is kept, and it is rethrown after the loop.
#pragma once

#include <exception>

namespace filkit {

class FirstException {
 public:
  /// Call from a catch (...) block inside the parallel region.
  void capture() noexcept {
#pragma omp critical(filkit_first_exception)
    if (!first_) first_ = std::current_exception();
  }
  /// Whether one was captured. Call after the parallel region.
  bool any() const { return static_cast<bool>(first_); }
  /// The one captured, or null. Call after the parallel region.
  std::exception_ptr first() const { return first_; }
  /// Call after the parallel region.
  void rethrow_if_any() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::exception_ptr first_;
};

}  // namespace filkit
