// The report's section for `filkit public-training` (docs/mathematics.md, section 11.5): accuracy and dFIL per
// method like the thesis' tables 3.1-3.4, every private example's dFIL per method, and the cosine
// similarity of fim's learned perturbation with the mean public gradient (its figure 3.4).
#include "report/report_internal.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace filkit::report {

namespace {

const char* const kMethodCodes[] = {"sgd", "dpsgd", "prune", "fim"};  // the table's method column

// A method's "method" field, "?" when absent or not a string.
std::string method_name(const nlohmann::json& m) {
  const auto found = m.is_object() ? m.find("method") : m.end();
  return found != m.end() && found->is_string() ? found->get<std::string>() : "?";
}

void accuracy_and_dfil(const nlohmann::json& methods, Plotter& plotter, Section& section) {
  std::vector<std::vector<double>> accuracy, dfil;
  std::string labels, shown;  // the x axis' tick labels, and the same names for the page
  for (std::size_t k = 0; k < methods.size(); ++k) {
    const nlohmann::json& m = methods[k];
    const double x = static_cast<double>(k);
    const std::string name = method_name(m);
    labels += (k ? ", " : "") + gnuplot_string(name) + " " + std::to_string(k);
    shown += (k ? ", " : "") + std::to_string(k) + " = " + name;
    if (const auto mean = number_at(m, "test_accuracy.mean"), sd = number_at(m, "test_accuracy.std"); mean && sd)
      accuracy.push_back({x, *mean, *sd});
    const auto mx = number_at(m, "max_dfil.mean"), me = number_at(m, "mean_dfil.mean"),
               md = number_at(m, "median_dfil.mean");
    if (mx && me && md)
      dfil.push_back({x, *mx, number_at(m, "max_dfil.std").value_or(0), *me, number_at(m, "mean_dfil.std").value_or(0),
                      *md, number_at(m, "median_dfil.std").value_or(0)});
  }
  section.facts.push_back({"methods on the x axis", shown});
  const std::string xtics = "set xtics noenhanced\nset xtics (" + labels +
                            ")\nset xrange [-0.5:" + std::to_string(methods.size()) + "-0.5]\n";
  if (!accuracy.empty()) {
    // The axis spans the accuracies, not 0..1, so that their differences show; it says where it
    // starts, so that they are not read as larger than they are.
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& row : accuracy) lo = std::min(lo, row[1] - row[2]), hi = std::max(hi, row[1] + row[2]);
    const double pad = std::max(0.01, 0.15 * (hi - lo));
    const double bottom = std::max(0.0, std::floor((lo - pad) * 100) / 100),
                 top = std::min(1.0, std::ceil((hi + pad) * 100) / 100);
    const std::string data = plotter.data(rows_text(accuracy));
    const std::string start = format_digits(bottom, 3);
    plotter.plot(
        section, "accuracy",
        "Test accuracy per method (mean and standard deviation over runs)." +
            (bottom > 0 ? " The accuracy axis starts at " + start + ", not 0: it magnifies the differences." : ""),
        xtics + "set yrange [" + format_number(bottom) + ":" + format_number(top) + "]\nset ylabel " +
            gnuplot_string(bottom > 0 ? "test accuracy (axis from " + start + ", not 0)" : "test accuracy") +
            "\nplot " + data + " using 1:2:3 with yerrorbars lw 2 pt 7 ps 1.5 notitle");
  }
  if (dfil.empty()) {
    section.notes.push_back("dFIL per method: skipped, no method has max_dfil, mean_dfil and median_dfil");
    return;
  }
  const std::string data = plotter.data(rows_text(dfil));
  plotter.plot(
      section, "dfil",
      "Max, mean and median dFIL over the private examples per method (mean and standard deviation over "
      "runs); lower is more private (unbiased reconstruction MSE >= 1/dFIL^2).",
      xtics + "set logscale y\nset ylabel 'dFIL'\nplot " + data +
          " using ($1-0.1):2:3 with yerrorbars lw 2 pt 7 ps 1.5 title 'max', '' using 1:4:5 with yerrorbars "
          "lw 2 pt 5 ps 1.5 title 'mean', '' using ($1+0.1):6:7 with yerrorbars lw 2 pt 9 ps 1.5 title 'median'");
}

