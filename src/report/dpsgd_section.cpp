// The report's section for `filkit dpsgd` (docs/mathematics.md, section 7; Guo et al. 2022,
// section 6): what a privacy researcher looks for in a private training run. One section holds
// every dpsgd input (a run of `filkit dpsgd`, possibly of --runs R repetitions):
//   - a settings and privacy table, one column an input: data, model, sampling, steps, clip norm,
//     noise multiplier and the smooth clip's effective one, the accountant, (epsilon, delta),
//     accuracy and dFIL at the last snapshot with their spreads over the runs;
//   - per input: dFIL (max and median) and epsilon over the snapshots; the MSE bounds 1/dFIL^2
//     beside the RDP bound over the snapshots; the per-example dFIL histogram at each snapshot (log
//     scale); the most and least exposed training images at the last snapshot;
//   - test accuracy against the MSE bound: each input's snapshots, and with several inputs the
//     Pareto front across them (the best accuracy each privacy level allows; figure 5).
// Spreads over runs: accuracy as mean (standard deviation), dFIL and the bounds with the bootstrap
// intervals the summary records; "-" where a single run has none.
#include "report/report_internal.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace filkit::report {

namespace {

// A setting or field as a reader wants it: text unquoted, numbers to 6 digits, lists by commas.
std::string shown(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  if (value.is_number()) return format_number(value.get<double>());
  if (value.is_array()) {
    std::string text;
    for (const nlohmann::json& element : value) text += (text.empty() ? "" : ",") + shown(element);
    return text.empty() ? "all" : text;
  }
  return value.dump();
}

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json null;
  if (!object.is_object()) return null;
  const auto found = object.find(key);
  return found == object.end() ? null : *found;
}

// The mean, standard deviation and values of a list of numbers, as mean_and_spread reads them.
nlohmann::json statistics_of(const nlohmann::json& values) {
  std::vector<double> finite;
  if (values.is_array())
    for (const nlohmann::json& v : values)
      if (v.is_number() && std::isfinite(v.get<double>())) finite.push_back(v.get<double>());
  if (finite.empty()) return nullptr;
  double mean = 0, squares = 0;
  for (double v : finite) mean += v / static_cast<double>(finite.size());
  for (double v : finite) squares += (v - mean) * (v - mean);
  const double std = finite.size() > 1 ? std::sqrt(squares / static_cast<double>(finite.size() - 1)) : 0.0;
  return {{"mean", mean}, {"std", std}, {"runs", finite}};
}

// "v [lo, hi]" with the bootstrap interval over runs, or "v (-)" for one run.
std::string with_interval(const nlohmann::json& summary, const char* value_key, const char* interval_key, int digits) {
  const auto value = number_at(summary, value_key);
  if (!value) return "";
  const nlohmann::json& interval = field(summary, interval_key);
  if (interval.is_array() && interval.size() == 2 && interval[0].is_number() && interval[1].is_number())
    return format_digits(*value, digits) + " [" + format_digits(interval[0].get<double>(), 3) + ", " +
           format_digits(interval[1].get<double>(), 3) + "]";
  return format_digits(*value, digits) + " (-)";
}

std::string input_name(const Input& input) { return std::filesystem::path(input.summary_path).filename().string(); }

const nlohmann::json& last_snapshot(const Input& input) {
  static const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& snapshots = field(input.summary, "snapshots");
  return snapshots.is_array() && !snapshots.empty() && snapshots.back().is_object() ? snapshots.back() : none;
}

