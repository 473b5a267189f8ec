// Shared pieces of the report: inputs, sections, the gnuplot runner and data-file helpers.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace filkit::report {

/// A per-example CSV as numeric columns ("nan"/unparsable cells become NaN).
using Columns = std::map<std::string, std::vector<double>>;

struct Input {
  std::string summary_path;
  nlohmann::json summary;
  std::string table_path;  ///< empty: no table
  Columns table;
};

struct Figure {
  std::string file;  ///< PNG name inside the report directory
  std::string caption;
};

struct Section {
  std::string id;  ///< prefix of the section's figure files, unique in the report
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  ///< shown as a small table
  std::vector<Figure> figures;
  std::vector<std::string> notes;  ///< figures skipped and why
};

/// Runs gnuplot scripts in a scratch directory and moves the PNGs they draw into the report
/// directory.
class Plotter {
 public:
  /// Probes `gnuplot` once (throws std::runtime_error naming the command if it cannot run) and
  /// picks pngcairo, else png.
  Plotter(std::string gnuplot, std::filesystem::path scratch, std::filesystem::path out_dir);
  /// A plotter that forms every data file and script but writes and runs none, and lists each
  /// figure as drawn: the sections' handling of their inputs without gnuplot (fuzz/report_fuzz.cpp).
  static Plotter dry_run();
  /// Writes a data file into the scratch directory; returns its path quoted for gnuplot.
  std::string data(const std::string& name, const std::string& content) const;
  /// Draws `body` (gnuplot commands after terminal and output are set) into
  /// `<section.id>-<name>.png` of the report directory and adds it to `section`.
  void plot(Section& section, const std::string& name, const std::string& caption, const std::string& body,
            int width = 800, int height = 500);

 private:
  void run(const std::filesystem::path& script) const;
  Plotter() = default;
  std::string gnuplot_;
  std::filesystem::path scratch_, out_dir_;
  std::string terminal_;
  bool dry_run_ = false;
};

// ---------------------------------------------------------------------------------------------
// The inputs (report.cpp).

/// A summary JSON: an object with a string "command". Throws std::invalid_argument naming the file.
nlohmann::json read_summary(const std::string& path);
/// A per-example CSV table (read_csv), every column as numbers.
Columns read_columns(const std::string& path);
/// Every section of the report: one per input, all dpsgd inputs in one.
std::vector<Section> draw_sections(const std::vector<Input>& inputs, Plotter& plotter, bool images);

// ---------------------------------------------------------------------------------------------
// JSON and table access that reports a missing field instead of throwing.

/// The number at `path` ("a.b.c"; array indices as numbers), or nullopt if absent or not a number.
std::optional<double> number_at(const nlohmann::json& json, const std::string& path);
/// The column, or nullptr (and a note naming the figure, the column and the table) if absent.
const std::vector<double>* column(const Input& input, const std::string& name, const std::string& figure,
                                  Section& section);

/// Text for gnuplot: a double-quoted string literal, quotes and backslashes escaped, line breaks as \n.
std::string gnuplot_string(const std::string& text);
/// Rows of numbers as a whitespace-separated data file ("NaN" for non-finite values).
std::string rows_text(const std::vector<std::vector<double>>& rows);

/// Histogram of each group of values over common bins (log10-spaced if `log_bins`, over the
/// finite positive values then): rows "bin_centre count_group0 count_group1 ...". Empty if no
/// value is usable.
std::vector<std::vector<double>> histogram(const std::vector<std::vector<double>>& groups, bool log_bins,
                                           int bins = 40);
/// Points (x, y) with both finite and, where `log_x`/`log_y`, positive; `dropped` counts the rest.
std::vector<std::vector<double>> points(const std::vector<double>& x, const std::vector<double>& y, bool log_x,
                                        bool log_y, std::size_t* dropped);

/// Formats a number for captions and fact tables (6 significant digits).
std::string format_number(double value);

// The sections, one per command kind (report_sections.cpp).
void measure_section(const Input& input, Plotter& plotter, Section& section, bool images);
void bound_section(const Input& input, Plotter& plotter, Section& section);
void reconstruct_section(const Input& input, Plotter& plotter, Section& section);
void irfil_section(const Input& input, Plotter& plotter, Section& section);
void attack_section(const nlohmann::json& attack, const std::string& name, Plotter& plotter, Section& section);
/// One section for every dpsgd input together (the Pareto front is across runs).
void dpsgd_section(const std::vector<const Input*>& inputs, Plotter& plotter, Section& section);

}  // namespace filkit::report