void dfil_distribution(const Input& input, Plotter& plotter, Section& section) {
  const auto method = input.table.find("method"), dfil = input.table.find("dfil");
  if (method == input.table.end() || dfil == input.table.end()) {
    section.notes.push_back("dFIL distribution: skipped, no per-example table with method and dfil columns");
    return;
  }
  std::vector<std::vector<double>> groups(4);
  for (std::size_t i = 0; i < method->second.size() && i < dfil->second.size(); ++i) {
    const double code = method->second[i];
    if (code >= 1 && code <= 3 && code == std::floor(code))
      groups[static_cast<std::size_t>(code)].push_back(dfil->second[i]);
  }
  std::vector<std::vector<double>> present;
  std::vector<std::string> names;
  for (std::size_t code = 1; code < groups.size(); ++code)
    if (!groups[code].empty()) {
      present.push_back(groups[code]);
      names.push_back(kMethodCodes[code]);
    }
  const auto rows = histogram(present, true);
  if (rows.empty()) {
    section.notes.push_back("dFIL distribution: skipped, no positive dFIL in the table");
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  std::string plot = "set logscale x\nset xlabel 'dFIL'\nset ylabel 'private examples'\nset yrange [0:*]\nplot ";
  for (std::size_t k = 0; k < names.size(); ++k)
    plot += (k ? ", '' using 1:" : data + " using 1:") + std::to_string(k + 2) + " with histeps lw 2 title '" +
            names[k] + "'";
  plotter.plot(section, "dfil-histogram", "dFIL of every private example, per method (run averages).", plot);
}

// The numbers of the thesis' tables 3.1-3.4: accuracy, dFIL over the private examples and epsilon
// per method, as mean (standard deviation) over runs, "-" for the spread of one run.
void method_table(const nlohmann::json& methods, Section& section) {
  Table table;
  table.caption =
      "Per method: mean (standard deviation) over runs, '-' where one run has no spread; dFIL over the "
      "private examples; epsilon of the (epsilon, delta)-DP guarantee at the delta in brackets.";
  table.header = {"method", "test accuracy", "max dFIL", "mean dFIL", "median dFIL", "epsilon (delta)"};
  for (const nlohmann::json& m : methods) {
    if (!m.is_object()) continue;
    const auto statistic = [&](const char* key, int digits) {
      return m.contains(key) ? mean_and_spread(m[key], digits) : std::string("-");
    };
    std::string eps = "-";
    if (const auto e = number_at(m, "epsilon").has_value() ? number_at(m, "epsilon") : number_at(m, "rdp_epsilon"))
      eps = format_digits(*e, 3) +
            (number_at(m, "rdp_delta") ? " (" + format_digits(*number_at(m, "rdp_delta"), 2) + ")" : "");
    table.rows.push_back({method_name(m), statistic("test_accuracy", 4), statistic("max_dfil", 4),
                          statistic("mean_dfil", 4), statistic("median_dfil", 4), eps});
  }
  section.tables.push_back(std::move(table));
}

void perturbation_cosine(const nlohmann::json& methods, Plotter& plotter, Section& section) {
  for (const nlohmann::json& m : methods) {
    if (method_name(m) != "fim") continue;
    const auto runs = m.find("perturbation_cosine_with_mean_public_gradient");
    if (runs == m.end() || !runs->is_array() || runs->empty()) break;
    std::vector<std::vector<double>> rows;
    std::string plot = "set xlabel 'private step'\nset ylabel 'cosine similarity'\nset yrange [-1:1]\nplot ";
    std::size_t column = 2;
    for (std::size_t r = 0; r < runs->size(); ++r) {
      std::vector<double> values;
      if ((*runs)[r].is_array())
        for (const nlohmann::json& v : (*runs)[r]) values.push_back(v.is_number() ? v.get<double>() : std::nan(""));
      for (std::size_t t = 0; t < values.size(); ++t) {
        if (rows.size() <= t) rows.push_back({static_cast<double>(t + 1)});
        rows[t].resize(r + 2, std::nan(""));
        rows[t][r + 1] = values[t];
      }
    }
    for (auto& row : rows) row.resize(runs->size() + 1, std::nan(""));
    const std::string data = plotter.data(rows_text(rows));
    for (std::size_t r = 0; r < runs->size(); ++r, ++column)
      plot += (r ? ", '' using 1:" : data + " using 1:") + std::to_string(column) +
              " with linespoints lw 2 title 'run " + std::to_string(r) + "'";
    plotter.plot(section, "perturbation-cosine",
                 "Mean over the private batch of the cosine similarity between fim's learned perturbation g_phi and "
                 "the mean public gradient at the current parameters, per private step (Edmunds 2024, figure 3.4).",
                 plot);
    return;
  }
  section.notes.push_back("perturbation cosine: skipped, no fim method with per-step cosine similarities");
}

}  // namespace

void public_training_section(const Input& input, Plotter& plotter, Section& section) {
  const nlohmann::json& s = input.summary;
  for (const char* key : {"n_public", "n_private", "num_classes", "parameter_count"})
    if (s.contains(key)) section.facts.push_back({key, s[key].dump()});
  const nlohmann::json methods = s.value("methods", nlohmann::json::array());
  if (!methods.is_array() || methods.empty()) {
    section.notes.push_back("per-method figures: skipped, the summary has no methods[]");
    return;
  }
  method_table(methods, section);
  accuracy_and_dfil(methods, plotter, section);
  dfil_distribution(input, plotter, section);
  perturbation_cosine(methods, plotter, section);
}

}  // namespace filkit::report
