#include "commands.hpp"

namespace filkit::cli {

void setup_all_commands(CLI::App& app) {
  setup_measure(app);
  setup_accountant(app);
  setup_report(app);
  setup_dpsgd(app);
  setup_fim(app);
  setup_bound(app);
  setup_reconstruct(app);
  setup_irfil(app);
  setup_attack(app);
  setup_learned_attack(app);
}

}  // namespace filkit::cli
