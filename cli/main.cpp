// filkit: Fisher information loss of trained models. main only wires up the subcommands.
#include "commands.hpp"

#include "filkit/base/stage.hpp"
#include "filkit/base/types.hpp"

#include <exception>
#include <iostream>
#include <new>

int main(int argc, char** argv) {
  CLI::App app{"filkit " + filkit::version() +
               ": how much a trained model leaks about its training examples, measured by "
               "Fisher information loss (FIL). Run `filkit measure` for the default job."};
  app.set_version_flag("--version", filkit::version());
  app.require_subcommand(1);
  filkit::cli::setup_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const std::bad_alloc&) {
    std::cerr << "filkit: error: " << filkit::out_of_memory_message()
              << "; try a smaller subset (--train-size, --classes) or a lower --max-memory, which makes filkit "
                 "refuse inputs larger than that before loading them\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "filkit: error: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
