#include "filkit/base/stage.hpp"

#include <exception>

namespace filkit {

namespace {
// Per thread: Python may run jobs on several threads at once; a job's own stages run on the
// thread that called it.
thread_local const char* innermost_stage = nullptr;
}  // namespace

StageScope::StageScope(const char* stage) : previous_(innermost_stage), exceptions_(std::uncaught_exceptions()) {
  innermost_stage = stage;
}

StageScope::~StageScope() {
  if (std::uncaught_exceptions() == exceptions_) innermost_stage = previous_;
}

std::string current_stage() { return innermost_stage != nullptr ? innermost_stage : ""; }

std::string out_of_memory_message() {
  const std::string stage = current_stage();
  return "out of memory" + (stage.empty() ? std::string() : " while " + stage);
}

}  // namespace filkit
