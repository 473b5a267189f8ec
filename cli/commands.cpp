#include "commands.hpp"

namespace filkit::cli {

void setup_all_commands(CLI::App& app) {
  (void)app;
}

}  // namespace filkit::cli
