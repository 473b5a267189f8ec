// The report's section for `filkit accountant` (docs/accountants.md): epsilon against the steps
// and against the noise multiplier around the mechanism accounted (the summary's eps_by_steps and
// eps_by_noise_multiplier), and the RDP curve (epsilon of every order) or the PLD's epsilon
// against delta (the table, rdp-curve.csv or eps-by-delta.csv).
#include "report/report_internal.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace filkit::report {

namespace {

// The points (x, eps) of a curve {x_key: [...], "eps": [...]}, both finite and positive.
std::vector<std::vector<double>> curve_points(const nlohmann::json& curve, const char* x_key) {
  std::vector<std::vector<double>> rows;
  if (!curve.is_object() || !curve.contains(x_key) || !curve.contains("eps")) return rows;
  const nlohmann::json &xs = curve[x_key], &eps = curve["eps"];
  if (!xs.is_array() || !eps.is_array()) return rows;
  for (std::size_t k = 0; k < xs.size() && k < eps.size(); ++k)
    if (xs[k].is_number() && eps[k].is_number() && xs[k].get<double>() > 0 && eps[k].get<double>() > 0 &&
        std::isfinite(eps[k].get<double>()))
      rows.push_back({xs[k].get<double>(), eps[k].get<double>()});
  return rows;
}

bool spans_decades(const std::vector<std::vector<double>>& rows, std::size_t column) {
  double lo = INFINITY, hi = 0;
  for (const auto& row : rows) lo = std::min(lo, row[column]), hi = std::max(hi, row[column]);
  return hi > 0 && hi / lo > 30;
}

void eps_curve(const Input& input, const char* key, const char* x_key, const std::string& x_label,
               const std::string& name, const std::string& caption, double accounted_x, Plotter& plotter,
               Section& section) {
  const auto rows = curve_points(input.summary.value(key, nlohmann::json()), x_key);
  if (rows.size() < 2) {
    section.notes.push_back(name + ": skipped, the summary has no " + key +
                            " (it is computed for a single mechanism, without --mechanism)");
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  std::string marker;
  const auto eps = number_at(input.summary, "eps");
  if (eps && std::isfinite(*eps) && *eps > 0 && std::isfinite(accounted_x))
    marker = ", " + plotter.data(rows_text({{accounted_x, *eps}})) +
             " using 1:2 with points pt 7 ps 1.6 lc rgb '#d62728' title 'accounted: eps " + format_digits(*eps, 3) +
             "'";
  plotter.plot(section, name, caption,
               "set logscale x\nset autoscale xfix\n" +
                   std::string(spans_decades(rows, 1) ? "set logscale y\n" : "set yrange [0:*]\n") +
                   "set key outside right top\nset xlabel " + gnuplot_string(x_label) +
                   "\nset ylabel 'epsilon'\nplot " + data +
                   " using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'epsilon'" + marker,
               900, 450);
}

// Draws the table's columns y against x (log x; log y too when `log_y`); false when the table
// lacks them or has no point to draw.
bool table_curve(const Input& input, const char* x, const char* y, bool log_y, const std::string& name,
                 const std::string& caption, const std::string& x_label, const std::string& y_label, Plotter& plotter,
                 Section& section) {
  const auto xs = input.table.find(x), ys = input.table.find(y);
  if (xs == input.table.end() || ys == input.table.end()) return false;
  std::size_t dropped = 0;
  const auto rows = points(xs->second, ys->second, true, log_y, &dropped);
  if (rows.empty()) return false;
  plotter.plot(section, name, caption,
               std::string(log_y ? "set logscale xy\n" : "set logscale x\n") + "set xlabel " + gnuplot_string(x_label) +
                   "\nset ylabel " + gnuplot_string(y_label) + "\nplot " + plotter.data(rows_text(rows)) +
                   " using 1:2 with linespoints lw 2 pt 7 ps 0.6 title " + gnuplot_string(y_label),
               900, 450);
  return true;
}

}  // namespace

void accountant_section(const Input& input, Plotter& plotter, Section& section) {
  const nlohmann::json& s = input.summary;
  const nlohmann::json settings = s.value("settings", nlohmann::json::object());
  const auto text = [](const nlohmann::json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  if (s.contains("description")) section.facts.push_back({"accountant", text(s["description"])});
  if (const auto delta = number_at(settings, "delta")) section.facts.push_back({"delta", format_digits(*delta, 3)});
  if (const auto eps = number_at(s, "eps")) section.facts.push_back({"epsilon", format_digits(*eps, 3)});
  if (const auto order = number_at(s, "optimal_order"))
    section.facts.push_back({"optimal RDP order", format_number(*order)});
  if (const auto noise = number_at(s, "noise_multiplier"))
    section.facts.push_back({"noise multiplier for the target epsilon", format_digits(*noise, 4)});
  double steps = NAN, sigma = NAN;
  const nlohmann::json mechanisms = s.value("mechanisms", nlohmann::json::array());
  if (mechanisms.is_array()) {
    for (std::size_t k = 0; k < mechanisms.size(); ++k) {
      const auto q = number_at(mechanisms[k], "q"), noise = number_at(mechanisms[k], "noise_multiplier"),
                 t = number_at(mechanisms[k], "steps");
      if (!q || !noise || !t) continue;
      section.facts.push_back({"mechanism " + std::to_string(k + 1), "sample rate " + format_number(*q) +
                                                                         ", noise multiplier " + format_number(*noise) +
                                                                         ", " + format_number(*t) + " steps"});
      if (k == 0) steps = *t, sigma = *noise;
    }
  }
  eps_curve(input, "eps_by_steps", "steps", "steps", "eps-vs-steps",
            "Epsilon (at the delta above) against the number of steps, the rest of the mechanism as accounted: how "
            "the guarantee weakens as training goes on; the red point is the run accounted.",
            steps, plotter, section);
  eps_curve(input, "eps_by_noise_multiplier", "noise_multiplier", "noise multiplier sigma", "eps-vs-noise",
            "Epsilon against the noise multiplier at the same sample rate and steps: the noise a target epsilon needs.",
            sigma, plotter, section);
  // The table the run wrote: the RDP curve, or the PLD's epsilon at several deltas.
  if (!table_curve(input, "order", "rdp", true, "rdp-curve",
                   "The composed RDP curve: the Renyi DP epsilon of every order (log-log); epsilon at delta is the "
                   "best conversion over the orders (docs/accountants.md).",
                   "RDP order", "RDP epsilon", plotter, section) &&
      !table_curve(input, "delta", "eps", false, "eps-vs-delta",
                   "The PLD accountant's epsilon at each delta (log scale in delta): the whole privacy curve of the "
                   "composed mechanism.",
                   "delta", "epsilon", plotter, section))
    section.notes.push_back(
        "RDP curve or epsilon against delta: skipped, no table with order and rdp, or delta and eps");
}

}  // namespace filkit::report
