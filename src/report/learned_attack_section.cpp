// The report's section for `filkit learned-attack` (docs/mathematics.md, section 11.6): the attack's
// MSE and SSIM per method beside the class-mean ("perfect privacy") baseline, and the
// reconstructions of the first targets as a grid like the thesis' figure 3.3 (targets on top, then
// each method's reconstructions, then the class means).
#include "report/report_internal.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace filkit::report {

namespace {

void scores_per_method(const nlohmann::json& methods, Plotter& plotter, Section& section) {
  std::vector<std::vector<double>> rows;
  std::string labels, shown;  // the x axis' tick labels, and the same names for the page
  for (const auto& [name, m] : methods.items()) {
    const auto mse = number_at(m, "mse.mean"), mse_sd = number_at(m, "mse.std"), ssim = number_at(m, "ssim.mean"),
               ssim_sd = number_at(m, "ssim.std"), base_mse = number_at(m, "perfect_privacy.mse.mean"),
               base_ssim = number_at(m, "perfect_privacy.ssim.mean");
    if (!mse || !mse_sd || !base_mse) continue;
    const double x = static_cast<double>(rows.size());
    labels += (rows.empty() ? "" : ", ") + gnuplot_string(name) + " " + std::to_string(rows.size());
    shown += (rows.empty() ? "" : ", ") + std::to_string(rows.size()) + " = " + name;
    rows.push_back({x, *mse, *mse_sd, *base_mse, ssim.value_or(std::nan("")), ssim_sd.value_or(0.0),
                    base_ssim.value_or(std::nan(""))});
  }
  if (rows.empty()) {
    section.notes.push_back("scores per method: skipped, no method has mse and perfect_privacy.mse");
    return;
  }
  const std::string data = plotter.data(rows_text(rows));
  section.facts.push_back({"methods on the x axis", shown});
  const std::string xtics =
      "set xtics noenhanced\nset xtics (" + labels + ")\nset xrange [-0.5:" + std::to_string(rows.size()) + "-0.5]\n";
  plotter.plot(section, "mse",
               "Reconstruction MSE of the held-out targets per method (mean and standard deviation over targets) and "
               "the perfect-privacy baseline, the class-mean image: an attack at the baseline learns nothing beyond "
               "the label.",
               xtics + "set ylabel 'MSE'\nplot " + data +
                   " using 1:2:3 with yerrorbars lw 2 pt 7 ps 1.5 title 'attack', '' "
                   "using 1:4 with points pt 6 ps 2 lw 2 title 'perfect privacy (class mean)'");
  plotter.plot(section, "ssim",
               "SSIM of the reconstructions per method (higher is more similar) and of the class mean.",
               xtics + "set ylabel 'SSIM'\nplot " + data +
                   " using 1:5:6 with yerrorbars lw 2 pt 7 ps 1.5 title 'attack', '' "
                   "using 1:7 with points pt 6 ps 2 lw 2 title 'perfect privacy (class mean)'");
}

void reconstruction_grid(const nlohmann::json& summary, Plotter& plotter, Section& section) {
  const nlohmann::json reconstructions = summary.value("reconstructions", nlohmann::json::object());
  const nlohmann::json image = reconstructions.value("image", nlohmann::json());
  const nlohmann::json rows = reconstructions.value("rows", nlohmann::json::array());
  if (!image.is_array() || image.size() != 3 || !rows.is_array() || rows.empty()) {
    section.notes.push_back("reconstructions: skipped, the summary has no image shape or no reconstructions");
    return;
  }
  ImageShape shape;
  try {
    shape = {image[0].get<Index>(), image[1].get<Index>(), image[2].get<Index>()};
  } catch (const std::exception&) {
    section.notes.push_back("reconstructions: skipped, the image shape is not three integers");
    return;
  }
  // Rows of the grid in the thesis' order: targets, each method by its code, class means.
  std::map<double, std::vector<const nlohmann::json*>> by_kind;
  for (const nlohmann::json& row : rows)
    if (row.contains("method") && row["method"].is_number() && row.contains("pixels") && row["pixels"].is_array() &&
        static_cast<Index>(row["pixels"].size()) == shape.size())
      by_kind[row["method"].get<double>()].push_back(&row);
  std::vector<double> order;
  for (const auto& [kind, list] : by_kind)
    if (kind != -1.0) order.push_back(kind);
  if (by_kind.count(-1.0)) order.push_back(-1.0);
  if (order.empty() || by_kind.count(-2.0) == 0) {
    section.notes.push_back("reconstructions: skipped, no target images among them");
    return;
  }
  const std::size_t columns = by_kind[-2.0].size();
  RowMatrix all(static_cast<Index>(order.size() * columns), shape.size());
  all.setZero();
  for (std::size_t r = 0; r < order.size(); ++r)
    for (std::size_t c = 0; c < columns && c < by_kind[order[r]].size(); ++c) {
      const nlohmann::json& pixels = (*by_kind[order[r]][c])["pixels"];
      for (Index j = 0; j < shape.size(); ++j)
        all(static_cast<Index>(r * columns + c), j) =
            pixels[static_cast<std::size_t>(j)].is_number() ? pixels[static_cast<std::size_t>(j)].get<double>() : 0.0;
    }
  std::map<double, std::string> names = {{-2.0, "target"}, {-1.0, "class mean"}};
  const nlohmann::json codes = summary.value("method_codes", nlohmann::json::object());  // items() needs it alive
  for (const auto& [name, code] : codes.items())
    if (code.is_number()) names[code.get<double>()] = name;
  const DisplayRange range = display_range(all);
  std::string body = "unset grid\nunset key\nunset tics\nunset border\nset size ratio -1\nset xrange [-0.5:" +
                     std::to_string(shape.width) + "-0.5]\nset yrange [" + std::to_string(shape.height) +
                     "-0.5:-0.5]\nset multiplot layout " + std::to_string(order.size()) + "," +
                     std::to_string(columns) + "\n";
  for (std::size_t r = 0; r < order.size(); ++r)
    for (std::size_t c = 0; c < columns; ++c) {
      const Index row = static_cast<Index>(r * columns + c);
      const std::string data = plotter.data(rgbimage_data(display_image(all, row, shape, range)));
      const std::string title =
          c == 0 ? (names.count(order[r]) ? names[order[r]] : "method " + std::to_string(static_cast<int>(order[r])))
                 : "";
      body += "set title " + gnuplot_string(title) + " noenhanced\nplot " + data + " using 1:2:3:4:5 with rgbimage\n";
    }
  plotter.plot(section, "reconstructions",
               "Held-out targets (top), the attack's reconstructions from each method's released model, and the "
               "class-mean image (bottom), as the thesis' figure 3.3.",
               body + "unset multiplot", 110 * static_cast<int>(columns) + 40,
               120 * static_cast<int>(order.size()) + 20);
}

}  // namespace

void learned_attack_section(const Input& input, Plotter& plotter, Section& section) {
  const nlohmann::json& s = input.summary;
  // The counts as a reader reads them ("public 1000, fixed 500, train shadow models 9500, ..."),
  // not a JSON object.
  if (const auto counts = s.find("counts"); counts != s.end() && counts->is_object()) {
    std::string text;
    for (const auto& [name, value] : counts->items()) {
      std::string words = name;
      std::replace(words.begin(), words.end(), '_', ' ');
      text += (text.empty() ? "" : ", ") + words + " " +
              (value.is_number()   ? format_number(value.get<double>())
               : value.is_string() ? value.get<std::string>()
                                   : value.dump());
    }
    section.facts.push_back({"counts", text});
  }
  if (s.contains("lpips") && s["lpips"].is_string()) section.notes.push_back(s["lpips"].get<std::string>());
  const nlohmann::json methods = s.value("methods", nlohmann::json::object());
  if (!methods.is_object() || methods.empty()) {
    section.notes.push_back("scores per method: skipped, the summary has no methods{}");
  } else {
    scores_per_method(methods, plotter, section);
  }
  reconstruction_grid(s, plotter, section);
}

}  // namespace filkit::report
