// The report's sections, one per command kind: which figures each draws from which fields.
#include "report/report_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
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

// 3 significant digits, for titles where space is short.
std::string format_short(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

// A vertical line at x with a label, for thresholds drawn over histograms.
std::string vertical_line(double x, const std::string& label, const std::string& colour) {
  return "set arrow from " + format_number(x) + ", graph 0 to " + format_number(x) +
         ", graph 1 nohead lw 2 dt 2 lc rgb '" + colour + "'\nset label " + gnuplot_string(label) + " at " +
         format_number(x) + ", graph 0.95 right offset -0.5,0 textcolor rgb '" + colour + "'\n";
}

// A label of the per-example table as a class index, or nothing when it is not an integer in
// int's range (a corrupt table: casting it would be undefined).
std::optional<int> class_index(double label) {
  if (!(label == std::floor(label) && std::abs(label) <= std::numeric_limits<int>::max())) return std::nullopt;
  return static_cast<int>(label);
}

// "class 3" for relabelled class k when settings.classes names the originals, else "label k".
std::string class_name(const nlohmann::json& summary, int k) {
  const nlohmann::json settings = summary.value("settings", nlohmann::json::object());
  const nlohmann::json classes = settings.is_object() ? settings.value("classes", nlohmann::json()) : nlohmann::json();
  if (classes.is_array() && k >= 0 && static_cast<std::size_t>(k) < classes.size() && classes[k].is_number())
    return "class " + classes[k].dump();
  return "label " + std::to_string(k);
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
// red, green, blue), titled by eta and label.
void image_grid(const RunImages& images, const std::vector<std::size_t>& rows, const Input& input,
                const std::string& name, const std::string& caption, Plotter& plotter, Section& section) {
  const auto& eta = input.table.at("eta");
  const auto& label = input.table.at("label");
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
    const std::string data =
        plotter.data(rgbimage_data(display_image(images.X, static_cast<Index>(i), shape, range)));
    // Appends, not "#" + std::to_string(i): GCC 12 warns falsely (-Wrestrict) on the latter.
    std::string title = "#";
    title.append(std::to_string(i)).append("\neta ").append(format_short(eta[i])).append("\n");
    const auto label_class = class_index(label[i]);
    title.append(label_class ? class_name(input.summary, *label_class) : "label " + format_number(label[i]));
    body += "set title " + gnuplot_string(title) + " noenhanced\nplot " + data + " using 1:2:3:4:5 with rgbimage\n";
  }
  plotter.plot(section, name, caption, body + "unset multiplot", 1100, 260);
}

void extreme_eta_images(const Input& input, Plotter& plotter, Section& section, double timeout_seconds) {
  const std::string figure = "highest/lowest-eta images";
  const auto* eta = column(input, "eta", figure, section);
  if (!eta || !column(input, "label", figure, section)) return;
  std::string why_not;
  const auto images = run_training_images(input.summary, eta->size(), why_not, timeout_seconds);
  if (!images) {
    section.notes.push_back(figure + ": skipped, " + why_not);
    return;
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < eta->size(); ++i)
    if (std::isfinite((*eta)[i])) order.push_back(i);
  // Stable: examples of equal eta keep their training order, so the figure is the same every time.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return (*eta)[a] > (*eta)[b]; });
  const std::size_t count = std::min<std::size_t>(8, order.size());
  if (count == 0) {
    section.notes.push_back(figure + ": skipped, no finite eta in " + input.table_path);
    return;
  }
  const std::vector<std::size_t> highest(order.begin(), order.begin() + static_cast<long>(count));
  const std::vector<std::size_t> lowest(order.end() - static_cast<long>(count), order.end());
  image_grid(*images, highest, input, "highest-eta-images",
             "The training images with the highest eta (most exposed), highest first.", plotter, section);
  image_grid(*images, std::vector<std::size_t>(lowest.rbegin(), lowest.rend()), input, "lowest-eta-images",
             "The training images with the lowest eta (least exposed), lowest first.", plotter, section);
}

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
  if (dropped) section.notes.push_back(figure + ": " + std::to_string(dropped) + " example(s) with a zero or non-finite value left off the log axes");
  const std::string data = plotter.data(rows_text(rows));
  plotter.plot(section, "eta-vs-" + quantity,
               "eta against the training " + axis_label + " of each example (log-log; colour = class).",
               "set logscale xy\nunset key\nset xlabel " + gnuplot_string(axis_label) + "\nset ylabel 'eta'\nplot " + data +
                   " using 1:2:($3+1) with points pt 7 ps 0.5 lc variable");
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
               "reconstruction of the example (median " + format_number(median_bound) + ").",
               "set multiplot layout 1,2\nset logscale x\nunset key\nset ylabel 'training examples'\nset yrange [0:*]\n"
               "set xlabel 'dFIL'\nplot " + dfil_data + " using 1:2 with histeps lw 2 lc rgb '#1f77b4'\n"
               "set xlabel 'MSE bound 1/dFIL^2'\n" + vertical_line(median_bound, "median", "#d62728") +
               "plot " + bound_data + " using 1:2 with histeps lw 2 lc rgb '#2ca02c'\nunset multiplot",
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
  double lo = rows.front()[0], hi = rows.back()[0];
  std::string lines;
  if (const auto rdp = number_at(input.summary, "rdp.mse_bound"); rdp && *rdp > 0) {
    lines += vertical_line(*rdp, "RDP bound", "#d62728");
    lo = std::min(lo, *rdp), hi = std::max(hi, *rdp);
  } else {
    section.notes.push_back(figure + ": no RDP bound line, the summary lacks a positive rdp.mse_bound");
  }
  if (const auto line = number_at(input.summary, "perfect_privacy_mse"); line && *line > 0) {
    lines += vertical_line(*line, "perfect privacy", "#555555");
    lo = std::min(lo, *line), hi = std::max(hi, *line);
  } else {
    section.notes.push_back(figure + ": no perfect-privacy line, the summary lacks perfect_privacy_mse");
  }
  lines += "set xrange [" + format_number(lo / 2) + ":" + format_number(hi * 2) + "]\n";
  const std::string data = plotter.data(rows_text(rows));
  plotter.plot(section, "bound-histogram",
               "Per-example lower bounds on the reconstruction MSE (log scale), against the (2, eps)-RDP bound of "
               "the whole release and the MSE of guessing with no information (perfect privacy).",
               "datafile = " + data + "\nset logscale x\nset key below\nset xlabel 'MSE lower bound'\n"
               "set ylabel 'training examples'\nset yrange [0:*]\n" + lines + plots);
}

