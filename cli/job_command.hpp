// One subcommand per library job, generated from the job's option declaration (visit_fields):
// each field becomes --name-with-dashes bound straight onto the library's options struct, with its
// type, the library's default and, where commands differ, why, shown in --help, in the groups of
// option_groups.hpp. Besides the fields every job command has --out, --json, --report, the job's
// further outputs, --threads and --quiet. No option is declared here.
#pragma once

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/jobs/job.hpp"
#include "option_groups.hpp"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace filkit::cli {

inline std::string flag_name(std::string_view field) {
  std::string flag = "--" + std::string(field);
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

/// The default of a field as --help shows it: its JSON setting, strings unquoted, booleans as
/// on/off, an empty text or list as "none".
template <typename T>
std::string shown_default(const T& field) {
  const nlohmann::json shown = option_to_json(field);
  if (shown.is_boolean()) return shown.get<bool>() ? "on" : "off";
  if (shown.is_string()) return shown.get<std::string>().empty() ? "none" : shown.get<std::string>();
  if (shown.is_array() && shown.empty()) return "none";
  std::string text = shown.dump();
  if (shown.is_array()) text = text.substr(1, text.size() - 2);  // 0,1 as typed, not [0,1]
  return text;
}

/// What --help shows for a value of type T: numbers as FLOAT or INT, sizes as SIZE (bytes, or
/// 2G, 512M), short enums by their spellings, lists as T,..., auto options as T|auto.
template <typename T>
std::string type_name() {
  if constexpr (is_optional<T>::value) {
    return type_name<typename T::value_type>() + "|auto";
  } else if constexpr (is_vector<T>::value) {
    return type_name<typename T::value_type>() + ",...";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "on|off";
  } else if constexpr (std::is_same_v<T, ByteSize>) {
    return "SIZE";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "FLOAT";
  } else if constexpr (std::is_integral_v<T>) {
    return "INT";
  } else if constexpr (std::is_enum_v<T>) {
    std::string spellings;
    for (const auto& [value, spelling] : EnumNames<T>::names)
      spellings += (spellings.empty() ? "" : "|") + std::string(spelling);
    return spellings.size() <= 30 ? spellings : "CHOICE";
  } else {
    return "TEXT";
  }
}

/// The help line of a field: its declared help, the enum's spellings, the command's default and,
/// where commands default differently, this command's reason (Job::default_reasons).
template <typename T>
std::string described(const char* help, const T& field, std::string_view reason) {
  std::string text = help;
  if constexpr (std::is_enum_v<T>) {
    if (type_name<T>() == "CHOICE") text += " (" + enum_spellings<T>() + ")";
  }
  text += " [default: " + shown_default(field);
  if (!reason.empty()) text += "; " + std::string(reason);
  return text + "]";
}

/// Whether the commands' defaults for option `name` differ (commands.cpp compares every job's).
bool defaults_differ_between_commands(std::string_view name);

/// Binds the fields of one --help group to flags. Every value is read by the library's
/// option_from_text, as Python strings are: integers in their type's range (CLI11 would clamp or
/// wrap them), sizes like 2G. A renamed option (kRenamedOptions) also answers to its former name.
struct FlagBinder {
  CLI::App& command;
  std::string_view job;
  std::string_view group;
  const std::vector<DefaultReason>& reasons;  ///< the job's reasons for particular defaults
  std::string_view defaults_reason;           ///< the job's reason for the others

  /// Why this command's default differs from another's: empty where they are equal.
  std::string_view reason_for(std::string_view name) const {
    for (const DefaultReason& reason : reasons)
      if (reason.name == name) return reason.reason;
    return defaults_differ_between_commands(name) ? defaults_reason : std::string_view();
  }

  template <typename T>
  void operator()(const char* name, T& field, const char* help) const {
    if (option_group(job, name) != group) return;
    std::string names = flag_name(name);
    const std::string_view former = former_option_name(name);
    if (!former.empty()) names += "," + flag_name(former);
    const std::string text = described(help, field, reason_for(name));
    CLI::Option* option = nullptr;
    if constexpr (std::is_same_v<T, bool>) {
      // A default-on switch needs its negation; both spellings exist for every bool.
      std::string switches = names + ",!" + "--no-" + flag_name(name).substr(2);
      if (!former.empty()) switches += ",!--no-" + flag_name(former).substr(2);
      option = command.add_flag(switches, field, text);
    } else if constexpr (is_optional<T>::value || is_vector<T>::value) {
      // Lists take commas or repeated flags; optionals take "auto" or a value.
      option = command.add_option_function<std::vector<std::string>>(
          names,
          [&field, name](const std::vector<std::string>& texts) {
            std::string joined;
            for (const auto& text : texts) joined += (joined.empty() ? "" : ",") + text;
            option_from_text(name, joined, field);
          },
          text);
      if constexpr (is_vector<T>::value) option->delimiter(',');
      else option->expected(1);
      option->type_name(type_name<T>());
    } else {
      option = command.add_option_function<std::string>(
          names, [&field, name](const std::string& text) { option_from_text(name, text, field); }, text);
      option->type_name(type_name<T>());
    }
    option->group(std::string(group));
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

/// Why a command's defaults differ from other commands' (Job::default_reasons), or none.
template <class Job>
std::vector<DefaultReason> default_reasons_of() {
  if constexpr (requires { Job::default_reasons(); }) return Job::default_reasons();
  else return {};
}

template <class Job>
std::string_view defaults_reason_of() {
  if constexpr (requires { Job::defaults_reason; }) return Job::defaults_reason;
  else return {};
}

template <class Job>
CLI::App* add_job_command(CLI::App& app) {
  auto options = std::make_shared<typename Job::Options>();
  auto run = std::make_shared<RunFlags>();
  CLI::App* command = app.add_subcommand(Job::name, Job::description);
  if (*former_job_name<Job>()) command->alias(former_job_name<Job>());  // scripts written for the old name
  // The flags write into *options: the command keeps it alive even where its callback is replaced
  // (a test parsing without running does so).
  command->parse_complete_callback([options] {});
  // Group by group, so that --help lists the groups in kOptionGroups' order.
  const std::vector<DefaultReason> reasons = default_reasons_of<Job>();
  // A field without a group would have no flag at all: refuse to build such a command line.
  visit_fields(*options, [](const char* name, auto&, const char*) {
    if (option_group(Job::name, name).empty())
      throw std::logic_error(std::string("filkit ") + Job::name + ": option '" + name +
                             "' has no --help group in cli/option_groups.hpp");
  });
  for (const std::string_view group : kOptionGroups)
    visit_fields(*options, FlagBinder{*command, Job::name, group, reasons, defaults_reason_of<Job>()});
  const std::string outputs = "Outputs", resources = "Resources";
  if (*Job::out_help) command->add_option("--out", run->outputs.out, Job::out_help)->type_name("PATH")->group(outputs);
  command
      ->add_option("--json", run->outputs.json,
                   "Summary JSON: every setting (autos resolved), the results, timings, seed and version")
      ->type_name("PATH")
      ->group(outputs);
  if constexpr (!requires { Job::writes_its_own_report; })
    command
        ->add_option("--report", run->outputs.report,
                     "Also write a report here: figures and report.html (as `filkit report`); the summary and "
                     "table go here too unless --json/--out name them")
        ->type_name("DIR")
        ->group(outputs);
  for (const ExtraOutput& extra : Job::extra_outputs())
    command->add_option(flag_name(extra.name), run->outputs.extra[extra.name], extra.help)
        ->type_name("PATH")
        ->group(outputs);
  command->add_flag("--quiet,-q", run->quiet, "No progress and no summary")->group(outputs);
  command
      ->add_option_function<std::string>(
          "--threads", [run](const std::string& text) { run->threads = parse_thread_count("threads", text); },
          "OpenMP threads [default: 0 = all " + std::to_string(hardware_thread_count()) +
              " hardware threads, or OMP_NUM_THREADS when set]")
      ->type_name("INT")
      ->group(resources);
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
