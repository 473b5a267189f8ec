// The command line's error messages: CLI11's in filkit's form, with the nearest flags or commands
// to a mistyped one (CLI11 suggests none).
#include "commands.hpp"

#include "filkit/base/options.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace filkit::cli {

namespace {

std::string joined(const std::vector<std::string>& names, const std::string& last_separator) {
  std::string text;
  for (std::size_t k = 0; k < names.size(); ++k)
    text += (k == 0 ? "" : k + 1 == names.size() ? last_separator : ", ") + names[k];
  return text;
}

// Every long name of the command's options and switches (--x and --no-x), and -h/--help.
std::vector<std::string> flag_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_fnames())
      if (std::find(names.begin(), names.end(), name) == names.end() && name.rfind("--", 0) == 0) names.push_back(name);
  }
  return names;
}

// The option a typed flag names ("--x" or "-x"), or nullptr.
const CLI::Option* option_named(const CLI::App& command, const std::string& typed) {
  for (const CLI::Option* option : command.get_options())
    if (option->check_name(typed)) return option;
  return nullptr;
}

}  // namespace

std::string command_line_problem(const CLI::App& app, const std::vector<std::string>& args,
                                 const CLI::ParseError& error) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(command->get_name());
  const auto chosen = app.get_subcommands();
  if (chosen.empty()) {
    const std::string first = args.empty() ? "" : args.front();
    if (!first.empty() && first[0] != '-') {
      const std::vector<std::string> nearest = nearest_names(first, commands);
      return "unknown command '" + first + "'" +
             (nearest.empty() ? "" : "; did you mean " + joined(nearest, " or ") + "?") +
             " (the commands: " + joined(commands, ", ") + "; filkit --help)";
    }
    return std::string(error.what()) + "; the commands: " + joined(commands, ", ") + " (filkit --help)";
  }
  const CLI::App& command = *chosen.front();
  const std::string help = " (filkit " + command.get_name() + " --help lists the flags)";
  if (error.get_exit_code() != static_cast<int>(CLI::ExitCodes::ExtrasError)) return std::string(error.what()) + help;

  // Arguments the command does not take: mistyped flags, or values given to a switch.
  std::vector<std::string> problems;
  const std::vector<std::string> known = flag_names(command);
  const std::vector<std::string> extras = app.remaining(true);
  for (std::size_t e = 0; e < extras.size(); ++e) {
    const std::string& extra = extras[e];
    if (extra.rfind("-", 0) == 0 && extra.size() > 1) {
      const std::string typed = extra.substr(0, extra.find('='));
      const std::vector<std::string> nearest = nearest_names(typed, known);
      problems.push_back("unknown flag " + typed +
                         (nearest.empty() ? "" : ": did you mean " + joined(nearest, " or ") + "?"));
      // Its value, if it had one, is no further problem.
      if (extra.find('=') == std::string::npos && e + 1 < extras.size() && extras[e + 1].rfind("-", 0) != 0) ++e;
      continue;
    }
    // A value after a switch (which takes none), e.g. -q 0.04 where -q is --quiet.
    std::string after_switch;
    for (std::size_t k = 1; k < args.size(); ++k)
      if (args[k] == extra && args[k - 1].rfind("-", 0) == 0)
        if (const CLI::Option* option = option_named(command, args[k - 1].substr(0, args[k - 1].find('=')));
            option != nullptr && option->get_expected_max() == 0)
          after_switch = args[k - 1] + " is " + option->get_name(false, false) + ", a switch that takes no value";
    problems.push_back("unexpected argument '" + extra + "'" + (after_switch.empty() ? "" : " (" + after_switch + ")"));
  }
  if (problems.empty()) return std::string(error.what()) + help;
  return joined(problems, "; ") + help;
}

}  // namespace filkit::cli