void attack_against_bound(const Input& input, Plotter& plotter, Section& section) {
  const std::string figure = "attack MSE against the dFIL bound";
  const auto* dfil_bound = column(input, "dfil_bound", figure, section);
  const auto* attack = column(input, "attack_mse", figure, section);
  if (!dfil_bound || !attack) return;
  std::size_t dropped = 0;
  const auto rows = points(*dfil_bound, *attack, true, true, &dropped);
  if (rows.empty()) {
    section.notes.push_back(figure + ": skipped, no example has a positive finite bound and attack MSE");
    return;
  }
  if (dropped) section.notes.push_back(figure + ": " + std::to_string(dropped) + " example(s) without a positive finite attack MSE or bound left off");
  double lo = INFINITY, hi = 0;
  for (const auto& row : rows) lo = std::min({lo, row[0], row[1]}), hi = std::max({hi, row[0], row[1]});
  std::string extra;
  if (const auto line = number_at(input.summary, "perfect_privacy_mse"); line && *line > 0) {
    extra = ", " + format_number(*line) + " with lines dt 2 lw 2 lc rgb '#555555' title 'perfect privacy'";
    lo = std::min(lo, *line), hi = std::max(hi, *line);
  }
  const std::string range = "[" + format_number(lo / 2) + ":" + format_number(hi * 2) + "]";
  const std::string data = plotter.data(rows_text(rows));
  plotter.plot(section, "attack-vs-bound",
               "Realised MSE of the GLM reconstruction attack against each example's predicted dFIL bound "
               "(log-log). The bound holds for unbiased attackers where points lie above the line MSE = bound.",
               "set logscale xy\nset xrange " + range + "\nset yrange " + range +
                   "\nset key bottom right\nset xlabel 'predicted MSE bound 1/dFIL^2'\nset ylabel 'attack MSE'\nplot " +
                   data + " using 1:2 with points pt 7 ps 0.5 title 'examples', x with lines lw 2 lc rgb '#d62728' "
                   "title 'MSE = bound'" + extra);
}

// ---------------------------------------------------------------------------------------------
// dpsgd

struct ParetoPoint {
  double bound, accuracy;
};

// Points not dominated by another with at least the accuracy and at least the bound (strictly
// better in one), sorted by bound: the best accuracy each privacy level allows.
std::vector<ParetoPoint> pareto_front(const std::vector<ParetoPoint>& all) {
  std::vector<ParetoPoint> front;
  for (const ParetoPoint& a : all) {
    const bool dominated = std::any_of(all.begin(), all.end(), [&](const ParetoPoint& b) {
      return b.accuracy >= a.accuracy && b.bound >= a.bound && (b.accuracy > a.accuracy || b.bound > a.bound);
    });
    if (!dominated) front.push_back(a);
  }
  std::sort(front.begin(), front.end(), [](const ParetoPoint& a, const ParetoPoint& b) { return a.bound < b.bound; });
  return front;
}

