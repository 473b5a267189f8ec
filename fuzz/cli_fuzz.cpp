// The command line's parsing (cli/: every subcommand's flags, bound by job_command.hpp onto the
// library's options through option_from_text, and CLI11's own parsing): the input's lines are the
// arguments after "filkit". Only the parse step runs: the top-level app's parse-complete callback,
// which CLI11 calls after every flag is parsed and checked but before the subcommands' callbacks
// (the jobs), ends the parse by an exception of its own. As in cli/main.cpp, when the first
// argument names a subcommand only that one is declared (setup_commands_for). Each app is built
// once and parsed again on every execution (CLI11 clears the previous parse's results first):
// building it was 9 in 10 of an execution's time. An option struct keeps the values of flags an earlier input gave;
// only the parse, which reads the given flags, is under test, so a finding still reproduces on its own.
#include "commands.hpp"

#include "filkit/base/types.hpp"

#include "fuzz_util.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Parsed {};  // not a std::exception: nothing in filkit or CLI11 catches it

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> arguments = {"filkit"};
  if (size > 0) {
    for (const std::string_view line : filkit::fuzz::split(filkit::fuzz::as_text(data, size), '\n', 64))
      arguments.emplace_back(line);
  }
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());

  const std::vector<std::string> args(arguments.begin() + 1, arguments.end());
  static std::map<std::string, std::unique_ptr<CLI::App>> apps;
  std::unique_ptr<CLI::App>& built = apps[std::string(filkit::cli::command_named(args))];  // "": all
  if (!built) {                                                                            // as cli/main.cpp builds it
    built = std::make_unique<CLI::App>("filkit " + filkit::version());
    built->set_version_flag("--version", filkit::version());
    built->require_subcommand(1);
    filkit::cli::setup_commands_for(*built, args);
    built->parse_complete_callback([] { throw Parsed{}; });
  }
  CLI::App& app = *built;
  filkit::fuzz::runs_or_rejects([&] {
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
      FILKIT_FUZZ_CHECK(false);  // a successful parse goes on to the jobs
    } catch (const Parsed&) {
    }
  });
  return 0;
}
