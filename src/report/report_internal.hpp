// Shared pieces of the report: inputs, sections, the gnuplot runner and data-file helpers.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/report/report.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
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
  /// Where the summary departs from its command's schema (summary_schema_violations): a summary of
  /// another filkit version, or edited. The report draws what it can and says so in a note.
  std::vector<std::string> schema_departures;
};

struct Figure {
  std::string file;  ///< PNG name inside the report directory
  std::string caption;
};

/// A table of text cells shown in the page (e.g. dpsgd's settings, one column a run).
struct Table {
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct Section {
  std::string id;  ///< prefix of the section's figure files, unique in the report
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  ///< shown as a small table
  std::vector<Table> tables;                               ///< shown after the facts
  std::vector<Figure> figures;
  std::vector<std::string> notes;  ///< figures skipped and why
};

/// Runs gnuplot scripts in a scratch directory and moves the PNGs they draw into the report
/// directory. Every file gnuplot reads or writes is named by the plotter (data-1.dat, plot-1.gp,
/// plot-1.png) and gnuplot runs inside the scratch directory, so no name from an input, nor the
/// report directory's, reaches a script.
class Plotter {
 public:
  /// Probes `gnuplot` once (throws std::runtime_error naming the command if it cannot run) and
  /// picks pngcairo, else png.
  Plotter(std::string gnuplot, std::filesystem::path scratch, std::filesystem::path out_dir);
  /// A plotter that forms every data file and script but writes and runs none, and lists each
  /// figure as drawn: the sections' handling of their inputs without gnuplot (fuzz/report_fuzz.cpp).
  static Plotter dry_run();
  /// The scripts a dry-run plotter formed, in order (for the fuzz target's checks).
  const std::vector<std::string>& dry_run_scripts() const { return dry_run_scripts_; }
  /// Writes a data file into the scratch directory; returns its name quoted for gnuplot.
  std::string data(const std::string& content);
  /// Draws `body` (gnuplot commands after terminal and output are set) into the report directory
  /// as `<section.id>-<name>.png` (figure_file) and adds it to `section`; if gnuplot fails on it,
  /// adds a note saying why instead.
  void plot(Section& section, const std::string& name, const std::string& caption, const std::string& body,
            int width = 800, int height = 500);

