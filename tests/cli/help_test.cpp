// The command line's surface: help in groups with typed values and defaults, one meaning of -q,
// the reasons where commands default differently, former names still read, and the messages for
// mistyped flags and commands (the nearest declared names).
#include "commands.hpp"
#include "job_command.hpp"
#include "option_groups.hpp"

#include "test_util.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace filkit::cli {
namespace {

// Every command, built as the filkit executable builds them.
struct Commands {
  CLI::App app{"filkit"};
  Commands() {
    app.require_subcommand(1);
    setup_all_commands(app);
  }
  std::vector<CLI::App*> all() {
    return app.get_subcommands([](const CLI::App*) { return true; });
  }
  CLI::Option* option(const std::string& command, const std::string& flag) {
    return app.get_subcommand(command)->get_option_no_throw(flag);
  }
};

std::string problem(const std::vector<std::string>& args) {
  Commands commands;
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    commands.app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    return command_line_problem(commands.app, args, error);
  }
  ADD_FAILURE() << "parsed without an error";
  return "";
}

TEST(Help, ListsEveryOptionOfEveryCommandInOneOfTheGroups) {
  Commands commands;
  const std::set<std::string> groups(kOptionGroups.begin(), kOptionGroups.end());
  for (CLI::App* command : commands.all())
    for (const CLI::Option* option : command->get_options()) {
      if (option->get_name() == "--help") continue;
      EXPECT_TRUE(groups.count(option->get_group()))
          << command->get_name() << " " << option->get_name() << " is in group '" << option->get_group() << "'";
    }
  // And the groups appear in their order in --help.
  const std::string help = commands.app.get_subcommand("dpsgd")->help();
  std::size_t at = 0;
  for (const char* group :
       {"Data:", "Preprocessing:", "Model:", "Privacy:", "Training:", "Accounting:", "Outputs:", "Resources:"}) {
    const std::size_t found = help.find(std::string("\n") + group);
    ASSERT_NE(found, std::string::npos) << group << "\n" << help;
    EXPECT_GT(found, at) << group << " out of order";
    at = found;
  }
}

TEST(Help, TypesNumbersAsNumbersAndShowsEveryDefault) {
  Commands commands;
  EXPECT_EQ(commands.option("accountant", "--sample-rate")->get_type_name(), "FLOAT|auto");
  EXPECT_EQ(commands.option("dpsgd", "--noise-multiplier")->get_type_name(), "FLOAT");
  EXPECT_EQ(commands.option("dpsgd", "--steps")->get_type_name(), "INT");
  EXPECT_EQ(commands.option("dpsgd", "--hidden")->get_type_name(), "INT,...");
  EXPECT_EQ(commands.option("dpsgd", "--accountant")->get_type_name(), "rdp|pld");
  EXPECT_EQ(commands.option("dpsgd", "--max-memory")->get_type_name(), "SIZE");
  for (CLI::App* command : commands.all())
    for (const CLI::Option* option : command->get_options()) {
      const std::string name = option->get_name(), type = option->get_type_name();
      // Help, quiet and the output paths have nothing to default.
      if (name == "--help" || name == "--quiet" || type == "PATH" || type == "DIR") continue;
      EXPECT_NE(option->get_description().find("[default: "), std::string::npos)
          << command->get_name() << " " << name << ": " << option->get_description();
    }
}

TEST(Help, DashQIsQuietEverywhereAndNoShortFlagClashes) {
  Commands commands;
  for (CLI::App* command : commands.all()) {
    std::map<std::string, std::string> short_names;
    for (const CLI::Option* option : command->get_options())
      for (const std::string& name : option->get_snames()) {
        EXPECT_TRUE(short_names.emplace(name, option->get_name()).second) << command->get_name() << " -" << name;
        if (name == "q") EXPECT_EQ(option->get_name(), "--quiet") << command->get_name();
      }
    EXPECT_TRUE(short_names.count("q")) << command->get_name() << " has no -q";
  }
}