void settings_table(const std::vector<const Input*>& inputs, Section& section) {
  Table table;
  table.caption =
      "Settings and privacy of each run (its last snapshot). Accuracy: mean (standard deviation) over the --runs "
      "repetitions; dFIL and the MSE bounds: over the examples, with the bootstrap interval over the runs in "
      "brackets; '-' where a single run has no spread.";
  table.header = {""};
  for (const Input* input : inputs) table.header.push_back(input_name(*input));
  const auto row = [&](const std::string& name, const auto& cell) {
    std::vector<std::string> cells{name};
    bool any = false;
    for (const Input* input : inputs) {
      cells.push_back(cell(*input));
      any = any || !cells.back().empty();
    }
    if (any) table.rows.push_back(std::move(cells));
  };
  const auto setting = [](const char* key) {
    return [key](const Input& input) { return shown(field(field(input.summary, "settings"), key)); };
  };
  const auto top = [](const char* key) {
    return [key](const Input& input) { return shown(field(input.summary, key)); };
  };
  const auto accounting = [](const char* key) {
    return [key](const Input& input) { return shown(field(field(input.summary, "accounting"), key)); };
  };
  row("data", setting("data"));
  row("classes", setting("classes"));
  row("model", setting("model"));
  row("training examples n", top("n"));
  row("label", setting("label"));
  row("batch size B", setting("batch_size"));
  row("sampling", setting("sampling"));
  row("sample rate q", top("sampling_rate"));
  row("steps T", setting("steps"));
  row("epochs", [](const Input& input) { return shown(field(last_snapshot(input), "epoch")); });
  row("optimizer", setting("optimizer"));
  row("step size", setting("step_size"));
  row("clip norm C", setting("clip_norm"));
  row("clipping", top("clipping"));
  row("noise multiplier sigma", setting("noise_multiplier"));
  row("effective noise multiplier", accounting("effective_noise_multiplier"));
  row("accountant", [](const Input& input) {
    const nlohmann::json& a = field(input.summary, "accounting");
    const std::string relation = shown(field(a, "neighbouring_relation"));
    return shown(field(a, "accountant")) + (relation.empty() ? "" : " (" + relation + ")");
  });
  row("delta", accounting("delta"));
  row("epsilon", [](const Input& input) {
    const auto eps = number_at(last_snapshot(input), "epsilon");
    return eps ? format_digits(*eps, 3) : "";
  });
  row("subsampling factor kappa", top("kappa"));
  row("runs", setting("runs"));
  row("test accuracy", [](const Input& input) {
    return mean_and_spread(statistics_of(field(last_snapshot(input), "test_accuracy_per_run")), 4);
  });
  row("max dFIL",
      [](const Input& input) { return with_interval(field(last_snapshot(input), "dfil"), "max", "max_interval", 4); });
  row("median dFIL", [](const Input& input) {
    return with_interval(field(last_snapshot(input), "dfil"), "median", "median_interval", 4);
  });
  row("MSE bound 1/max dFIL^2", [](const Input& input) {
    return with_interval(field(last_snapshot(input), "dfil"), "mse_bound_at_max", "mse_bound_at_max_interval", 4);
  });
  row("RDP MSE bound", [](const Input& input) {
    const auto bound = number_at(last_snapshot(input), "rdp.mse_bound");
    return bound ? format_digits(*bound, 4) : "";
  });
  // Why the effective noise multiplier differs, and what the accountant does not cover: in the
  // caption, once each however many inputs share them.
  std::set<std::string> said;
  for (const Input* input : inputs) {
    const nlohmann::json& a = field(input->summary, "accounting");
    if (field(a, "effective_noise_multiplier_reason").is_string())
      said.insert("Effective noise multiplier: " + field(a, "effective_noise_multiplier_reason").get<std::string>() +
                  ".");
    if (field(input->summary, "sampling_note").is_string())
      said.insert(input_name(*input) + ": " + field(input->summary, "sampling_note").get<std::string>());
  }
  for (const std::string& text : said) table.caption += " " + text;
  if (!table.rows.empty()) section.tables.push_back(std::move(table));
}

// A figure's name and caption suffix for input k of several ("" and "" for a single input).
struct Naming {
  std::string suffix, of;
};
Naming naming(const std::vector<const Input*>& inputs, std::size_t k) {
  if (inputs.size() == 1) return {};
  return {"-" + std::to_string(k + 1), " (" + input_name(*inputs[k]) + ")"};
}

// The interval [lo, hi] at `key` of `object`, or the value itself twice when there is none.
std::pair<double, double> interval_or(const nlohmann::json& object, const char* key, double value) {
  const nlohmann::json& interval = field(object, key);
  if (interval.is_array() && interval.size() == 2 && interval[0].is_number() && interval[1].is_number())
    return {interval[0].get<double>(), interval[1].get<double>()};
  return {value, value};
}

