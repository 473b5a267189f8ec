// One subcommand per library job, generated from the job's option declaration (visit_fields):
// each field becomes --name-with-dashes bound straight onto the library's options struct, with the
// library's default shown in --help. Besides the fields every job command has --out, --json,
// --report, the job's further outputs, --threads and --quiet. No option is declared here.
#pragma once

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
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

/// The default of a field as --help shows it: its JSON setting, strings unquoted.
template <typename T>
std::string shown_default(const T& field) {
  const nlohmann::json shown = option_to_json(field);
  return shown.is_string() ? shown.get<std::string>() : shown.dump();
}

/// What --help shows for a value of type T.
template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, ByteSize>) return "SIZE";
  else if constexpr (std::is_floating_point_v<T>) return "FLOAT";
  else if constexpr (std::is_integral_v<T>) return "INT";
  else return "TEXT";
}

/// Binds one field to one flag. Every value is read by the library's option_from_text, as Python
/// strings are: integers in their type's range (CLI11 would clamp or wrap them), sizes like 2G.
struct FlagBinder {
  CLI::App& command;

  template <typename T>
  void operator()(const char* name, T& field, const char* help) const {
    const std::string flag = flag_name(name);
    if constexpr (std::is_same_v<T, bool>) {
      // A default-on switch needs its negation; both spellings exist for every bool.
      command.add_flag(flag + ",!" + "--no-" + flag.substr(2), field, help)->default_str(field ? "true" : "false");
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
      option->default_str(shown_default(field));
      if constexpr (is_vector<T>::value) option->delimiter(',');
      else option->expected(1);
    } else {
      std::string described = help;
      if constexpr (std::is_enum_v<T>) described += " (" + enum_spellings<T>() + ")";
      command
          .add_option_function<std::string>(
              flag, [&field, name](const std::string& text) { option_from_text(name, text, field); }, described)
          ->default_str(shown_default(field))
          ->type_name(type_name<T>());
    }
  }
};

/// A thread count from text, checked against the machine (check_thread_count).
inline int parse_thread_count(const std::string& name, const std::string& text) {
  long long threads = 0;
  option_from_text(name, text, threads);
  check_thread_count(name, threads);
  return static_cast<int>(threads);
}

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
  command->add_option_function<std::string>(
      "--threads", [run](const std::string& text) { run->threads = parse_thread_count("threads", text); },
      "OpenMP threads; 0 = all cores, at most " + std::to_string(max_thread_count()))
      ->default_str("0")
      ->type_name("INT");
  command->add_flag("--quiet,-q", run->quiet, "No progress and no summary");
  command->callback([options, run] {
    if (run->threads > 0) omp_set_num_threads(run->threads);
    // An output written to standard output keeps it to itself: the summary table goes to stderr.
    const JobOutputs& outputs = run->outputs;
    bool stdout_taken = outputs.out == kStandardOutput || outputs.json == kStandardOutput;
    for (const auto& [name, path] : outputs.extra) stdout_taken = stdout_taken || path == kStandardOutput;
    run_job<Job>(*options, outputs, run->quiet, stdout_taken ? &std::cerr : &std::cout);
  });
  return command;
}

}  // namespace filkit::cli
