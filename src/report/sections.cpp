// The report's sections, one per command kind: which figures each draws from which fields.
#include "report/report_internal.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>

namespace filkit::report {

namespace {

// Log axes only when the values span more than two decades: narrower ranges read better linear.
bool spans_decades(const std::vector<double>& values) {
  double lo = INFINITY, hi = 0;
  for (double v : values)
    if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  return hi > 0 && hi / lo > 100;
}

double median_of(std::vector<double> values) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

// The numbers of a JSON array (NaN for null or other entries; empty if not an array), so that a
// malformed field skips a figure instead of failing the report.
std::vector<double> numbers_of(const nlohmann::json& list) {
  std::vector<double> values;
  if (list.is_array())
    for (const nlohmann::json& v : list) values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
  return values;
}

// A vertical line at x with a label, for thresholds drawn over histograms.
std::string vertical_line(double x, const std::string& label, const std::string& colour) {
  return "set arrow from " + format_number(x) + ", graph 0 to " + format_number(x) +
         ", graph 1 nohead lw 2 dt 2 lc rgb '" + colour + "'\nset label " + gnuplot_string(label) + " at " +
         format_number(x) + ", graph 0.95 right offset -0.5,0 textcolor rgb '" + colour + "'\n";
}

// ---------------------------------------------------------------------------------------------
// measure

void eta_histogram_by_class(const Input& input, Plotter& plotter, Section& section) {
  const std::string figure = "eta histogram by class";
  const auto* eta = column(input, "eta", figure, section);
  const auto* label = column(input, "label", figure, section);
  if (!eta || !label) return;
  std::map<int, std::vector<double>> by_class;
  for (std::size_t i = 0; i < eta->size(); ++i)
    if (const auto k = class_index((*label)[i])) by_class[*k].push_back((*eta)[i]);
  std::vector<std::vector<double>> groups;
  std::string plots;
  for (const auto& [k, values] : by_class) {
    groups.push_back(values);
    plots += std::string(plots.empty() ? "plot " : ", ") + "datafile using 1:" + std::to_string(groups.size() + 1) +
             " with histeps lw 2 title " + gnuplot_string(class_name(input.summary, k));
  }
  const bool log_x = spans_decades(*eta);
  const auto rows = histogram(groups, log_x);
  if (rows.empty()) {
    section.notes.push_back(figure + ": skipped, no finite eta in " + input.table_path);
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  plotter.plot(section, "eta-histogram", "Per-example FIL eta of the training examples, one histogram per class.",
               "datafile = " + data + "\n" + std::string(log_x ? "set logscale x\n" : "") +
                   "set xlabel 'eta (per-example FIL)'\nset ylabel 'training examples'\nset yrange [0:*]\n" + plots);
}

// One row of images drawn with gnuplot's `with rgbimage`, each H x W as its shape says (grey or
// red, green, blue), titled by row, `quantity` and class.
void image_grid(const RunImages& images, const std::vector<std::size_t>& rows, const Input& input,
                const std::vector<double>& values, const std::vector<double>& labels, const std::string& quantity,
                const std::string& name, const std::string& caption, Plotter& plotter, Section& section) {
  // One linear map of values to intensities for every image and channel: the smallest value of
  // the training images is black, the largest full intensity (no gamma: the pixels as an image
  // viewer shows them, grey and colour alike). The images are the values as loaded (before pixel
  // scaling, standardisation or PCA, which the report does not apply), so raw 0..255 pixels show
  // as they are and a file's own affine scaling (standardised values) is undone; one map for all
  // keeps a faint or dark example visibly so, where a stretch per image would hide it.
  const DisplayRange range = display_range(images.X);
  const ImageShape& shape = images.shape;
  std::string body = "unset grid\nunset key\nunset tics\nunset border\nset size ratio -1\nset xrange [-0.5:" +
                     std::to_string(shape.width) + "-0.5]\nset yrange [" + std::to_string(shape.height) +
                     "-0.5:-0.5]\nset multiplot layout 1," + std::to_string(rows.size()) + "\n";
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const std::size_t i = rows[k];
    const std::string data = plotter.data(rgbimage_data(display_image(images.X, static_cast<Index>(i), shape, range)));
    // Appends, not "#" + std::to_string(i): GCC 12 warns falsely (-Wrestrict) on the latter.
    std::string title = "#";
    title.append(std::to_string(i))
        .append("\n")
        .append(quantity)
        .append(" ")
        .append(format_digits(values[i], 3))
        .append("\n");
    const auto label_class = class_index(labels[i]);
    title.append(label_class ? class_name(input.summary, *label_class) : "label " + format_number(labels[i]));
    body += "set title " + gnuplot_string(title) + " noenhanced\nplot " + data + " using 1:2:3:4:5 with rgbimage\n";
  }
  plotter.plot(section, name, caption, body + "unset multiplot", 1100, 280);
}

}  // namespace

void extreme_images(const Input& input, const std::vector<double>& values, const std::vector<double>& labels,
                    const std::string& quantity, Plotter& plotter, Section& section, double timeout_seconds,
                    const std::string& of) {
  const std::string figure = "highest/lowest-" + quantity + " images";
  std::string why_not;
  // Images stored beside the summary (filkit.torch), else the run's data re-loaded.
  const auto images = input.summary.contains("images")
                          ? stored_training_images(input.summary, input.summary_path, values.size(), why_not)
                          : run_training_images(input.summary, values.size(), why_not, timeout_seconds);
  if (!images) {
    section.notes.push_back(figure + ": skipped, " + why_not);
    return;
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (std::isfinite(values[i])) order.push_back(i);
  // Stable: examples of equal value keep their training order, so the figure is the same every time.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] > values[b]; });
  const std::size_t count = std::min<std::size_t>(8, order.size());
  if (count == 0) {
    section.notes.push_back(figure + ": skipped, no finite " + quantity + " in " + input.table_path);
    return;
  }
  const std::vector<std::size_t> highest(order.begin(), order.begin() + static_cast<long>(count));
  const std::vector<std::size_t> lowest(order.rbegin(), order.rbegin() + static_cast<long>(count));
  image_grid(*images, highest, input, values, labels, quantity, "highest-" + quantity + "-images",
             "The training images with the highest " + quantity + " (the most exposed)" + of +
                 ", highest first, with their training row, " + quantity + " and class.",
             plotter, section);
  image_grid(*images, lowest, input, values, labels, quantity, "lowest-" + quantity + "-images",
             "The training images with the lowest " + quantity + " (the least exposed)" + of + ", lowest first.",
             plotter, section);
}

namespace {

void eta_scatter(const Input& input, const std::string& quantity, const std::string& axis_label, Plotter& plotter,
                 Section& section) {
  const std::string figure = "eta against " + quantity;
  const auto* eta = column(input, "eta", figure, section);
  const auto* value = column(input, quantity, figure, section);
  const auto* label = column(input, "label", figure, section);
  if (!eta || !value || !label) return;
  std::vector<std::vector<double>> rows;
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < eta->size(); ++i) {
    const bool ok = std::isfinite((*value)[i]) && (*value)[i] > 0 && std::isfinite((*eta)[i]) && (*eta)[i] > 0;
    if (ok) rows.push_back({(*value)[i], (*eta)[i], (*label)[i]});
    else ++dropped;
  }
  if (rows.empty()) {
    section.notes.push_back(figure + ": skipped, no example has a positive finite " + quantity + " and eta");
    return;
  }
  if (dropped)
    section.notes.push_back(figure + ": " + std::to_string(dropped) +
                            " example(s) with a zero or non-finite value left off the log axes");
  // One series a class, so that the legend names each colour with the data's class name.
  std::map<double, std::vector<std::vector<double>>> by_label;
  for (const auto& row : rows) by_label[row[2]].push_back(row);
  std::string plots;
  for (const auto& [label, points_of_class] : by_label) {
    const auto k = class_index(label);
    plots += std::string(plots.empty() ? "plot " : ", ") + plotter.data(rows_text(points_of_class)) +
             " using 1:2 with points pt 7 ps 0.5 title " +
             gnuplot_string(k ? class_name(input.summary, *k) : "label " + format_number(label)) + " noenhanced";
  }
  plotter.plot(section, "eta-vs-" + quantity,
               "eta against the training " + axis_label +
                   " of each example (log-log; colour = class, as the legend "
                   "names them).",
               "set logscale xy\nset key outside right top\nset xlabel " + gnuplot_string(axis_label) +
                   "\nset ylabel 'eta'\n" + plots,
               900, 500);
}

void dfil_with_bound(const Input& input, Plotter& plotter, Section& section) {
  const std::string figure = "dFIL and its Cramer-Rao bound";
  const auto* dfil = column(input, "dfil", figure, section);
  if (!dfil) return;
  std::vector<double> bound;
  for (double v : *dfil) bound.push_back(1.0 / (v * v));
  const auto dfil_rows = histogram({*dfil}, true), bound_rows = histogram({bound}, true);
  if (dfil_rows.empty()) {
    section.notes.push_back(figure + ": skipped, no positive finite dFIL in " + input.table_path);
    return;
  }
  const std::string dfil_data = plotter.data(rows_text(dfil_rows));
  const std::string bound_data = plotter.data(rows_text(bound_rows));
  const double median_bound = median_of(bound);
  plotter.plot(section, "dfil-bound",
               "Left: per-example dFIL. Right: its Cramer-Rao bound 1/dFIL^2 on the MSE of any unbiased "
               "reconstruction of the example (median " +
                   format_number(median_bound) + ").",
               "set multiplot layout 1,2\nset logscale x\nunset key\nset ylabel 'training examples'\nset yrange [0:*]\n"
               "set xlabel 'dFIL'\nplot " +
                   dfil_data +
                   " using 1:2 with histeps lw 2 lc rgb '#1f77b4'\n"
                   "set xlabel 'MSE bound 1/dFIL^2'\n" +
                   vertical_line(median_bound, "median", "#d62728") + "plot " + bound_data +
                   " using 1:2 with histeps lw 2 lc rgb '#2ca02c'\nunset multiplot",
               1100, 450);
}

// ---------------------------------------------------------------------------------------------
// bound / reconstruct

void bound_histogram(const Input& input, Plotter& plotter, Section& section) {
  const std::string figure = "dFIL bound histogram";
  const auto* dfil_bound = column(input, "dfil_bound", figure, section);
  if (!dfil_bound) return;
  std::vector<std::vector<double>> groups = {*dfil_bound};
  std::string plots = "plot datafile using 1:2 with histeps lw 2 title 'dFIL bound 1/dFIL^2'";
  if (const auto found = input.table.find("fil_bound"); found != input.table.end()) {
    groups.push_back(found->second);
    plots += ", datafile using 1:3 with histeps lw 2 title 'FIL bound 1/eta^2'";
  }
  const auto rows = histogram(groups, true);
  if (rows.empty()) {
    section.notes.push_back(figure + ": skipped, no positive finite dfil_bound in " + input.table_path);
    return;
  }
  // The x range covers the histogram and both threshold lines, which may lie outside the data.
  // The lines are named in the legend, not by labels beside them, which overprint when they are close.
  double lo = rows.front()[0], hi = rows.back()[0];
  std::string lines, caption =
                         "Per-example lower bounds on the reconstruction MSE (log scale), against the (2, eps)-RDP "
                         "bound of the whole release and the MSE of guessing with no information (perfect privacy).";
  if (const auto rdp = number_at(input.summary, "rdp.mse_bound"); rdp && *rdp > 0) {
    // The RDP bound assumes every row norm at most R: where the data break it, the line is dashed
    // and the caption says why (the run's warning).
    const nlohmann::json* satisfied = &input.summary;
    for (const char* key : {"rdp", "norm_check", "satisfied"})
      satisfied = satisfied && satisfied->is_object() && satisfied->contains(key) ? &(*satisfied)[key] : nullptr;
    const bool holds = !(satisfied && satisfied->is_boolean() && !satisfied->get<bool>());
    lines += "set arrow from " + format_number(*rdp) + ", graph 0 to " + format_number(*rdp) +
             ", graph 1 nohead lw 2 dt " + (holds ? "1" : "2") + " lc rgb '#d62728'\n";
    plots += std::string(", NaN with lines lw 2 dt ") + (holds ? "1" : "2") + " lc rgb '#d62728' title " +
             gnuplot_string(holds ? "RDP bound" : "RDP bound (does not hold here)");
    if (!holds) {
      std::string warning = "the data break its assumption on the row norms";
      if (const auto max_norm = number_at(input.summary, "rdp.norm_check.max_design_row_norm"),
          bound = number_at(input.summary, "rdp.norm_check.bound");
          max_norm && bound)
        warning = "a design row has norm " + format_digits(*max_norm, 4) + " > R = " + format_number(*bound) +
                  ", the norm the RDP guarantee assumes";
      caption += " The RDP line is dashed: it does not hold for this run (" + warning + ").";
    }
    lo = std::min(lo, *rdp), hi = std::max(hi, *rdp);
  } else {
    section.notes.push_back(figure + ": no RDP bound line, the summary lacks a positive rdp.mse_bound");
  }
  if (const auto line = number_at(input.summary, "perfect_privacy_mse"); line && *line > 0) {
    lines += "set arrow from " + format_number(*line) + ", graph 0 to " + format_number(*line) +
             ", graph 1 nohead lw 2 dt 3 lc rgb '#555555'\n";
    plots += ", NaN with lines lw 2 dt 3 lc rgb '#555555' title 'perfect privacy'";
    lo = std::min(lo, *line), hi = std::max(hi, *line);
  } else {
    section.notes.push_back(figure + ": no perfect-privacy line, the summary lacks perfect_privacy_mse");
  }
  lines += "set xrange [" + format_number(lo / 2) + ":" + format_number(hi * 2) + "]\n";
  const std::string data = plotter.data(rows_text(rows));
  plotter.plot(section, "bound-histogram", caption,
               "datafile = " + data +
                   "\nset logscale x\nset key outside right top\nset xlabel 'MSE lower bound'\n"
                   "set ylabel 'training examples'\nset yrange [0:*]\n" +
                   lines + plots,
               950, 500);
}

// The attack's MSE against one of its per-example bounds (log-log), with the line MSE = bound and
// the perfect-privacy line. With `mark_below_unbiased`, the examples whose MSE is below their
// unbiased dFIL bound are drawn apart, in red.
struct BoundFigure {
  std::string figure, name, bound_column, xlabel, caption;
  bool mark_below_unbiased = false;
};

void attack_against(const Input& input, Plotter& plotter, Section& section, const BoundFigure& f) {
  const auto* bound = column(input, f.bound_column, f.figure, section);
  const auto* attack = column(input, "attack_mse", f.figure, section);
  const auto* unbiased = f.mark_below_unbiased ? column(input, "dfil_bound", f.figure, section) : bound;
  if (!bound || !attack || !unbiased) return;
  // The two sets: [0] at or above the unbiased dFIL bound, [1] below it.
  std::vector<double> x[2], y[2];
  for (std::size_t i = 0; i < std::min({bound->size(), attack->size(), unbiased->size()}); ++i) {
    const int set = f.mark_below_unbiased && (*attack)[i] < (*unbiased)[i] ? 1 : 0;
    x[set].push_back((*bound)[i]);
    y[set].push_back((*attack)[i]);
  }
  std::size_t dropped[2] = {0, 0};
  const std::vector<std::vector<double>> rows[2] = {points(x[0], y[0], true, true, &dropped[0]),
                                                    points(x[1], y[1], true, true, &dropped[1])};
  if (rows[0].empty() && rows[1].empty()) {
    section.notes.push_back(f.figure + ": skipped, no example has a positive finite bound and attack MSE");
    return;
  }
  if (dropped[0] + dropped[1])
    section.notes.push_back(f.figure + ": " + std::to_string(dropped[0] + dropped[1]) +
                            " example(s) without a positive finite attack MSE or bound left off");
  double lo = INFINITY, hi = 0;
  for (const auto& set : rows)
    for (const auto& row : set) lo = std::min({lo, row[0], row[1]}), hi = std::max({hi, row[0], row[1]});
  std::string extra;
  if (const auto line = number_at(input.summary, "perfect_privacy_mse"); line && *line > 0) {
    extra = ", " + format_number(*line) + " with lines dt 2 lw 2 lc rgb '#555555' title 'perfect privacy'";
    lo = std::min(lo, *line), hi = std::max(hi, *line);
  }
  std::string plots;
  const char* titles[2] = {f.mark_below_unbiased ? "at or above the unbiased dFIL bound" : "examples",
                           "below the unbiased dFIL bound"};
  const char* colours[2] = {"#1f77b4", "#d62728"};
  for (int set = 0; set < 2; ++set)
    if (!rows[set].empty())
      plots += plotter.data(rows_text(rows[set])) + " using 1:2 with points pt 7 ps 0.5 lc rgb '" + colours[set] +
               "' title '" + titles[set] + "', ";
  const std::string range = "[" + format_number(lo / 2) + ":" + format_number(hi * 2) + "]";
  plotter.plot(section, f.name, f.caption,
               "set logscale xy\nset xrange " + range + "\nset yrange " + range +
                   "\nset key outside right top\nset xlabel '" + f.xlabel + "'\nset ylabel 'attack MSE'\nplot " +
                   plots + "x with lines lw 2 lc rgb '#2ca02c' title 'MSE = bound'" + extra);
}

void attack_against_bound(const Input& input, Plotter& plotter, Section& section) {
  attack_against(input, plotter, section,
                 {"attack MSE against the dFIL bound", "attack-vs-bound", "dfil_bound", "predicted MSE bound 1/dFIL^2",
                  "Realised MSE of the GLM reconstruction attack against each example's predicted dFIL bound "
                  "(log-log). The bound holds for unbiased attackers where points lie above the line MSE = bound."});
  attack_against(input, plotter, section,
                 {"attack MSE against the biased dFIL bound", "attack-vs-biased-bound", "biased_dfil_bound",
                  "biased bound (tr J/d)^2/dFIL^2 + squared bias",
                  "The same attack MSE against the dFIL bound in its biased form, at the attack's bias and the "
                  "Jacobian of its mean estimated from the same trials (docs/mathematics.md, section 6.7). Red: the "
                  "examples whose MSE is below their unbiased bound. Every attacker obeys this bound, up to the "
                  "estimates' Monte-Carlo error (the CSV's _standard_error columns).",
                  true});
}

// ---------------------------------------------------------------------------------------------
// Accuracy per eta group (deciles, lowest first) at each sigma, white-box solid and black-box
// dashed, the prior's accuracy per group in grey.
void attack_by_group(const nlohmann::json& attack, const std::string& name, const nlohmann::json& by_sigma,
                     Plotter& plotter, Section& section) {
  std::size_t groups = 0;
  for (const nlohmann::json& s : by_sigma)
    if (s.contains("white_box_by_group") && s["white_box_by_group"].is_array())
      groups = std::max(groups, s["white_box_by_group"].size());
  if (groups == 0) {
    section.notes.push_back(name + " accuracy per eta group: skipped, no by_sigma[].white_box_by_group");
    return;
  }
  std::vector<std::vector<double>> rows(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    rows[g] = {static_cast<double>(g + 1), number_at(attack, "prior_by_group." + std::to_string(g)).value_or(NAN)};
    for (const nlohmann::json& s : by_sigma)
      for (const char* kind : {"white_box_by_group.", "black_box_by_group."})
        rows[g].push_back(number_at(s, kind + std::to_string(g)).value_or(NAN));
  }
  const std::string data = plotter.data(rows_text(rows));
  std::string plots = "plot " + data + " using 1:2 with linespoints lw 2 dt 2 lc rgb '#555555' title 'prior'";
  for (std::size_t k = 0; k < by_sigma.size(); ++k) {
    const std::string sigma = format_number(number_at(by_sigma[k], "sigma").value_or(NAN));
    const std::string colour = std::to_string(k + 1);
    plots += ", '' using 1:" + std::to_string(3 + 2 * k) + " with linespoints lw 2 pt 7 lc " + colour +
             " title 'white-box, sigma " + sigma + "', '' using 1:" + std::to_string(4 + 2 * k) +
             " with linespoints lw 1 dt 2 pt 5 lc " + colour + " title 'black-box, sigma " + sigma + "'";
  }
  plotter.plot(section, name + "-by-group",
               name +
                   ": attribute-inference accuracy per eta group of the attacked examples (group 1 = lowest "
                   "eta), at each noise scale sigma.",
               "set key outside right\nset xlabel 'eta group (lowest to highest)'\nset ylabel 'attack accuracy'\n"
               "set xtics 1\n" +
                   plots,
               1000, 500);
}

}  // namespace

void measure_section(const Input& input, Plotter& plotter, Section& section, const ImageReload& images) {
  eta_histogram_by_class(input, plotter, section);
  const std::string figure = "highest/lowest-eta images";
  const auto* eta = column(input, "eta", figure, section);
  const auto* label = column(input, "label", figure, section);
  if (!images.enabled) section.notes.push_back(figure + ": skipped, image re-loading is switched off");
  else if (eta && label) extreme_images(input, *eta, *label, "eta", plotter, section, images.timeout_seconds);
  eta_scatter(input, "loss", "loss", plotter, section);
  eta_scatter(input, "gradient_norm", "gradient norm", plotter, section);
  dfil_with_bound(input, plotter, section);
}

void bound_section(const Input& input, Plotter& plotter, Section& section) {
  if (const auto rdp = number_at(input.summary, "rdp.mse_bound"))
    section.facts.push_back({"RDP MSE bound", format_number(*rdp)});
  if (const auto line = number_at(input.summary, "perfect_privacy_mse"))
    section.facts.push_back({"perfect-privacy MSE", format_number(*line)});
  bound_histogram(input, plotter, section);
}

void reconstruct_section(const Input& input, Plotter& plotter, Section& section) {
  bound_section(input, plotter, section);
  if (const auto share = number_at(input.summary, "attack.above_dfil_bound.share"))
    section.facts.push_back({"share of attack MSE at or above its bound", format_number(*share)});
  if (const auto below = number_at(input.summary, "attack.biased_bounds.below_dfil_bound.below"))
    section.facts.push_back({"examples with attack MSE below the dFIL bound", format_number(*below)});
  if (const auto below = number_at(input.summary, "attack.biased_bounds.below_biased_dfil_bound.below"))
    section.facts.push_back({"... below its biased form (by 2 standard errors)",
                             format_number(*below) + " (" +
                                 format_number(number_at(input.summary,
                                                         "attack.biased_bounds.below_biased_dfil_bound."
                                                         "below_by_two_standard_errors")
                                                   .value_or(NAN)) +
                                 ")"});
  attack_against_bound(input, plotter, section);
}

void irfil_section(const Input& input, Plotter& plotter, Section& section) {
  const nlohmann::json iterations = input.summary.value("iterations", nlohmann::json::array());
  std::vector<std::vector<double>> rows;
  for (const nlohmann::json& it : iterations) {
    const auto t = number_at(it, "iteration"), std = number_at(it, "eta.std"), mean = number_at(it, "eta.mean");
    if (t && std && mean) rows.push_back({*t, *std, *mean});
  }
  if (rows.empty()) {
    section.notes.push_back(
        "eta per iteration: skipped, the summary has no iterations[] with iteration, eta.std and eta.mean");
  } else {
    const std::string data = plotter.data(rows_text(rows));
    plotter.plot(section, "eta-per-iteration",
                 "Standard deviation and mean of eta over the training examples at each IRFIL iteration "
                 "(iteration 0 is the unweighted model): reweighting equalises eta.",
                 "set logscale y\nset xlabel 'IRFIL iteration'\nset ylabel 'eta'\nplot " + data +
                     " using 1:2 with linespoints lw 2 pt 7 title 'std of eta', '' using 1:3 with linespoints lw 2 "
                     "pt 5 title 'mean of eta'");
  }
  if (input.summary.contains("eta_before") && input.summary.contains("eta_after")) {
    const auto before = numbers_of(input.summary["eta_before"]), after = numbers_of(input.summary["eta_after"]);
    const auto hist = histogram({before, after}, spans_decades(before));
    if (!hist.empty()) {
      const std::string data = plotter.data(rows_text(hist));
      plotter.plot(section, "eta-before-after", "eta of every training example before and after IRFIL.",
                   std::string(spans_decades(before) ? "set logscale x\n" : "") +
                       "set xlabel 'eta'\nset ylabel 'training examples'\nset yrange [0:*]\nplot " + data +
                       " using 1:2 with histeps lw 2 title 'before', '' using 1:3 with histeps lw 2 title 'after'");
    }
  } else {
    section.notes.push_back("eta before/after: skipped, the summary lacks eta_before and eta_after");
  }
  // Attack results (objects with by_sigma) run on the IRFIL models, e.g. before and after.
  for (const auto& [key, value] : input.summary.items())
    if (value.is_object() && value.contains("by_sigma")) attack_section(value, key, plotter, section);
}

void attack_section(const nlohmann::json& attack, const std::string& name, Plotter& plotter, Section& section) {
  const nlohmann::json by_sigma = attack.value("by_sigma", nlohmann::json::array());
  if (!by_sigma.is_array() || by_sigma.empty()) {
    section.notes.push_back(name + ": skipped, no by_sigma[] of attack results");
    return;
  }
  std::vector<std::vector<double>> against_eta;
  for (const nlohmann::json& s : by_sigma) {
    const auto eta = number_at(s, "eta_mean");
    if (!eta) continue;
    against_eta.push_back({*eta, number_at(s, "white_box").value_or(NAN), number_at(s, "black_box").value_or(NAN),
                           number_at(s, "release_test_mse").value_or(NAN)});
  }
  if (against_eta.empty()) {
    section.notes.push_back(name + " accuracy against eta: skipped, no by_sigma[] entry has eta_mean");
  } else {
    const std::string data = plotter.data(rows_text(against_eta));
    const std::string prior = number_at(attack, "prior_accuracy")
                                  ? ", " + format_number(*number_at(attack, "prior_accuracy")) +
                                        " with lines dt 2 lc rgb '#555555' title 'prior'"
                                  : "";
    plotter.plot(section, name + "-vs-eta",
                 name +
                     ": attribute-inference accuracy (left axis) and the released model's test MSE (right "
                     "axis) against the mean eta of the attacked examples, one point per sigma.",
                 "set logscale x\nset logscale y2\nset ytics nomirror\nset y2tics\nset key outside right top\n"
                 "set xlabel 'mean eta'\nset ylabel 'attack accuracy'\nset y2label 'release test MSE'\nplot " +
                     data +
                     " using 1:2 with linespoints lw 2 pt 7 title 'white-box', '' using 1:3 with linespoints lw 2 pt 5 "
                     "title 'black-box', '' using 1:4 axes x1y2 with linespoints dt 3 pt 4 title 'test MSE'" +
                     prior);
  }
  attack_by_group(attack, name, by_sigma, plotter, section);
}

}  // namespace filkit::report