 private:
  /// `wanted` + ".png" with every character but letters, digits, '-', '_' and '.' (not first)
  /// replaced by '_', cut to 100, and a "-2", "-3", ... suffix when already used in this report.
  std::string figure_file(const std::string& wanted);
  /// Runs `script` of the scratch directory; empty, or gnuplot's failure for a note.
  std::string run(const std::string& script) const;
  Plotter() = default;
  std::string gnuplot_;
  std::filesystem::path scratch_, out_dir_;
  std::string terminal_;
  bool dry_run_ = false;
  int files_ = 0;                     ///< data files and scripts made, for their names
  std::set<std::string> used_files_;  ///< figure files named so far
  std::vector<std::string> dry_run_scripts_;
};

// ---------------------------------------------------------------------------------------------
// The inputs (report.cpp).

/// A summary JSON: an object with a string "command". Throws std::invalid_argument naming the file.
nlohmann::json read_summary(const std::string& path);
/// A per-example CSV table (read_csv), every column as numbers.
Columns read_columns(const std::string& path);
/// Whether the report re-loads a run's images, and the seconds a re-load may take.
struct ImageReload {
  bool enabled = true;
  double timeout_seconds = kDefaultReloadTimeout;
};

/// Every section of the report: one per input, all dpsgd inputs in one.
std::vector<Section> draw_sections(const std::vector<Input>& inputs, Plotter& plotter, const ImageReload& images);

// ---------------------------------------------------------------------------------------------
// JSON and table access that reports a missing field instead of throwing.

/// The number at `path` ("a.b.c"; array indices as numbers), or nullopt if absent or not a number.
std::optional<double> number_at(const nlohmann::json& json, const std::string& path);
/// The column, or nullptr (and a note naming the figure, the column and the table) if absent.
const std::vector<double>* column(const Input& input, const std::string& name, const std::string& figure,
                                  Section& section);

/// Text for gnuplot, drawn as written: a single-quoted string literal, in which gnuplot expands
/// neither `backquotes` nor @macros (as it does in double quotes), with quotes doubled, a line
/// break as a drawn one ('a'."\n".'b') and other control characters as spaces. Draw it with
/// `noenhanced` so that ^ _ { } @ & ~ are not markup.
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
/// Formats a number to `digits` significant digits ("nan", "inf" as such): what a reader
/// compares, such as an epsilon or an accuracy.
std::string format_digits(double value, int digits);
/// "mean (std)" of a summary's {"mean", "std", "runs"} object to `digits` significant digits, with
/// "-" for the spread of a single run (nothing varies); empty when there is no mean.
std::string mean_and_spread(const nlohmann::json& statistics, int digits);

/// The name of class k (a relabelled label of the per-example table): the summary's
/// class_names[k] (the data's own names, e.g. "T-shirt/top"), else "class c" when
/// settings.classes names the original class c, else "label k".
std::string class_name(const nlohmann::json& summary, int k);
/// A per-example table's label as a class index, or nothing when it is not an integer in int's
/// range (a corrupt table: casting it would be undefined).
std::optional<int> class_index(double label);

/// The 8 training images of the run with the largest and the 8 with the smallest `values` (one
/// per training example, row i of the training split; NaN left out), each titled by its row,
/// `quantity` and class (class_name of `labels`), in two figures named by `quantity` ("eta",
/// "dfil"), read as stored_training_images does when the summary has "images", else re-loaded as
/// run_training_images does; a note saying why when they cannot be. `of`
/// ends the captions (which run, when a section shows several). A re-load slower than
/// `timeout_seconds` is given up with a note.
void extreme_images(const Input& input, const std::vector<double>& values, const std::vector<double>& labels,
                    const std::string& quantity, Plotter& plotter, Section& section, double timeout_seconds,
                    const std::string& of = "");

// ---------------------------------------------------------------------------------------------
// The examples' images (montage.cpp).

/// The training images of a run, re-loaded as its summary records them.
struct RunImages {
  RowMatrix X;       ///< the raw values (as loaded: no pixel scaling, standardisation or PCA), one row an image
  ImageShape shape;  ///< of every row, C x H x W channel-major (ImageShape)
};

/// Re-loads the training images of the run `summary` describes: its settings (data, NAME:DIR,
/// classes, image_layout, train_size, test_fraction, max_memory, ... read back by
/// options_from_settings) and its seed, so that row i is the table's row i. Nullopt, with
/// `why_not` saying why, when the data are not images (a table), the recorded image shape
/// (preprocessing.input_image) is malformed, disagrees with its row length or with what the data
/// re-load, the images are not grey or RGB (montage_problem), the re-loaded rows are not
/// `rows`, the data cannot be re-loaded (the loader's message) or re-loading takes longer than
/// `timeout_seconds` (it runs on a thread of its own, left to finish). Never throws for a bad
/// summary.
std::optional<RunImages> run_training_images(const nlohmann::json& summary, std::size_t rows, std::string& why_not,
                                             double timeout_seconds = kDefaultReloadTimeout);

/// The training images a summary carries beside it (filkit.torch's write_summary with images):
/// its "images" object names a file in the summary's own folder, {"file": NAME, "shape": [C, H,
/// W]}, an .npy (read_npy's dtypes) of `rows` images of that shape, row i the table's example i.
/// The name must be a file name (no directory part), the file a regular one (lstat: no link,
/// FIFO or device), read within the default memory budget. Nullopt, with `why_not` saying why,
/// when any of that fails or the images cannot be drawn (montage_problem). Never throws for a bad
/// summary or file.
std::optional<RunImages> stored_training_images(const nlohmann::json& summary, const std::string& summary_path,
                                                std::size_t rows, std::string& why_not);

/// Why rows of `columns` values cannot be drawn as images of `shape`: a dimension below 1, C*H*W
/// other than `columns`, or C other than 1 (grey) or 3 (red, green, blue); empty if they can.
std::string montage_problem(const ImageShape& shape, Index columns);

/// One image as drawn: height x width pixels of 8-bit red, green and blue, row by row.
struct RgbImage {
  Index height = 0, width = 0;
  std::vector<std::array<std::uint8_t, 3>> pixels;  ///< pixel (h, w) at h * width + w
  const std::array<std::uint8_t, 3>& at(Index h, Index w) const {
    return pixels[static_cast<std::size_t>(h * width + w)];
  }
};

/// The values drawn as black (lo) and as full intensity (hi), one range for every image and
/// channel of a montage.
struct DisplayRange {
  double lo = 0, hi = 0;
};
/// The smallest and largest value of `images` (every row and channel).
DisplayRange display_range(const RowMatrix& images);

/// Row `row` of `images` (channel-major C x H x W rows, shape checked by montage_problem) as
/// drawn: value v becomes round(255 (v - lo) / (hi - lo)), clamped to 0..255 (128 when hi <= lo);
/// grey (C = 1) sets red, green and blue alike, colour (C = 3) takes channels 0, 1, 2 as red,
/// green, blue. Throws std::invalid_argument with montage_problem's reason, or for a row outside
/// the matrix.
RgbImage display_image(const RowMatrix& images, Index row, const ImageShape& shape, const DisplayRange& range);

/// gnuplot's data for `plot FILE using 1:2:3:4:5 with rgbimage`: a line "w h r g b" a pixel, so
/// column w, row h is drawn at x = w, y = h (the montage reverses the y axis: row 0 on top).
std::string rgbimage_data(const RgbImage& image);

// ---------------------------------------------------------------------------------------------
// The sections, one per command kind (sections.cpp).
void measure_section(const Input& input, Plotter& plotter, Section& section, const ImageReload& images);
void bound_section(const Input& input, Plotter& plotter, Section& section);
void reconstruct_section(const Input& input, Plotter& plotter, Section& section);
void irfil_section(const Input& input, Plotter& plotter, Section& section);
/// public_training_section.cpp: accuracy and dFIL per method, dFIL per private example, fim's cosine similarity.
void public_training_section(const Input& input, Plotter& plotter, Section& section);
/// learned_attack_section.cpp: MSE and SSIM per method with the baseline, the reconstructions' grid.
void learned_attack_section(const Input& input, Plotter& plotter, Section& section);
void attack_section(const nlohmann::json& attack, const std::string& name, Plotter& plotter, Section& section);
/// dpsgd_section.cpp: one section for every dpsgd input together: the settings and privacy of
/// each, dFIL and epsilon over the snapshots, dFIL histograms, the most and least exposed images,
/// the RDP bound beside the dFIL bounds, accuracy against the bound (the Pareto front across runs).
void dpsgd_section(const std::vector<const Input*>& inputs, Plotter& plotter, Section& section,
                   const ImageReload& images);
/// accountant_section.cpp: epsilon against steps and against the noise multiplier, and the RDP
/// curve or the PLD's epsilon against delta.
void accountant_section(const Input& input, Plotter& plotter, Section& section);

}  // namespace filkit::report
