// The subcommands of the `filkit` tool: one a registered job (filkit/jobs/registry.hpp), each
// generated from its job description by add_job_command (job_command.hpp), which declares its flags
// and runs it through run_job; the tests parse and run them in-process.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace filkit::cli {

/// Registers every subcommand on `app`, in the registry's order.
void setup_all_commands(CLI::App& app);
/// The command that the command line `args` (without the program name) names first, by its name or
/// its former name: its name, or empty where the first argument names none.
std::string_view command_named(const std::vector<std::string>& args);
/// Registers on `app` the subcommand `args` names first, or every subcommand where it names none
/// (--help, --version, a mistyped command). Declaring one command's flags is a tenth of declaring
/// all, which is most of a short run's time in the sanitizer build.
void setup_commands_for(CLI::App& app, const std::vector<std::string>& args);

/// What went wrong on the command line `args` (without the program name), in filkit's words:
/// an unknown command or flag with the nearest declared ones ("--noise-multipler: did you mean
/// --noise-multiplier?"), a value given to a switch, or CLI11's message, with where the flags are
/// listed (command_line.cpp).
std::string command_line_problem(const CLI::App& app, const std::vector<std::string>& args,
                                 const CLI::ParseError& error);

}  // namespace filkit::cli
