// The report's inputs (src/report/): summary JSON files and per-example CSV tables, read as
// `filkit report` reads them, then every section's handling of their fields (histograms, scatter
// points, Pareto fronts, gnuplot scripts) with a plotter that runs no gnuplot. The input is up to
// three (summary, table) pairs separated by NUL bytes: summary \0 table \0 summary \0 table ...;
// an empty table means none. Images are not re-loaded (settings.data would name any file).
// Checked: a summary read nests at most kMaxJsonNesting (dumping it does not overflow the stack);
// every script formed keeps the input's strings inside single-quoted gnuplot strings (no backquote
// or @macro outside them, no line break inside); every figure file has a safe name, used once.
#include "base/json_input.hpp"
#include "report/report_internal.hpp"

#include "fuzz_util.hpp"

#include <algorithm>
#include <set>

namespace {

// Whether gnuplot would substitute anything in `script`, or a quoted string would span lines:
// text outside single quotes holds no ` or @, and no single-quoted string holds a line break.
bool script_is_inert(const std::string& script) {
  bool quoted = false;
  for (std::size_t i = 0; i < script.size(); ++i) {
    const char c = script[i];
    if (quoted) {
      if (c == '\n') return false;
      if (c == '\'') {
        if (i + 1 < script.size() && script[i + 1] == '\'') ++i;  // '' is a quote inside
        else quoted = false;
      }
    } else if (c == '\'') {
      quoted = true;
    } else if (c == '`' || c == '@') {
      return false;
    }
  }
  return !quoted;
}

std::size_t depth_of(const nlohmann::json& json) {
  std::size_t deepest = 0;
  // Without recursion: the check must not be what overflows.
  std::vector<std::pair<const nlohmann::json*, std::size_t>> stack{{&json, 0}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const nlohmann::json& child : *node) stack.push_back({&child, depth + 1});
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace filkit;
  const std::vector<std::string_view> parts = fuzz::split(fuzz::as_text(data, size), '\0', 6);
  std::vector<report::Input> inputs;
  for (std::size_t k = 0; k < parts.size(); k += 2) {
    report::Input input;
    input.summary_path = fuzz::write_input("summary" + std::to_string(k / 2) + ".json", parts[k]);
    if (!fuzz::runs_or_rejects([&] { input.summary = report::read_summary(input.summary_path); })) continue;
    FILKIT_FUZZ_CHECK(input.summary.is_object() && input.summary["command"].is_string());
    FILKIT_FUZZ_CHECK(depth_of(input.summary) <= static_cast<std::size_t>(detail::kMaxJsonNesting));
    if (k + 1 < parts.size() && !parts[k + 1].empty()) {
      input.table_path = fuzz::write_input("table" + std::to_string(k / 2) + ".csv", parts[k + 1]);
      if (!fuzz::runs_or_rejects([&] { input.table = report::read_columns(input.table_path); })) continue;
      std::size_t rows = 0;
      for (const auto& [name, values] : input.table) {
        if (&values == &input.table.begin()->second) rows = values.size();
        FILKIT_FUZZ_CHECK(values.size() == rows);
      }
    }
    inputs.push_back(std::move(input));
  }
  if (inputs.empty()) return 0;
  report::Plotter plotter = report::Plotter::dry_run();
  fuzz::runs_or_rejects([&] {
    const std::vector<report::Section> sections = report::draw_sections(inputs, plotter, {.enabled = false});
    FILKIT_FUZZ_CHECK(!sections.empty());
    std::set<std::string> files;
    for (const report::Section& section : sections)
      for (const report::Figure& figure : section.figures) {
        FILKIT_FUZZ_CHECK(files.insert(figure.file).second);
        FILKIT_FUZZ_CHECK(
            figure.file.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
                std::string::npos &&
            figure.file.front() != '.');
      }
  });
  for (const std::string& script : plotter.dry_run_scripts()) FILKIT_FUZZ_CHECK(script_is_inert(script));
  return 0;
}