std::vector<std::vector<double>> as_rows(const std::vector<ParetoPoint>& list) {
  std::vector<std::vector<double>> rows;
  for (const ParetoPoint& p : list) rows.push_back({p.bound, p.accuracy});
  return rows;
}

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
               name + ": attribute-inference accuracy per eta group of the attacked examples (group 1 = lowest "
                      "eta), at each noise scale sigma.",
               "set key outside right\nset xlabel 'eta group (lowest to highest)'\nset ylabel 'attack accuracy'\n"
               "set xtics 1\n" + plots,
               1000, 500);
}

}  // namespace

void measure_section(const Input& input, Plotter& plotter, Section& section, const ImageReload& images) {
  eta_histogram_by_class(input, plotter, section);
  if (images.enabled) extreme_eta_images(input, plotter, section, images.timeout_seconds);
  else section.notes.push_back("highest/lowest-eta images: skipped, image re-loading is switched off");
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
  attack_against_bound(input, plotter, section);
}

void dpsgd_section(const std::vector<const Input*>& inputs, Plotter& plotter, Section& section) {
  std::vector<ParetoPoint> at_max, at_median;
  std::size_t incomplete = 0;
  for (const Input* input : inputs) {
    const nlohmann::json snapshots = input->summary.value("snapshots", nlohmann::json::array());
    if (!snapshots.is_array() || snapshots.empty())
      section.notes.push_back(input->summary_path + ": no snapshots, left out of the accuracy/bound figure");
    for (const nlohmann::json& c : snapshots) {
      const auto accuracy = number_at(c, "test_accuracy");
      const auto max_bound = number_at(c, "dfil.mse_bound_at_max");
      const auto median_bound = number_at(c, "dfil.mse_bound_at_median");
      if (!accuracy || !max_bound || *max_bound <= 0) {
        ++incomplete;
        continue;
      }
      at_max.push_back({*max_bound, *accuracy});
      if (median_bound && *median_bound > 0) at_median.push_back({*median_bound, *accuracy});
    }
  }
  if (incomplete)
    section.notes.push_back("accuracy against MSE bound: " + std::to_string(incomplete) +
                            " snapshot(s) without test_accuracy or a positive dfil.mse_bound_at_max left out");
  if (at_max.empty()) {
    section.notes.push_back("accuracy against MSE bound: skipped, no snapshot has both numbers");
    return;
  }
  std::string plots = "plot " + plotter.data(rows_text(as_rows(at_max))) +
                      " with points pt 7 ps 0.8 lc rgb '#1f77b4' title 'at the largest dFIL', " +
                      plotter.data(rows_text(as_rows(pareto_front(at_max)))) +
                      " with fsteps lw 2 lc rgb '#1f77b4' title 'Pareto front (largest dFIL)'";
  if (!at_median.empty())
    plots += ", " + plotter.data(rows_text(as_rows(at_median))) +
             " with points pt 6 ps 0.8 lc rgb '#ff7f0e' title 'at the median dFIL', " +
             plotter.data(rows_text(as_rows(pareto_front(at_median)))) +
             " with fsteps lw 2 dt 2 lc rgb '#ff7f0e' title 'Pareto front (median dFIL)'";
  plotter.plot(section, "accuracy-vs-bound",
               "Test accuracy against the reconstruction MSE bound 1/dFIL^2 of every snapshot of every DP-SGD "
               "run, with the Pareto fronts: the best accuracy reached at each privacy level.",
               "set logscale x\nset key bottom left\nset xlabel 'MSE bound 1/dFIL^2'\nset ylabel 'test accuracy'\n" +
                   plots);
}

void irfil_section(const Input& input, Plotter& plotter, Section& section) {
  const nlohmann::json iterations = input.summary.value("iterations", nlohmann::json::array());
  std::vector<std::vector<double>> rows;
  for (const nlohmann::json& it : iterations) {
    const auto t = number_at(it, "iteration"), std = number_at(it, "eta.std"), mean = number_at(it, "eta.mean");
    if (t && std && mean) rows.push_back({*t, *std, *mean});
  }
  if (rows.empty()) {
    section.notes.push_back("eta per iteration: skipped, the summary has no iterations[] with iteration, eta.std and eta.mean");
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
                 name + ": attribute-inference accuracy (left axis) and the released model's test MSE (right "
                        "axis) against the mean eta of the attacked examples, one point per sigma.",
                 "set logscale x\nset logscale y2\nset ytics nomirror\nset y2tics\nset key bottom right\n"
                 "set xlabel 'mean eta'\nset ylabel 'attack accuracy'\nset y2label 'release test MSE'\nplot " + data +
                     " using 1:2 with linespoints lw 2 pt 7 title 'white-box', '' using 1:3 with linespoints lw 2 pt 5 "
                     "title 'black-box', '' using 1:4 axes x1y2 with linespoints dt 3 pt 4 title 'test MSE'" + prior);
  }
  attack_by_group(attack, name, by_sigma, plotter, section);
}

}  // namespace filkit::report