// Where commands default differently for the same option, each command's help line says why.
TEST(Help, StatesTheReasonWhereCommandsDefaultDifferently) {
  Commands commands;
  std::map<std::string, std::map<std::string, std::string>> defaults;  // flag -> command -> description
  for (CLI::App* command : commands.all())
    for (const CLI::Option* option : command->get_options())
      defaults[option->get_name()][command->get_name()] = option->get_description();
  for (const char* flag : {"--label", "--pca", "--rdp-delta", "--row-scaling", "--data", "--batch-size"}) {
    ASSERT_TRUE(defaults.count(flag)) << flag;
    for (const auto& [command, description] : defaults[flag]) {
      const std::size_t at = description.find("[default: ");
      ASSERT_NE(at, std::string::npos) << command << " " << flag;
      EXPECT_NE(description.find(';', at), std::string::npos)
          << command << " " << flag << " states no reason for its default: " << description;
    }
  }
  // The three the issue names, with their particular reasons.
  EXPECT_NE(defaults["--label"]["dpsgd"].find("features"), std::string::npos) << defaults["--label"]["dpsgd"];
  EXPECT_NE(defaults["--label"]["measure"].find("FIL paper"), std::string::npos) << defaults["--label"]["measure"];
  EXPECT_NE(defaults["--pca"]["dpsgd"].find("raw pixels"), std::string::npos);
  EXPECT_NE(defaults["--rdp-delta"]["public-training"].find("thesis"), std::string::npos);
  EXPECT_NE(defaults["--rdp-delta"]["dpsgd"].find("1/n"), std::string::npos);
  // An option every command defaults alike states none.
  EXPECT_EQ(defaults["--standardize"]["dpsgd"].find(';'), std::string::npos) << defaults["--standardize"]["dpsgd"];
}

// public-training's help says which defaults are the thesis' and which are filkit's: uniform
// private batches are filkit's (the thesis' code shuffles), not "the thesis' experiments".
TEST(Help, PublicTrainingSaysWhichDefaultsAreFilkitsRatherThanTheThesis) {
  Commands commands;
  const CLI::App* command = commands.app.get_subcommand("public-training");
  const auto description = [&](const char* flag) { return command->get_option(flag)->get_description(); };
  for (const char* flag :
       {"--sampling", "--pretrain-sampling", "--pretrain-steps", "--public-split", "--intercept", "--init-scale"}) {
    const std::string text = description(flag);
    EXPECT_NE(text.find("[default: "), std::string::npos) << flag;
    EXPECT_NE(text.find("filkit's", text.find("[default: ")), std::string::npos) << flag << ": " << text;
  }
  EXPECT_NE(description("--sampling").find("the thesis' code shuffles"), std::string::npos)
      << description("--sampling");
  for (const char* flag : {"--clip-norm", "--noise-multiplier", "--steps", "--batch-size"})
    EXPECT_NE(description(flag).find("the thesis' table 3.1 setting"), std::string::npos)
        << flag << ": " << description(flag);
}

TEST(CommandLine, ReadsRenamedOptionsByTheirFormerNamesToo) {
  for (const char* flag : {"--sample-rate", "--q"}) {
    Commands commands;
    CLI::App* accountant = commands.app.get_subcommand("accountant");
    accountant->callback({});  // parse only
    commands.app.parse(std::string("accountant ") + flag + " 0.04 --noise-multiplier 1 --steps 10", false);
    EXPECT_EQ(accountant->get_option(flag)->count(), 1u) << flag;
    EXPECT_EQ(accountant->get_option("--sample-rate")->as<std::string>(), "0.04");
  }
  Commands commands;
  CLI::App* measure = commands.app.get_subcommand("measure");
  measure->callback({});
  commands.app.parse("measure --scale none --pixel-scale on", false);
  EXPECT_EQ(measure->get_option("--row-scaling")->count(), 1u);
  EXPECT_EQ(measure->get_option("--scale-pixels")->count(), 1u);
}

TEST(CommandLine, SuggestsTheNearestFlagsAndCommands) {
  EXPECT_EQ(problem({"dpsgd", "--noise-multipler", "2"}),
            "unknown flag --noise-multipler: did you mean --noise-multiplier? (filkit dpsgd --help lists the flags)");
  EXPECT_EQ(problem({"mesure"}).rfind("unknown command 'mesure'; did you mean measure?", 0), 0u) << problem({"mesure"});
  // -q is --quiet: a value after it is named as such.
  const std::string quiet = problem({"accountant", "-q", "0.04", "--noise-multiplier", "1", "--steps", "10"});
  EXPECT_NE(quiet.find("unexpected argument '0.04' (-q is --quiet, a switch that takes no value)"), std::string::npos)
      << quiet;
}

}  // namespace
}  // namespace filkit::cli
