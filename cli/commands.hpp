// The subcommands of the `filkit` tool. Each lives in its own file as an options struct plus
// setup_<command>(app) (declares the flags) and run_<command>(options) (calls the library,
// writes the outputs). run_<command> is what the tests call in-process.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace filkit::cli {

/// Registers every subcommand on `app`.
void setup_all_commands(CLI::App& app);
/// The command that the command line `args` (without the program name) names first, by its name or
/// its former name: its name, or empty where the first argument names none.
std::string_view command_named(const std::vector<std::string>& args);
/// Registers on `app` the subcommand `args` names first, or every subcommand where it names none
/// (--help, --version, a mistyped command). Declaring one command's flags is a tenth of declaring
/// all, which is most of a short run's time in the sanitizer build.
void setup_commands_for(CLI::App& app, const std::vector<std::string>& args);

void setup_measure(CLI::App& app);
void setup_accountant(CLI::App& app);
void setup_report(CLI::App& app);
void setup_dpsgd(CLI::App& app);
void setup_public_training(CLI::App& app);
void setup_bound(CLI::App& app);
void setup_reconstruct(CLI::App& app);
void setup_irfil(CLI::App& app);
void setup_attack(CLI::App& app);
void setup_learned_attack(CLI::App& app);

/// What went wrong on the command line `args` (without the program name), in filkit's words:
/// an unknown command or flag with the nearest declared ones ("--noise-multipler: did you mean
/// --noise-multiplier?"), a value given to a switch, or CLI11's message, with where the flags are
/// listed (command_line.cpp).
std::string command_line_problem(const CLI::App& app, const std::vector<std::string>& args,
                                 const CLI::ParseError& error);

}  // namespace filkit::cli
