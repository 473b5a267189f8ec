// The report's inputs (src/report/): summary JSON files and per-example CSV tables, read as
// `filkit report` reads them, then every section's handling of their fields (histograms, scatter
// points, Pareto fronts, gnuplot scripts) with a plotter that runs no gnuplot. The input is up to
// three (summary, table) pairs separated by NUL bytes: summary \0 table \0 summary \0 table ...;
// an empty table means none. Images are not re-loaded (settings.data would name any file).
#include "report/report_internal.hpp"

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace filkit;
  const std::vector<std::string_view> parts = fuzz::split(fuzz::as_text(data, size), '\0', 6);
  std::vector<report::Input> inputs;
  for (std::size_t k = 0; k < parts.size(); k += 2) {
    report::Input input;
    input.summary_path = fuzz::write_input("summary" + std::to_string(k / 2) + ".json", parts[k]);
    if (!fuzz::runs_or_rejects([&] { input.summary = report::read_summary(input.summary_path); })) continue;
    FILKIT_FUZZ_CHECK(input.summary.is_object() && input.summary["command"].is_string());
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
    const std::vector<report::Section> sections = report::draw_sections(inputs, plotter, false);
    FILKIT_FUZZ_CHECK(!sections.empty());
  });
  return 0;
}
