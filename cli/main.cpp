// filkit: Fisher information loss of trained models. main only wires up the subcommands.
#include "commands.hpp"
#include "job_command.hpp"

#include "filkit/base/communicator.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/types.hpp"

#include <chrono>
#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

// Options named in the library's messages as the chosen command's flags (--name-with-dashes); a
// name that is no flag of it stays as it is.
filkit::OptionSpelling flag_spelling(const CLI::App& app) {
  const auto chosen = app.get_subcommands();
  const CLI::App* command = chosen.empty() ? nullptr : chosen.front();
  return [command](std::string_view name) {
    const std::string flag = filkit::cli::flag_name(std::string(name).c_str());
    return command != nullptr && command->get_option_no_throw(flag) != nullptr ? flag : std::string(name);
  };
}

// The exit status of an error by its kind (base/errors.hpp), sysexits.h's codes: 64 a bad option
// (EX_USAGE), 65 bad data (EX_DATAERR), 70 a numerical failure (EX_SOFTWARE: the computation
// failed), 71 the machine's resources (EX_OSERR: memory, files, devices); 1 for anything else.
int exit_status(const std::exception& error) {
  const auto* typed = dynamic_cast<const filkit::Error*>(&error);
  if (typed == nullptr) return 1;
  switch (typed->kind()) {
    case filkit::ErrorKind::kOption: return 64;
    case filkit::ErrorKind::kData: return 65;
    case filkit::ErrorKind::kNumerical: return 70;
    case filkit::ErrorKind::kResource: return 71;
  }
  return 1;
}
constexpr int kOutOfMemory = 71;

}  // namespace

// The exit code of a rank that stops because rank 0 reports an error.
constexpr int kStoppedWithRankZero = 2;

// "filkit: error: ", naming the rank under mpirun.
static std::string error_prefix() {
  const filkit::Communicator& world = filkit::Communicator::world();
  if (!world.distributed()) return "filkit: error: ";
  return "filkit (rank " + std::to_string(world.rank()) + " of " + std::to_string(world.size()) + "): error: ";
}

static int run_command_line(int argc, char** argv) {
  CLI::App app{"filkit " + filkit::version() +
               ": how much a trained model leaks about its training examples, measured by "
               "Fisher information loss (FIL). Run `filkit measure` for the default job."};
  app.set_version_flag("--version", filkit::version());
  app.require_subcommand(1);
  filkit::cli::setup_commands_for(app, std::vector<std::string>(argv + 1, argv + argc));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);  // --help
    const std::vector<std::string> args(argv + 1, argv + argc);
    std::cerr << error_prefix() << filkit::cli::command_line_problem(app, args, error) << "\n";
    return error.get_exit_code();
  } catch (const filkit::StoppedWithRankZero&) {
    return kStoppedWithRankZero;
  } catch (const std::bad_alloc&) {
    std::cerr << error_prefix() << filkit::out_of_memory_message()
              << "; try a smaller subset (--train-size, --classes) or a lower --max-memory, which makes filkit "
                 "refuse inputs larger than that before loading them\n";
    return kOutOfMemory;
  } catch (const std::exception& error) {
    std::cerr << error_prefix() << filkit::error_message(error, flag_spelling(app)) << "\n";
    return exit_status(error);
  }
  return 0;
}

int main(int argc, char** argv) {
  std::optional<filkit::MpiSession> mpi;
  try {
    mpi.emplace(&argc, &argv);  // starts MPI under mpirun; nothing otherwise
  } catch (const std::exception& error) {
    std::cerr << "filkit: error: " << error.what() << "\n";
    return 1;
  }
  const int code = run_command_line(argc, argv);
  // Rank 0 prints the one message and ends every rank: aborting here at once could end rank 0
  // before it has printed; the wait is a fallback that rank 0's abort cuts short.
  if (code == kStoppedWithRankZero) std::this_thread::sleep_for(std::chrono::seconds(10));
  // The other ranks may wait in a collective this rank will not join: end them all.
  if (code != 0) filkit::MpiSession::abort_if_distributed(code);
  return code;
}
