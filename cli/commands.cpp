// The subcommands, one a registered job (filkit/jobs/registry.hpp), and what --help needs from
// all of them together.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/jobs/registry.hpp"

#include <map>
#include <set>
#include <vector>

namespace filkit::cli {

namespace {

// Every option's defaults over the commands that have it (as the JSON settings record them).
std::map<std::string, std::set<std::string>, std::less<>> defaults_by_option() {
  std::map<std::string, std::set<std::string>, std::less<>> defaults;
  for_each_job([&]<class Job>() {
    const nlohmann::json settings = settings_json(typename Job::Options{});
    for (const auto& [name, value] : settings.items()) defaults[name].insert(value.dump());
  });
  return defaults;
}

}  // namespace

bool defaults_differ_between_commands(std::string_view name) {
  static const auto defaults = defaults_by_option();
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

namespace {

struct Command {
  const char* name;
  const char* former_name;  ///< "" where it had no other
  void (*setup)(CLI::App&);
};

// In --help's order: the registry's.
const std::vector<Command>& commands() {
  static const std::vector<Command> all = [] {
    std::vector<Command> list;
    for_each_job([&]<class Job>() {
      list.push_back({Job::name, former_job_name<Job>(), [](CLI::App& app) { add_job_command<Job>(app); }});
    });
    return list;
  }();
  return all;
}

const Command* find_command(const std::vector<std::string>& args) {
  if (args.empty()) return nullptr;
  for (const Command& command : commands())
    if (args.front() == command.name || (*command.former_name && args.front() == command.former_name)) return &command;
  return nullptr;
}

}  // namespace

void setup_all_commands(CLI::App& app) {
  // Before the commands are added: each takes its parent's formatter.
  app.formatter(std::make_shared<HelpFormatter>());
  for (const Command& command : commands()) command.setup(app);
}

std::string_view command_named(const std::vector<std::string>& args) {
  const Command* command = find_command(args);
  return command != nullptr ? command->name : std::string_view();
}

void setup_commands_for(CLI::App& app, const std::vector<std::string>& args) {
  const Command* command = find_command(args);
  if (command == nullptr) return setup_all_commands(app);
  app.formatter(std::make_shared<HelpFormatter>());
  command->setup(app);
}

}  // namespace filkit::cli
