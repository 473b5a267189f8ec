// The stage a job is in ("loading the data", "fitting the model", ...), so that a failure that
// carries no context of its own, std::bad_alloc above all, can still be reported with it.
#pragma once

#include <string>

namespace filkit {

/// Marks the calling thread as being in `stage` for the object's lifetime. When the scope is left
/// by an exception the stage stays set, so the handler that catches it can name it.
class StageScope {
 public:
  explicit StageScope(const char* stage);
  ~StageScope();
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  const char* previous_;
  int exceptions_;
};

/// The innermost stage entered on this thread and not left normally; empty if none.
std::string current_stage();

/// "out of memory while <stage>" (just "out of memory" outside every stage), for a std::bad_alloc
/// caught at the top; the caller adds the advice in its own spelling of the options.
std::string out_of_memory_message();

}  // namespace filkit