void dfil_and_epsilon(const Input& input, const Naming& name, Plotter& plotter, Section& section) {
  std::vector<std::vector<double>> rows;
  bool intervals = false;
  for (const nlohmann::json& c : field(input.summary, "snapshots")) {
    const auto step = number_at(c, "step"), max = number_at(c, "dfil.max"), median = number_at(c, "dfil.median");
    if (!step || !max || !median) continue;
    const auto [max_lo, max_hi] = interval_or(field(c, "dfil"), "max_interval", *max);
    const auto [median_lo, median_hi] = interval_or(field(c, "dfil"), "median_interval", *median);
    intervals = intervals || max_lo != max_hi || median_lo != median_hi;
    rows.push_back({*step, *max, max_lo, max_hi, *median, median_lo, median_hi, number_at(c, "epsilon").value_or(NAN)});
  }
  if (rows.empty()) {
    section.notes.push_back("dFIL and epsilon over the snapshots" + name.of +
                            ": skipped, no snapshot has step, dfil.max and dfil.median");
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  const std::string style = intervals ? " with yerrorlines" : " with linespoints";
  const std::string columns_max = intervals ? " using 1:2:3:4" : " using 1:2";
  const std::string columns_median = intervals ? " using 1:5:6:7" : " using 1:5";
  plotter.plot(section, "dfil-epsilon" + name.suffix,
               "dFIL over the snapshots" + name.of + ": the largest and the median over the training examples" +
                   (intervals ? " (bars: bootstrap intervals over the runs)" : "") +
                   ", left axis, log scale; and epsilon of the reported (epsilon, delta)-DP guarantee, right axis.",
               "set logscale y\nset ytics nomirror\nset y2tics\nset format y2 '%g'\nset key outside right top\n"
               "set xlabel 'step'\nset ylabel 'dFIL'\nset y2label 'epsilon'\nplot " +
                   data + columns_max + style + " lw 2 pt 7 lc rgb '#1f77b4' title 'max dFIL', ''" + columns_median +
                   style +
                   " lw 2 pt 5 lc rgb '#ff7f0e' title 'median dFIL', '' using 1:8 axes x1y2 with linespoints "
                   "lw 2 dt 2 pt 9 lc rgb '#2ca02c' title 'epsilon'",
               900, 450);
}

// A log axis shared by several series, one of which (a bound of another kind) may lie many decades
// from the rest: an RDP MSE bound of 6e-73 beside dFIL bounds near 1e-2 would stretch the axis over
// 70 decades and flatten every other line. Its values more than kFarDecades beyond the others'
// range are drawn as markers at the axis' edge instead, their value in the key and the caption.
constexpr double kFarDecades = 4;

struct OffAxis {
  bool below = false, above = false;
  double lowest = INFINITY, highest = 0;  ///< the extreme values drawn at the edges
  std::string yrange;                     ///< "set yrange [lo:hi]\n" when a value is off the axis
  std::string caption(const std::string& series, const std::string& others) const {
    std::string text;
    if (below)
      text += " " + series + " lies far below " + others + " (down to " + format_digits(lowest, 2) + ", more than " +
              format_number(kFarDecades) +
              " decades below): drawn as triangles at the axis' lower edge, so that "
              "the axis shows " +
              others + ".";
    if (above)
      text += " " + series + " lies far above " + others + " (up to " + format_digits(highest, 2) + ", more than " +
              format_number(kFarDecades) + " decades above): drawn as triangles at the axis' upper edge.";
    return text;
  }
};

// Column `series` of `rows` against the columns `others` (positive finite values; log axis): its
// values within kFarDecades of the others' range stay; the rest become NaN there, and each row gets
// two columns more, the lower edge where its value was far below and the upper edge where far above
// (NaN elsewhere). Returns where they went and the axis range that holds the edges.
OffAxis place_off_axis(std::vector<std::vector<double>>& rows, const std::vector<std::size_t>& others,
                       std::size_t series) {
  OffAxis off;
  double lo = INFINITY, hi = 0;
  for (const auto& row : rows)
    for (std::size_t j : others)
      if (std::isfinite(row[j]) && row[j] > 0) lo = std::min(lo, row[j]), hi = std::max(hi, row[j]);
  const double far = std::pow(10.0, kFarDecades);
  double axis_lo = lo, axis_hi = hi;
  for (const auto& row : rows) {
    const double v = row[series];
    if (!(std::isfinite(v) && v > 0) || !(hi > 0)) continue;
    if (v < lo / far) off.below = true, off.lowest = std::min(off.lowest, v);
    else if (v > hi * far) off.above = true, off.highest = std::max(off.highest, v);
    else axis_lo = std::min(axis_lo, v), axis_hi = std::max(axis_hi, v);
  }
  // A factor of 2 beyond the values kept: the edges' markers clear of the lines.
  const double edge_lo = axis_lo / 2, edge_hi = axis_hi * 2;
  for (auto& row : rows) {
    const double v = row[series];
    const bool below = off.below && v < lo / far, above = off.above && v > hi * far;
    // Just inside the range (which is written to 6 digits): on the edge, never clipped.
    row.push_back(below ? edge_lo * 1.1 : NAN);
    row.push_back(above ? edge_hi / 1.1 : NAN);
    if (below || above) row[series] = NAN;
  }
  if (off.below || off.above)
    off.yrange = "set yrange [" + format_number(edge_lo) + ":" + format_number(edge_hi) + "]\n";
  return off;
}

void bounds_over_snapshots(const Input& input, const Naming& name, Plotter& plotter, Section& section) {
  std::vector<std::vector<double>> rows;
  bool rdp = false;
  for (const nlohmann::json& c : field(input.summary, "snapshots")) {
    const auto step = number_at(c, "step"), at_max = number_at(c, "dfil.mse_bound_at_max"),
               at_median = number_at(c, "dfil.mse_bound_at_median");
    if (!step || !at_max || !at_median) continue;
    const double rdp_bound = number_at(c, "rdp.mse_bound").value_or(NAN);
    rdp = rdp || (std::isfinite(rdp_bound) && rdp_bound > 0);
    const auto [lo, hi] = interval_or(field(c, "dfil"), "mse_bound_at_max_interval", *at_max);
    rows.push_back({*step, *at_max, lo, hi, *at_median, rdp_bound > 0 ? rdp_bound : NAN});
  }
  if (rows.empty()) {
    section.notes.push_back("MSE bounds over the snapshots" + name.of + ": skipped, no snapshot has the dFIL bounds");
    return;
  }
  const OffAxis off_axis = place_off_axis(rows, {1, 2, 3, 4}, 5);
  const std::string data = plotter.data(rows_text(rows));
  std::string plots = "plot " + data +
                      " using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb '#1f77b4' title "
                      "'1/dFIL^2 at the max dFIL', '' using 1:5 with linespoints lw 2 pt 5 lc rgb '#ff7f0e' title "
                      "'1/dFIL^2 at the median dFIL'";
  const bool rdp_on_axis =
      std::any_of(rows.begin(), rows.end(), [](const std::vector<double>& row) { return std::isfinite(row[5]); });
  if (!rdp)
    section.notes.push_back("MSE bounds over the snapshots" + name.of +
                            ": no RDP bound, the snapshots lack a positive rdp.mse_bound");
  else if (rdp_on_axis) plots += ", '' using 1:6 with linespoints lw 2 dt 2 pt 9 lc rgb '#d62728' title 'RDP bound'";
  if (off_axis.below)
    plots += ", '' using 1:7 with points pt 11 ps 1.6 lc rgb '#d62728' title " +
             gnuplot_string("RDP bound, below the axis (" + format_digits(off_axis.lowest, 2) + ")") + " noenhanced";
  if (off_axis.above)
    plots += ", '' using 1:8 with points pt 9 ps 1.6 lc rgb '#d62728' title " +
             gnuplot_string("RDP bound, above the axis (" + format_digits(off_axis.highest, 2) + ")") + " noenhanced";
  plotter.plot(section, "mse-bounds" + name.suffix,
               "Lower bounds on the MSE of an unbiased reconstruction over the snapshots" + name.of +
                   " (log scale): the dFIL bounds 1/dFIL^2 of the most exposed and the median example, and the RDP "
                   "bound of the whole run (order 2), which holds for every example; higher is more private." +
                   off_axis.caption("the RDP bound", "the dFIL bounds"),
               "set logscale y\nset key outside right top\nset xlabel 'step'\nset ylabel 'MSE lower bound'\n" +
                   off_axis.yrange + plots,
               900, 450);
}

// The rows of the per-example table at each snapshot step, by step.
std::map<double, std::vector<std::size_t>> rows_by_step(const Input& input) {
  std::map<double, std::vector<std::size_t>> by_step;
  const auto step = input.table.find("step");
  if (step == input.table.end()) return by_step;
  for (std::size_t i = 0; i < step->second.size(); ++i)
    if (std::isfinite(step->second[i])) by_step[step->second[i]].push_back(i);
  return by_step;
}

void dfil_histograms(const Input& input, const Naming& name, Plotter& plotter, Section& section) {
  const std::string figure = "dFIL histogram per snapshot" + name.of;
  const auto* dfil = column(input, "dfil", figure, section);
  if (!dfil || !column(input, "step", figure, section)) return;
  const auto by_step = rows_by_step(input);
  // At most 6 curves: the snapshots spread evenly, the last always among them.
  std::vector<double> steps;
  for (const auto& [step, rows] : by_step) steps.push_back(step);
  std::vector<double> shown_steps;
  const std::size_t count = std::min<std::size_t>(6, steps.size());
  for (std::size_t k = 0; k < count; ++k)
    shown_steps.push_back(
        steps[(steps.size() - 1) - (count - 1 - k) * (steps.size() - 1) / std::max<std::size_t>(1, count - 1)]);
  shown_steps.erase(std::unique(shown_steps.begin(), shown_steps.end()), shown_steps.end());
  std::vector<std::vector<double>> groups;
  for (double step : shown_steps) {
    std::vector<double> values;
    for (std::size_t i : by_step.at(step)) values.push_back((*dfil)[i]);
    groups.push_back(std::move(values));
  }
  const auto rows = histogram(groups, true);
  if (rows.empty()) {
    section.notes.push_back(figure + ": skipped, no positive finite dFIL in " + input.table_path);
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  std::string plots;
  for (std::size_t k = 0; k < shown_steps.size(); ++k)
    plots += (k ? ", '' using 1:" : "plot " + data + " using 1:") + std::to_string(k + 2) +
             " with histeps lw 2 title " + gnuplot_string("step " + format_number(shown_steps[k]));
  plotter.plot(section, "dfil-histogram" + name.suffix,
               "Per-example dFIL of the training examples at each snapshot" + name.of +
                   " (log scale; the run average with --runs): how the exposure of every example grows with training.",
               "set logscale x\nset key outside right top\nset xlabel 'dFIL'\nset ylabel 'training examples'\n"
               "set yrange [0:*]\n" +
                   plots,
               900, 450);
}

void exposed_images(const Input& input, const Naming& name, const ImageReload& images, Plotter& plotter,
                    Section& section) {
  const std::string figure = "highest/lowest-dFIL images" + name.of;
  const auto* dfil = column(input, "dfil", figure, section);
  const auto* label = column(input, "label", figure, section);
  const auto* index = column(input, "index", figure, section);
  if (!dfil || !label || !index) return;
  if (!images.enabled) {
    section.notes.push_back(figure + ": skipped, image re-loading is switched off");
    return;
  }
  const auto by_step = rows_by_step(input);
  if (by_step.empty()) {
    section.notes.push_back(figure + ": skipped, " + input.table_path + " has no column 'step'");
    return;
  }
  // The last snapshot's rows, placed at their training rows (the index column). Examples never
  // sampled (times_sampled 0: dFIL 0, nothing released about them) are left out and counted: they
  // would fill the least exposed montage with examples training never saw.
  const auto sampled = input.table.find("times_sampled");
  std::vector<double> values, labels;
  std::size_t never_sampled = 0;
  for (std::size_t i : by_step.rbegin()->second) {
    const double row = (*index)[i];
    if (!(row >= 0 && row == std::floor(row) && row < 1e9)) continue;
    const auto k = static_cast<std::size_t>(row);
    if (values.size() <= k) values.resize(k + 1, NAN), labels.resize(k + 1, NAN);
    const bool unsampled = sampled != input.table.end() && sampled->second[i] == 0;
    never_sampled += unsampled ? 1 : 0;
    values[k] = unsampled ? NAN : (*dfil)[i];
    labels[k] = (*label)[i];
  }
  const std::string left_out = never_sampled == 0
                                   ? ""
                                   : "; " + std::to_string(never_sampled) +
                                         " training example(s) never sampled (times_sampled 0, dFIL 0) left out";
  extreme_images(input, values, labels, "dfil", plotter, section, images.timeout_seconds,
                 name.of + " at the last snapshot" + left_out);
}

struct AccuracyPoint {
  double bound, bound_lo, bound_hi, accuracy, accuracy_std;
};

// Points not dominated by another with at least the accuracy and at least the bound (strictly
// better in one), sorted by bound: the best accuracy each privacy level allows.
std::vector<AccuracyPoint> pareto_front(const std::vector<AccuracyPoint>& all) {
  std::vector<AccuracyPoint> front;
  for (const AccuracyPoint& a : all) {
    const bool dominated = std::any_of(all.begin(), all.end(), [&](const AccuracyPoint& b) {
      return b.accuracy >= a.accuracy && b.bound >= a.bound && (b.accuracy > a.accuracy || b.bound > a.bound);
    });
    if (!dominated) front.push_back(a);
  }
  std::sort(front.begin(), front.end(),
            [](const AccuracyPoint& a, const AccuracyPoint& b) { return a.bound < b.bound; });
  return front;
}

std::vector<std::vector<double>> as_rows(const std::vector<AccuracyPoint>& list) {
  std::vector<std::vector<double>> rows;
  for (const AccuracyPoint& p : list) rows.push_back({p.bound, p.accuracy, p.bound_lo, p.bound_hi, p.accuracy_std});
  return rows;
}

// Test accuracy against the MSE bound at the largest dFIL, every snapshot of every input; with
// several inputs each in its own colour and the Pareto front across them.
void accuracy_against_bound(const std::vector<const Input*>& inputs, Plotter& plotter, Section& section) {
  std::vector<std::vector<AccuracyPoint>> per_input(inputs.size());
  std::vector<AccuracyPoint> all;
  std::size_t incomplete = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const nlohmann::json& snapshots = field(inputs[k]->summary, "snapshots");
    if (!snapshots.is_array() || snapshots.empty())
      section.notes.push_back(inputs[k]->summary_path + ": no snapshots, left out of the accuracy/bound figure");
    if (!snapshots.is_array()) continue;
    for (const nlohmann::json& c : snapshots) {
      const auto accuracy = number_at(c, "test_accuracy"), bound = number_at(c, "dfil.mse_bound_at_max");
      if (!accuracy || !bound || !(*bound > 0)) {
        ++incomplete;
        continue;
      }
      const auto [lo, hi] = interval_or(field(c, "dfil"), "mse_bound_at_max_interval", *bound);
      const nlohmann::json spread = statistics_of(field(c, "test_accuracy_per_run"));
      const double std = spread.is_object() && spread["runs"].size() > 1 ? spread["std"].get<double>() : 0.0;
      per_input[k].push_back({*bound, lo, hi, *accuracy, std});
      all.push_back(per_input[k].back());
    }
  }
  if (incomplete)
    section.notes.push_back("accuracy against MSE bound: " + std::to_string(incomplete) +
                            " snapshot(s) without test_accuracy or a positive dfil.mse_bound_at_max left out");
  if (all.empty()) {
    section.notes.push_back("accuracy against MSE bound: skipped, no snapshot has both numbers");
    return;
  }
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
  std::string plots;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (per_input[k].empty()) continue;
    const std::string colour = kColours[k % std::size(kColours)];
    const std::string title = inputs.size() == 1 ? "snapshots (in step order)" : input_name(*inputs[k]);
    plots += std::string(plots.empty() ? "plot " : ", ") + plotter.data(rows_text(as_rows(per_input[k]))) +
             " using 1:2:3:4:($2-$5):($2+$5) with xyerrorbars pt 7 ps 0.8 lc rgb '" + colour + "' title " +
             gnuplot_string(title) + " noenhanced, '' using 1:2 with lines lw 1 lc rgb '" + colour + "' notitle";
  }
  // A front needs settings to choose between: several inputs.
  if (inputs.size() > 1)
    plots += ", " + plotter.data(rows_text(as_rows(pareto_front(all)))) +
             " using 1:2 with fsteps lw 2 dt 2 lc rgb '#333333' title 'Pareto front'";
  plotter.plot(section, "accuracy-vs-bound",
               "Test accuracy against the reconstruction MSE bound 1/dFIL^2 at the most exposed example, every "
               "snapshot of every run (bars: the standard deviation of the accuracy and the bootstrap interval of "
               "the bound over --runs, where there are several)" +
                   std::string(inputs.size() > 1 ? "; the Pareto front is the best accuracy reached at each privacy "
                                                   "level across the runs."
                                                 : "."),
               "set logscale x\nset key outside right top\nset xlabel 'MSE bound 1/dFIL^2 (max dFIL)'\n"
               "set ylabel 'test accuracy'\n" +
                   plots,
               950, 500);
}

}  // namespace

void dpsgd_section(const std::vector<const Input*>& inputs, Plotter& plotter, Section& section,
                   const ImageReload& images) {
  settings_table(inputs, section);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Naming name = naming(inputs, k);
    dfil_and_epsilon(*inputs[k], name, plotter, section);
    bounds_over_snapshots(*inputs[k], name, plotter, section);
    if (!inputs[k]->table_path.empty()) {
      dfil_histograms(*inputs[k], name, plotter, section);
      exposed_images(*inputs[k], name, images, plotter, section);
    } else {
      section.notes.push_back("dFIL histograms and exposed images" + name.of + ": skipped, no per-example table given");
    }
  }
  accuracy_against_bound(inputs, plotter, section);
}

}  // namespace filkit::report
