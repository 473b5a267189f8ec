// One subcommand per library job, generated from the job's option declaration (visit_fields):
// each field becomes --name-with-dashes bound straight onto the library's options struct, with the
// library's default shown in --help. Besides the fields every job command has --out, --json,
// --report, the job's further outputs, --threads and --quiet. No option is declared here.
#pragma once

#include "filkit/base/options.hpp"
#include "filkit/jobs/job.hpp"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>

namespace filkit::cli {

inline std::string flag_name(const char* field) {
  std::string flag = std::string("--") + field;
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

/// Binds one field to one flag.
struct FlagBinder {
  CLI::App& command;

  template <typename T>
  void operator()(const char* name, T& field, const char* help) const {
    const std::string flag = flag_name(name);
    if constexpr (std::is_same_v<T, bool>) {
      // A default-on switch needs its negation; both spellings exist for every bool.
      command.add_flag(flag + ",!" + "--no-" + flag.substr(2), field, help)->default_str(field ? "true" : "false");
    } else if constexpr (std::is_enum_v<T>) {
      command
          .add_option_function<std::string>(
              flag, [&field, name](const std::string& text) { option_from_text(name, text, field); },
              std::string(help) + " (" + enum_spellings<T>() + ")")
          ->default_str(to_string(field));
    } else if constexpr (is_optional<T>::value || is_vector<T>::value) {
      // Lists take commas or repeated flags; optionals take "auto" or a value.
      auto* option = command.add_option_function<std::vector<std::string>>(
          flag,
          [&field, name](const std::vector<std::string>& texts) {
            std::string joined;
            for (const auto& text : texts) joined += (joined.empty() ? "" : ",") + text;
            option_from_text(name, joined, field);
          },
          help);
      const nlohmann::json shown = option_to_json(field);
      option->default_str(shown.is_string() ? shown.get<std::string>() : shown.dump());
      if constexpr (is_vector<T>::value) option->delimiter(',');
      else option->expected(1);
    } else {
      command.add_option(flag, field, help)->capture_default_str();
    }
  }
};

/// Run-time flags of every job command that are not settings of the job.
struct RunFlags {
  JobOutputs outputs;
  int threads = 0;
  bool quiet = false;
};

template <class Job>
CLI::App* add_job_command(CLI::App& app) {
  auto options = std::make_shared<typename Job::Options>();
  auto run = std::make_shared<RunFlags>();
  CLI::App* command = app.add_subcommand(Job::name, Job::description);
  visit_fields(*options, FlagBinder{*command});
  if (*Job::out_help) command->add_option("--out", run->outputs.out, Job::out_help);
  command->add_option("--json", run->outputs.json,
                      "Summary JSON: every setting (autos resolved), the results, timings, seed and version");
  if constexpr (!requires { Job::writes_its_own_report; })
    command->add_option("--report", run->outputs.report,
                        "Also write a report here: figures and report.html (as `filkit report`); the summary and "
                        "table go here too unless --json/--out name them");
  for (const ExtraOutput& extra : Job::extra_outputs())
    command->add_option(flag_name(extra.name), run->outputs.extra[extra.name], extra.help);
  command->add_option("--threads", run->threads, "OpenMP threads; 0 = all cores")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  command->add_flag("--quiet,-q", run->quiet, "No progress and no summary");
  command->callback([options, run] {
    if (run->threads > 0) omp_set_num_threads(run->threads);
    run_job<Job>(*options, run->outputs, run->quiet, &std::cout);
  });
  return command;
}

}  // namespace filkit::cli
