// Reports: PNG figures drawn by gnuplot and one self-contained HTML page (figures embedded as
// base64 data URIs) from the JSON summaries and per-example CSV tables the commands write.
//
// Each summary is read by its "command" field, one report section per input:
//   measure      eta histograms by class; the 8 highest- and lowest-eta training images (image
//                datasets: re-loaded with the run's recorded data settings and seed, in training
//                order, each drawn H x W, grey or red-green-blue, by its C x H x W shape; tables
//                and shapes that do not fit get a note instead);
//                eta against loss and gradient norm; dFIL with its Cramer-Rao bound 1/dFIL^2
//                (FIL paper, Hannun et al. 2021, sections 3-4 and figures 2-4).
//   bound        histogram of the per-example dFIL bound 1/dFIL^2 against the RDP bound (dashed,
//                with the run's warning, where the data break its norm assumption) and the
//                perfect-privacy line (Guo et al. 2022, Theorems 1-2).
//   reconstruct  the bound's figures and the attack MSE against its dFIL bound, log-log, with the
//                line MSE = bound.
//   dpsgd        one section for every dpsgd input (dpsgd_section.cpp): a settings and privacy
//                table, one column a run, with spreads over --runs; per run dFIL and epsilon over
//                the snapshots, the dFIL bounds beside the RDP bound (one more than 4 decades away
//                drawn as a marker at the axis' edge), dFIL histograms per snapshot, the most and
//                least exposed images (never-sampled examples left out and counted; re-loaded, or
//                read from the .npy a filkit.torch summary names beside it, stored_training_images);
//                test accuracy against the MSE bound with the Pareto front across runs (Guo et al.
//                2022, figure 5).
//   accountant   epsilon against the steps and against the noise multiplier, the RDP curve or the
//                PLD's epsilon against delta.
//   public-training (or fim, its former name), learned-attack  per method
//                (public_training_section.cpp, learned_attack_section.cpp).
//   irfil        std (and mean) of eta per IRFIL iteration; eta before/after (FIL paper figure 7).
//   attack       attribute-inference accuracy per eta group at each sigma, and accuracy and
//                release MSE against mean eta (FIL paper figures 6-7); also drawn for attack
//                results nested in an irfil summary.
// A figure whose inputs lack a field is skipped with a note in the report; it never fails the
// report. Unknown commands get a section saying so. Legends name the data's classes (a summary's
// class_names) and sit beside the plot, never over the data; the page carries a script by which a
// headless browser checks that every image loads and no text box overlaps another (a test renders
// every command's report so).
//
// The inputs are not trusted: their strings (method names, keys) reach gnuplot only as
// single-quoted string literals, drawn as written and never run; gnuplot reads and writes only
// files the report names itself, inside its scratch directory, whatever the report directory is
// called; a summary nesting arrays and objects deeper than 64 levels is refused; the images are
// re-loaded only from regular files (settings.data naming a FIFO, device or directory is a note),
// within the default memory budget; images stored beside a summary only from a regular file named
// by a file name in the summary's folder (no directory part, no link), within the same budget.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace filkit {

/// Seconds the report's re-load of a run's images may take, unless told (a real dataset takes
/// seconds; a minute is far from any real load and near enough not to hang a report).
inline constexpr double kDefaultReloadTimeout = 60.0;

struct ReportOptions {
  /// Summary JSON files (each with a "command" field), one section each, in this order.
  std::vector<std::string> inputs;
  /// Per-example CSV tables: the k-th belongs to the k-th input; an empty path, or fewer tables
  /// than inputs, leaves an input without one (its per-example figures are skipped with a note).
  std::vector<std::string> tables;
  /// Directory of report.html and the PNG figures; created if missing.
  std::string out_dir;
  /// The gnuplot executable (searched on PATH unless it contains a '/').
  std::string gnuplot = "gnuplot";
  /// Re-load the raw images of image datasets for the highest/lowest-eta grids.
  bool images = true;
  /// Seconds a re-load may take (> 0); a slower one is given up with a note (the loading thread,
  /// which cannot be interrupted, is left to finish within the memory budget).
  double reload_timeout = kDefaultReloadTimeout;
  /// Throws OptionError naming the option: no inputs, more tables than inputs, empty out_dir or
  /// gnuplot, a reload_timeout that is not > 0.
  void validate() const;
};

template <class Visit>
void visit_fields(ReportOptions& o, Visit&& visit) {
  visit("input", o.inputs, "A summary JSON (--json of a command); repeatable, one section each");
  visit("table", o.tables, "A per-example CSV (--out of a command); repeatable, the k-th belongs to the k-th input");
  visit("report", o.out_dir, "Report directory (report.html and the PNG figures); created if missing");
  visit("gnuplot", o.gnuplot, "The gnuplot executable");
  visit("images", o.images, "Re-load the dataset for the highest/lowest-eta images");
  visit("reload_timeout", o.reload_timeout, "Seconds the images' dataset may take to re-load; slower: a note");
}

struct ReportResult {
  std::string html;                  ///< path of report.html
  std::vector<std::string> figures;  ///< paths of the PNG figures, in report order
  std::vector<std::string> notes;    ///< figures skipped and why (also shown in the report)
};

/// Reads the inputs, draws the figures and writes report.html. Every file is replaced whole (a
/// temporary beside it, then renamed; report.html by write_output_file, so a link is written
/// through). Throws std::invalid_argument naming the file
/// for unreadable or malformed inputs (or a summary without "command"), std::runtime_error
/// naming the command when gnuplot is missing. A figure gnuplot fails to draw is a note.
ReportResult write_report(const ReportOptions& options);

/// Whether the report draws a section of its own for the summaries of `command` (their "command"
/// field; a former name included); the others get their facts and a note.
bool has_report_section(std::string_view command);

}  // namespace filkit
