// The job registry (filkit/jobs/registry.hpp) is the one list of jobs: every registered job is a
// subcommand and every subcommand a registered job, each has a report section or says why not,
// each is run by a command of the documentation, and docs/distributed.md names the jobs that run
// on several MPI ranks as their descriptions do. A job registered without its other parts fails
// here, naming the job and what it lacks. (Python's filkit.jobs() is read from the same list;
// python/tests/test_jobs.py checks it against the command line.)
#include "commands.hpp"

#include "filkit/base/summary_schema.hpp"
#include "filkit/jobs/registry.hpp"
#include "filkit/report/report.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace filkit {
namespace {

namespace fs = std::filesystem;

fs::path source_root() {
  const char* dir = std::getenv("FILKIT_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(FILKIT_TEST_SOURCE_DIR);
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for_each_job([&]<class Job>() { names.push_back(Job::name); });
  return names;
}

TEST(JobRegistry, EveryJobIsASubcommandAndEverySubcommandAJob) {
  CLI::App app{"filkit"};
  cli::setup_all_commands(app);
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(command->get_name());
  EXPECT_EQ(commands, registered_names()) << "the subcommands, in --help's order, are the registry's jobs";
  // Names, former names included, are unique.
  std::set<std::string> names;
  for_each_job([&]<class Job>() {
    EXPECT_TRUE(names.insert(Job::name).second) << Job::name << " registered twice";
    if (*former_job_name<Job>()) {
      EXPECT_TRUE(names.insert(former_job_name<Job>()).second) << former_job_name<Job>() << ", a former name, is taken";
      EXPECT_EQ(cli::command_named({former_job_name<Job>()}), Job::name);
    }
  });
}

TEST(JobRegistry, EveryJobHasAReportSectionOrSaysWhyNot) {
  for_each_job([]<class Job>() {
    if constexpr (requires { Job::no_report_section; }) {
      EXPECT_FALSE(has_report_section(Job::name))
          << Job::name << " says it has no report section (no_report_section) but the report draws one";
      EXPECT_NE(std::string(Job::no_report_section), "") << Job::name;
    } else {
      EXPECT_TRUE(has_report_section(Job::name))
          << Job::name << " has no section in the report (src/report/report.cpp, kSections): draw one, or say why "
          << "not in its job description (no_report_section)";
    }
    if (*former_job_name<Job>())  // older summaries still carry the former name
      EXPECT_EQ(has_report_section(former_job_name<Job>()), has_report_section(Job::name)) << Job::name;
  });
  EXPECT_FALSE(has_report_section("no-such-command"));
}

TEST(JobRegistry, EveryJobHasASummarySchemaAndEverySchemaAJob) {
  std::vector<std::string> jobs;
  for_each_job([&]<class Job>() {
    jobs.push_back(Job::name);
    EXPECT_NO_THROW(summary_schema(Job::name))
        << Job::name << " has no summary schema: add schemas/summary/" << Job::name << ".schema.json";
  });
  for (const std::string& command : summary_schema_commands())
    EXPECT_NE(std::find(jobs.begin(), jobs.end(), command), jobs.end())
        << "schemas/summary/" << command << ".schema.json names no job";
}

// The ```sh blocks of README.md and docs/*.md, which tests/docs/doc_commands.py runs.
std::string documented_commands() {
  std::vector<fs::path> files = {source_root() / "README.md"};
  for (const auto& entry : fs::directory_iterator(source_root() / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  std::string blocks;
  for (const fs::path& file : files) {
    std::istringstream lines(file_text(file));
    bool in_sh = false;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("```", 0) == 0) in_sh = !in_sh && line == "```sh";
      else if (in_sh) blocks += line + "\n";
    }
  }
  return blocks;
}

TEST(JobRegistry, EveryJobIsRunByACommandOfTheDocumentation) {
  const std::string blocks = documented_commands();
  ASSERT_FALSE(blocks.empty());
  for (const std::string& name : registered_names())
    EXPECT_TRUE(std::regex_search(blocks, std::regex("filkit " + name + "( |\\\\|$)", std::regex::multiline)))
        << "no ```sh block of README.md or docs/*.md runs `filkit " << name
        << "`: document the command with an example (tests/docs/doc_commands.py runs it)";
}

// The `name`s of a paragraph, in order.
std::vector<std::string> quoted_names(const std::string& text) {
  std::vector<std::string> names;
  const std::regex quoted("`([a-z-]+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), quoted); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

TEST(JobRegistry, TheDistributedDocsNameTheJobsThatRunOnSeveralRanks) {
  const std::string text = file_text(source_root() / "docs" / "distributed.md");
  const std::string heading = "## Which jobs run on several ranks\n\n";
  const std::size_t start = text.find(heading);
  ASSERT_NE(start, std::string::npos) << "docs/distributed.md has no section '" << heading << "'";
  // Its first sentence names the jobs that do, the next (up to the paragraph's end) the others.
  const std::size_t first = start + heading.size(), others = text.find("The other jobs", first),
                    end = text.find("\n\n", first);
  ASSERT_LT(others, end) << "docs/distributed.md, '" << heading << "': no 'The other jobs' in its first paragraph";
  std::vector<std::string> several, one;
  for_each_job([&]<class Job>() { (runs_on_mpi_ranks<Job>() ? several : one).push_back(Job::name); });
  std::vector<std::string> named_several = quoted_names(text.substr(first, others - first)),
                           named_one = quoted_names(text.substr(others, end - others));
  std::sort(several.begin(), several.end());
  std::sort(named_several.begin(), named_several.end());
  EXPECT_EQ(named_several, several) << "docs/distributed.md: the jobs that run on several ranks (runs_on_mpi_ranks)";
  // The others it names (a job that needs none of MPI, like report, may go unnamed) run on one.
  for (const std::string& name : named_one)
    EXPECT_NE(std::find(one.begin(), one.end(), name), one.end()) << name << " is named among the jobs on one process";
  // And run_job's refusal of the others names them.
  for (const std::string& name : several) EXPECT_NE(jobs_on_several_ranks().find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace filkit
