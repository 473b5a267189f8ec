#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/accountant.hpp"
#include "filkit/jobs/attack.hpp"
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/jobs/public_training.hpp"
#include "filkit/jobs/irfil.hpp"
#include "filkit/jobs/learned_attack.hpp"
#include "filkit/jobs/measure.hpp"
#include "filkit/jobs/reconstruct.hpp"
#include "filkit/jobs/report.hpp"

#include <map>
#include <set>

namespace filkit::cli {

namespace {

// Every option's defaults over the commands that have it (as the JSON settings record them).
template <class... Jobs>
std::map<std::string, std::set<std::string>, std::less<>> defaults_by_option() {
  std::map<std::string, std::set<std::string>, std::less<>> defaults;
  (
      [&] {
        const nlohmann::json settings = settings_json(typename Jobs::Options{});
        for (const auto& [name, value] : settings.items()) defaults[name].insert(value.dump());
      }(),
      ...);
  return defaults;
}

}  // namespace

bool defaults_differ_between_commands(std::string_view name) {
  static const auto defaults = defaults_by_option<MeasureJob, IrfilJob, AttackJob, BoundJob, ReconstructJob, DpSgdJob,
                                                  PublicTrainingJob, LearnedAttackJob, AccountantJob, ReportJob>();
  const auto found = defaults.find(name);
  return found != defaults.end() && found->second.size() > 1;
}

namespace {

// --help's formatter: a switch shows as "--intercept,--no-intercept", without CLI11's "{false}"
// after its negation (the default is in the description).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(option, is_positional);
    for (std::size_t open = name.find('{'); open != std::string::npos; open = name.find('{')) {
      const std::size_t close = name.find('}', open);
      if (close == std::string::npos) break;
      name.erase(open, close - open + 1);
    }
    return name;
  }
};

}  // namespace

void setup_all_commands(CLI::App& app) {
  // Before the commands are added: each takes its parent's formatter.
  app.formatter(std::make_shared<HelpFormatter>());
  setup_measure(app);
  setup_accountant(app);
  setup_report(app);
  setup_dpsgd(app);
  setup_public_training(app);
  setup_bound(app);
  setup_reconstruct(app);
  setup_irfil(app);
  setup_attack(app);
  setup_learned_attack(app);
}

}  // namespace filkit::cli
