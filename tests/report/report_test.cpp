// The report: every command's section from small hand-made summaries and tables, skipped figures
// on missing fields, errors, `filkit measure --report`, and the HTML rendered in headless Chromium
// (every command's --report page from a small run: no broken image, no text over text).
#include "filkit/jobs/accountant.hpp"
#include "filkit/jobs/attack.hpp"
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/jobs/irfil.hpp"
#include "filkit/jobs/measure.hpp"
#include "filkit/jobs/reconstruct.hpp"
#include "commands.hpp"

#include "filkit/report/report.hpp"
#include "report_notes.hpp"
#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

namespace filkit {
namespace {

using testing::notes_text;

using testing::TempDir;

// A per-example CSV: header, then n rows of f(column, row).
std::string csv(const std::vector<std::string>& header, int n, double (*value)(const std::string&, int)) {
  std::string text;
  for (std::size_t j = 0; j < header.size(); ++j) text += (j ? "," : "") + header[j];
  text += "\n";
  for (int i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < header.size(); ++j) text += (j ? "," : "") + std::to_string(value(header[j], i));
    text += "\n";
  }
  return text;
}

// Plausible per-example values spread over a few decades.
double per_example(const std::string& name, int i) {
  const double t = 0.05 + 0.9 * ((i * 37) % 100) / 100.0;
  if (name == "index") return i;
  if (name == "label") return i % 2;
  if (name == "eta" || name == "dfil") return 0.01 * std::pow(30.0, t);
  if (name == "dfil_bound" || name == "fil_bound" || name == "example_mse_bound") return 1e-3 * std::pow(100.0, t);
  if (name == "attack_mse") return 3e-3 * std::pow(100.0, t);
  if (name == "biased_dfil_bound") return 5e-4 * std::pow(100.0, t);
  if (name == "loss") return 1e-3 * std::pow(1e3, 1 - t);
  return 0.1 + t;  // gradient_norm, linearised_mse, guarded_trials
}

const std::string kBound = R"({"command": "bound", "n": 60, "d": 784, "rdp": {"mse_bound": 0.004},
  "perfect_privacy_mse": 0.2, "settings": {"data": "mnist", "sigma": 0.01}})";

const std::string kReconstruct = R"({"command": "reconstruct", "n": 60, "rdp": {"mse_bound": 0.004},
  "perfect_privacy_mse": 0.2, "attack": {"above_dfil_bound": {"share": 0.97}}})";

// A dpsgd summary of 4 snapshots (2 runs: intervals and spreads) as the job writes one.
std::string dpsgd_summary(double accuracy_scale) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (int step = 1; step <= 4; ++step) {
    const double dfil = 0.5 * step, accuracy = accuracy_scale * (0.8 + 0.04 * step);
    snapshots.push_back({{"step", 100 * step},
                         {"epoch", step},
                         {"epsilon", 0.5 * step},
                         {"test_accuracy", accuracy},
                         {"test_accuracy_per_run", {accuracy - 0.01, accuracy + 0.01}},
                         {"rdp", {{"mse_bound", 0.01 / step}}},
                         {"dfil",
                          {{"max", dfil},
                           {"median", dfil / 4},
                           {"max_interval", {dfil * 0.9, dfil * 1.1}},
                           {"median_interval", {dfil / 4 * 0.9, dfil / 4 * 1.1}},
                           {"mse_bound_at_max", 1 / (dfil * dfil)},
                           {"mse_bound_at_median", 16 / (dfil * dfil)},
                           {"mse_bound_at_max_interval", {1 / (1.21 * dfil * dfil), 1 / (0.81 * dfil * dfil)}}}}});
  }
  return nlohmann::json{{"command", "dpsgd"},
                        {"n", 60},
                        {"sampling_rate", 0.1},
                        {"kappa", 0.3},
                        {"class_names", {"T-shirt/top", "Trouser"}},
                        {"settings",
                         {{"data", "fashion-mnist"},
                          {"classes", {0, 1}},
                          {"model", "logistic"},
                          {"label", "public"},
                          {"batch_size", 6},
                          {"sampling", "uniform"},
                          {"steps", 400},
                          {"step_size", 0.1},
                          {"clip_norm", 1.0},
                          {"noise_multiplier", 1.0},
                          {"runs", 2}}},
                        {"accounting",
                         {{"accountant", "rdp"},
                          {"neighbouring_relation", "replace one example"},
                          {"delta", 1e-5},
                          {"effective_noise_multiplier", 0.8967},
                          {"effective_noise_multiplier_reason", "the smooth clip bounds the norm by 1.11524 C"}}},
                        {"snapshots", snapshots}}
      .dump();
}

// Its per-example table: every example at every snapshot.
std::string dpsgd_table() {
  std::string table = "step,epoch,index,label,times_sampled,eta,dfil\n";
  for (int step = 1; step <= 4; ++step)
    for (int i = 0; i < 60; ++i)
      table += std::to_string(100 * step) + "," + std::to_string(step) + "," + std::to_string(i) + "," +
               std::to_string(i % 2) + ",3,0.1," +
               std::to_string(0.01 * step * std::pow(30.0, ((i * 37) % 100) / 100.0)) + "\n";
  return table;
}

std::string accountant_summary() {
  nlohmann::json steps = nlohmann::json::array(), eps = nlohmann::json::array();
  for (int t = 1; t <= 200; t *= 2) steps.push_back(t), eps.push_back(0.1 * std::sqrt(t));
  return nlohmann::json{{"command", "accountant"},
                        {"description", "RDP accountant, Poisson sampling"},
                        {"eps", 1.0},
                        {"optimal_order", 8},
                        {"settings", {{"delta", 1e-5}}},
                        {"mechanisms", {{{"q", 0.01}, {"noise_multiplier", 1.1}, {"steps", 100}}}},
                        {"eps_by_steps", {{"steps", steps}, {"eps", eps}}},
                        {"eps_by_noise_multiplier", {{"noise_multiplier", {0.5, 1.0, 2.0}}, {"eps", {5.0, 1.0, 0.3}}}}}
      .dump();
}

nlohmann::json attack_result() {
  nlohmann::json by_sigma = nlohmann::json::array();
  for (double sigma : {0.1, 1.0, 10.0})
    by_sigma.push_back({{"sigma", sigma},
                        {"eta_mean", 2.0 / sigma},
                        {"white_box", 0.9 - 0.1 * std::log10(sigma)},
                        {"black_box", 0.7},
                        {"white_box_by_group", {0.6, 0.7, 0.8, 0.9}},
                        {"black_box_by_group", {0.6, 0.65, 0.7, nullptr}},
                        {"release_test_mse", 0.1 * sigma}});
  return {{"prior_accuracy", 0.55}, {"prior_by_group", {0.5, 0.55, 0.55, 0.6}}, {"by_sigma", by_sigma}};
}

std::string irfil_summary() {
  nlohmann::json iterations = nlohmann::json::array();
  for (int t = 0; t <= 5; ++t)
    iterations.push_back({{"iteration", t}, {"eta", {{"std", 0.02 / (1 + t)}, {"mean", 0.05}}}});
  nlohmann::json json = {{"command", "irfil"}, {"iterations", iterations}, {"attack_after", attack_result()}};
  std::vector<double> before, after;
  for (int i = 0; i < 50; ++i) before.push_back(0.01 + 0.001 * i), after.push_back(0.03 + 0.0001 * i);
  json["eta_before"] = before;
  json["eta_after"] = after;
  return json.dump();
}

std::string attack_summary() {
  nlohmann::json json = attack_result();
  json["command"] = "attack";
  return json.dump();
}

std::string read_file(const std::string& path) { return testing::read_bytes(path); }

bool is_png(const std::string& path) {
  const std::string bytes = read_file(path);
  return bytes.size() > 2000 && bytes.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0;
}

bool has_figure(const ReportResult& result, const std::string& suffix) {
  for (const std::string& figure : result.figures)
    if (figure.size() >= suffix.size() && figure.compare(figure.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

// Every figure is a real PNG and embedded in the HTML (its bytes, base64, appear there).
void expect_figures_embedded(const ReportResult& result) {
  const std::string html = read_file(result.html);
  std::size_t embedded = 0;
  for (std::size_t at = html.find("src=\"data:image/png;base64,"); at != std::string::npos;
       at = html.find("src=\"data:image/png;base64,", at + 1))
    ++embedded;
  EXPECT_EQ(embedded, result.figures.size());
  for (const std::string& figure : result.figures) {
    EXPECT_TRUE(is_png(figure)) << figure;
    EXPECT_NE(html.find(std::filesystem::path(figure).filename().string()), std::string::npos) << figure;
  }
  EXPECT_EQ(html.find("<img src=\"report"), std::string::npos) << "no figure is linked instead of embedded";
}

// Writes the fixtures of every command except measure into `dir`; returns the report options.
ReportOptions all_commands(const TempDir& dir) {
  ReportOptions options;
  options.inputs = {dir.write("bound.json", kBound),
                    dir.write("reconstruct.json", kReconstruct),
                    dir.write("dpsgd1.json", dpsgd_summary(1.0)),
                    dir.write("dpsgd2.json", dpsgd_summary(0.95)),
                    dir.write("irfil.json", irfil_summary()),
                    dir.write("attack.json", attack_summary()),
                    dir.write("accountant.json", accountant_summary())};
  options.tables = {
      dir.write("bound.csv", csv({"index", "label", "eta", "dfil", "fil_bound", "dfil_bound"}, 60, per_example)),
      dir.write("reconstruct.csv", csv({"index", "label", "eta", "dfil", "fil_bound", "dfil_bound", "attack_mse",
                                        "linearised_mse", "guarded_trials", "biased_dfil_bound"},
                                       60, per_example)),
      dir.write("dpsgd1.csv", dpsgd_table()),
      dir.write("dpsgd2.csv", dpsgd_table()),
      "",
      "",
      dir.write("rdp-curve.csv", "order,rdp\n2,0.01\n4,0.03\n8,0.08\n16,0.2\n")};
  options.out_dir = dir.file("report");
  options.images = false;  // the fixtures name no data to re-load
  return options;
}

TEST(Report, DrawsEverySectionOfEveryCommandAndEmbedsTheFigures) {
  const TempDir dir;
  const ReportResult result = write_report(all_commands(dir));
  // The fixtures hold only the fields the sections read, so each is noted as departing from its
  // command's summary schema; every other note is about the images.
  for (const std::string& note : result.notes)
    EXPECT_TRUE(note.find("image re-loading is switched off") != std::string::npos ||
                note.find("summary schema of filkit") != std::string::npos)
        << note;
  // dpsgd comes last (one section for every dpsgd input), after the accountant.
  for (const char* figure : {"1-bound-bound-histogram.png",       "2-reconstruct-bound-histogram.png",
                             "2-reconstruct-attack-vs-bound.png", "2-reconstruct-attack-vs-biased-bound.png",
                             "3-irfil-eta-per-iteration.png",     "3-irfil-eta-before-after.png",
                             "3-irfil-attack_after-vs-eta.png",   "3-irfil-attack_after-by-group.png",
                             "4-attack-attack-vs-eta.png",        "4-attack-attack-by-group.png",
                             "5-accountant-eps-vs-steps.png",     "5-accountant-eps-vs-noise.png",
                             "5-accountant-rdp-curve.png",        "6-dpsgd-dfil-epsilon-1.png",
                             "6-dpsgd-mse-bounds-1.png",          "6-dpsgd-dfil-histogram-1.png",
                             "6-dpsgd-dfil-epsilon-2.png",        "6-dpsgd-mse-bounds-2.png",
                             "6-dpsgd-dfil-histogram-2.png",      "6-dpsgd-accuracy-vs-bound.png"})
    EXPECT_TRUE(has_figure(result, figure)) << figure;
  EXPECT_EQ(result.figures.size(), 20u);
  expect_figures_embedded(result);
  // dpsgd's settings and privacy table, one column a run, with spreads over the runs.
  const std::string html = read_file(result.html);
  for (const char* cell :
       {"<th>dpsgd1.json</th><th>dpsgd2.json</th>", "<th>effective noise multiplier</th>", "<td>0.8967</td>",
        "<th>epsilon</th><td>2</td>", "<td>0.96 (0.014)</td>", "<th>max dFIL</th><td>2 [1.8, 2.2]</td>",
        "Effective noise multiplier: the smooth clip bounds the norm by 1.11524 C."})
    EXPECT_NE(html.find(cell), std::string::npos) << cell;
  EXPECT_FALSE(std::filesystem::exists(dir.file("report/.report-scratch-" + std::to_string(::getpid()))));
}

TEST(Report, MeasureWithReportDrawsTheMeasureFiguresAndImageGrids) {
  const TempDir dir;
  // 4 x 4 grey images (an (n, H, W) array): the grids re-load them from the .npz in training order.
  const Dataset data = testing::random_classification(60, 16, 2, 4);
  std::vector<double> x(data.X.data(), data.X.data() + data.X.size()), y(data.y.data(), data.y.data() + data.y.size());
  const std::string npz = dir.write(
      "images.npz", testing::zip_bytes({{"X.npy", testing::npy_bytes("<f8", "(60, 4, 4)", testing::raw_bytes(x))},
                                        {"y.npy", testing::npy_f8(y, 60)}},
                                       false));
  MeasureOptions options;
  options.task.data.data = npz;
  options.task.data.row_scaling = RowScaling::kNone;
  options.task.data.test_fraction = 0.25;
  JobOutputs outputs;
  outputs.report = dir.file("report");
  run_job<MeasureJob>(options, outputs);

  ReportOptions again;  // the same report from the files --report wrote, as `filkit report` would
  again.inputs = {dir.file("report/summary.json")};
  again.tables = {dir.file("report/per-example.csv")};
  again.out_dir = dir.file("again");
  const ReportResult result = write_report(again);
  EXPECT_TRUE(result.notes.empty()) << notes_text(result);
  for (const char* figure : {"eta-histogram.png", "highest-eta-images.png", "lowest-eta-images.png", "eta-vs-loss.png",
                             "eta-vs-gradient_norm.png", "dfil-bound.png"}) {
    EXPECT_TRUE(has_figure(result, figure)) << figure;
    EXPECT_TRUE(is_png(dir.file(std::string("report/1-measure-") + figure))) << "--report wrote " << figure;
  }
  expect_figures_embedded(result);
}

TEST(Report, SkipsFiguresWhoseFieldsAreMissingWithANote) {
  const TempDir dir;
  ReportOptions options;
  options.inputs = {dir.write("measure.json", R"({"command": "measure"})"),
                    dir.write("bound.json", R"({"command": "bound"})"),
                    dir.write("dpsgd.json", R"({"command": "dpsgd", "snapshots": [{"step": 1}]})"),
                    dir.write("irfil.json", R"({"command": "irfil", "iterations": [{"iteration": 0}]})"),
                    dir.write("attack.json", R"({"command": "attack", "by_sigma": [{"sigma": 1}]})"),
                    dir.write("later.json", R"({"command": "something-new", "n": 3})")};
  // eta and label only: the histogram is drawn, loss/gradient/dFIL figures are not.
  options.tables = {dir.write("measure.csv", csv({"index", "label", "eta"}, 30, per_example)),
                    dir.write("bound.csv", csv({"index", "eta", "fil_bound"}, 30, per_example))};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  EXPECT_EQ(result.figures.size(), 1u);
  EXPECT_TRUE(has_figure(result, "1-measure-eta-histogram.png"));
  const std::string notes = notes_text(result);
  for (const char* fragment :
       {"settings.data", "no column 'loss'", "no column 'gradient_norm'", "no column 'dfil'", "no column 'dfil_bound'",
        "dfil.mse_bound_at_max", "eta.std", "eta_before", "eta_mean", "white_box_by_group", "command 'something-new'"})
    EXPECT_NE(notes.find(fragment), std::string::npos) << fragment << "\n" << notes;
  EXPECT_NE(read_file(result.html).find("something-new"), std::string::npos);
  expect_figures_embedded(result);
}

TEST(Report, NamesTheFileOrCommandThatFails) {
  const TempDir dir;
  ReportOptions options;
  options.out_dir = dir.file("report");
  EXPECT_INVALID_ARGUMENT(write_report(options), "input: none given");
  options.inputs = {dir.write("plain.json", R"({"n": 1})")};
  EXPECT_INVALID_ARGUMENT(write_report(options), "plain.json", "\"command\"");
  options.inputs = {dir.write("broken.json", "{")};
  EXPECT_INVALID_ARGUMENT(write_report(options), "broken.json", "JSON");
  options.inputs = {dir.write("bound.json", kBound)};
  options.tables = {dir.file("a.csv"), dir.file("b.csv")};
  EXPECT_INVALID_ARGUMENT(write_report(options), "table: 2 tables for 1 inputs");
  options.tables = {};
  options.gnuplot = dir.file("no-such-gnuplot");
  try {
    write_report(options);
    ADD_FAILURE() << "expected std::runtime_error for a missing gnuplot";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("no-such-gnuplot"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("gnuplot-nox"), std::string::npos) << error.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Rendering in a browser.

std::pair<int, std::string> run_shell(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  return {pclose(pipe), output};
}

struct Rendered {
  int images = -1, broken_images = -1, script_errors = -1, overlaps = -1;
  std::string overlap_examples;
};

// Loads the page in headless Chromium and reads what its inline check script recorded on <body>.
Rendered render(const std::string& html_path, const TempDir& dir) {
  const std::string command =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update "
      "--disable-sync --user-data-dir=" +
      dir.file("chromium-profile") + " --window-size=1280,900 --virtual-time-budget=5000 --dump-dom file://" +
      html_path;
  const auto [status, dom] = run_shell(command);
  EXPECT_EQ(status, 0) << command;
  Rendered rendered;
  const auto attribute = [&dom = dom](const std::string& name) {
    std::smatch match;
    return std::regex_search(dom, match, std::regex(name + "=\"(\\d+)\"")) ? std::stoi(match[1]) : -1;
  };
  rendered.images = attribute("data-images");
  rendered.broken_images = attribute("data-broken-images");
  rendered.script_errors = attribute("data-script-errors");
  rendered.overlaps = attribute("data-overlaps");
  std::smatch match;
  if (std::regex_search(dom, match, std::regex("data-overlap-examples=\"([^\"]*)\"")))
    rendered.overlap_examples = match[1];
  return rendered;
}

bool chromium_installed() { return run_shell("command -v chromium").first == 0; }

// Whether pages are rendered in Chromium: where it is installed, and not in the sanitizer build.
// Chromium runs no code of filkit's, so the sanitizers have nothing to check there; the sanitizer
// suite still writes every page, and the Release suite renders the same pages.
bool pages_rendered() { return chromium_installed() && !testing::kAddressSanitizer; }

// The page renders whole: every figure decoded, no script error, no text box over another or
// over a figure.
void expect_clean_render(const ReportResult& result, const TempDir& dir) {
  const Rendered rendered = render(result.html, dir);
  EXPECT_EQ(rendered.images, static_cast<int>(result.figures.size())) << result.html;
  EXPECT_EQ(rendered.broken_images, 0) << result.html;
  EXPECT_EQ(rendered.script_errors, 0) << result.html;
  EXPECT_EQ(rendered.overlaps, 0) << result.html << ": " << rendered.overlap_examples;
}

TEST(ReportBrowser, RendersInHeadlessChromiumWithoutBrokenImagesOverlapsOrScriptErrors) {
  if (!chromium_installed()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  if (!pages_rendered()) GTEST_SKIP() << "the Release suite renders the pages (Chromium runs no code of filkit's)";
  const TempDir dir;
  ReportOptions options = all_commands(dir);
  options.inputs.push_back(dir.write("measure.json", R"({"command": "measure", "settings": {"classes": [3, 5]}})"));
  options.tables.resize(options.inputs.size() - 1);  // inputs without a table in between
  options.tables.push_back(
      dir.write("measure.csv", csv({"index", "label", "eta", "dfil", "loss", "gradient_norm"}, 40, per_example)));
  const ReportResult result = write_report(options);
  expect_clean_render(result, dir);

  // The check catches a broken image, a script error and text over text: the same page with
  // each injected.
  std::string html = read_file(result.html);
  html.replace(html.find("<h1>"), 4,
               "<img src=\"data:image/png;base64,AAAA\"><script>undefined_call();</script>"
               "<h1><span style=\"position: absolute\">written over the title</span>");
  const Rendered bad = render(dir.write("broken.html", html), dir);
  EXPECT_EQ(bad.broken_images, 1);
  EXPECT_EQ(bad.script_errors, 1);
  EXPECT_GE(bad.overlaps, 1);
  EXPECT_NE(bad.overlap_examples.find("written over the title"), std::string::npos) << bad.overlap_examples;
}

TEST(ReportBinary, WritesTheReportAndNamesItsDirectory) {
  const char* binary = std::getenv("FILKIT_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "FILKIT_BINARY not set";
  const TempDir dir;
  const ReportOptions options = all_commands(dir);
  const auto [status, output] = run_shell(std::string(binary) + " report --input " + options.inputs[0] + " --table " +
                                          options.tables[0] + " --report " + options.out_dir);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("report.html (1 figures)"), std::string::npos) << output;
  const auto missing = run_shell(std::string(binary) + " report --input " + dir.file("nope.json") + " --report x 2>&1");
  EXPECT_NE(missing.first, 0);
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

TEST(JobOutputs, RouteTheOutputsIntoTheReportDirectoryAndDrawTheReport) {
  const testing::TempDir dir;
  MeasureOptions options;
  options.task.data.data = testing::write_npz_dataset(dir, testing::random_classification(90, 3, 2, 8));
  options.task.data.row_scaling = RowScaling::kNone;
  options.task.fit.l2 = 1e-2;
  JobOutputs outputs;
  outputs.report = dir.file("report");
  run_job<MeasureJob>(options, outputs);
  EXPECT_TRUE(std::filesystem::exists(outputs.report + "/summary.json"));
  EXPECT_TRUE(std::filesystem::exists(outputs.report + "/per-example.csv"));
  EXPECT_TRUE(std::filesystem::exists(outputs.report + "/report.html"));
  // A missing output directory is refused before any work.
  outputs.report.clear();
  outputs.json = dir.file("no/such/dir/summary.json");
  EXPECT_THROW(run_job<MeasureJob>(options, outputs), std::invalid_argument);
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

TEST(Report, PublicTrainingDrawsAccuracyDfilPerMethodTheDistributionAndTheCosine) {
  const TempDir dir;
  const std::string summary = R"({"command": "public-training", "n_public": 30, "n_private": 40, "num_classes": 2,
    "parameter_count": 10, "methods": [
      {"method": "sgd", "test_accuracy": {"mean": 0.9, "std": 0.01}},
      {"method": "dpsgd", "test_accuracy": {"mean": 0.85, "std": 0.02, "runs": [0.83, 0.87]}, "epsilon": 3.5, "rdp_delta": 1e-5,
       "max_dfil": {"mean": 2.0, "std": 0.1}, "mean_dfil": {"mean": 0.5, "std": 0.01}, "median_dfil": {"mean": 0.4, "std": 0.01}},
      {"method": "fim", "test_accuracy": {"mean": 0.86, "std": 0.02}, "rdp_epsilon": 3.5,
       "max_dfil": {"mean": 1.0, "std": 0.1}, "mean_dfil": {"mean": 0.2, "std": 0.01}, "median_dfil": {"mean": 0.1, "std": 0.01},
       "perturbation_cosine_with_mean_public_gradient": [[0.9, 0.8, 0.7], [0.85, 0.8, null]]}]})";
  std::string table = "method,index,label,times_sampled,dfil,dfil_mse_bound,fisher_trace\n";
  for (int code : {1, 3})
    for (int i = 0; i < 40; ++i)
      table +=
          std::to_string(code) + "," + std::to_string(i) + ",0,1," + std::to_string(0.1 * code + 0.01 * i) + ",1,1\n";
  ReportOptions options;
  options.inputs = {dir.write("fim.json", summary)};
  options.tables = {dir.write("fim.csv", table)};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  // The fixture holds only what the section reads: the one note says it departs from the schema.
  ASSERT_EQ(result.notes.size(), 1u) << notes_text(result);
  EXPECT_NE(result.notes[0].find("summary schema of filkit"), std::string::npos) << notes_text(result);
  for (const char* figure : {"1-public-training-accuracy.png", "1-public-training-dfil.png",
                             "1-public-training-dfil-histogram.png", "1-public-training-perturbation-cosine.png"})
    EXPECT_TRUE(has_figure(result, figure)) << figure;
  expect_figures_embedded(result);
  // The per-method table: "-" for a single run's spread, epsilon to 3 digits.
  const std::string html = read_file(result.html);
  EXPECT_NE(html.find("<td>0.85 (0.02)</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>3.5 (1e-05)</td>"), std::string::npos) << "epsilon and its delta";
  if (pages_rendered()) expect_clean_render(result, dir);
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

TEST(Report, LearnedAttackDrawsScoresPerMethodAndTheReconstructionGrid) {
  const TempDir dir;
  nlohmann::json summary = {{"command", "learned-attack"},
                            {"counts", {{"fixed", 999}}},
                            {"lpips", "LPIPS is not computed"},
                            {"method_codes", {{"sgd", 0}, {"dpsgd", 1}}}};
  for (const char* method : {"sgd", "dpsgd"})
    summary["methods"][method] = {{"mse", {{"mean", 0.02}, {"std", 0.01}}},
                                  {"ssim", {{"mean", 0.5}, {"std", 0.1}}},
                                  {"perfect_privacy", {{"mse", {{"mean", 0.04}}}, {"ssim", {{"mean", 0.45}}}}}};
  nlohmann::json rows = nlohmann::json::array();
  for (double kind : {-2.0, -1.0, 0.0, 1.0})
    for (int target = 0; target < 3; ++target) {
      std::vector<double> pixels(64);
      for (int j = 0; j < 64; ++j) pixels[static_cast<std::size_t>(j)] = std::fmod(0.1 * j + kind + target, 1.0);
      rows.push_back({{"method", kind}, {"target", target}, {"label", 0}, {"pixels", pixels}});
    }
  summary["reconstructions"] = {{"image", {1, 8, 8}}, {"rows", rows}};
  ReportOptions options;
  options.inputs = {dir.write("attack.json", summary.dump())};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  for (const char* figure :
       {"1-learned-attack-mse.png", "1-learned-attack-ssim.png", "1-learned-attack-reconstructions.png"})
    EXPECT_TRUE(has_figure(result, figure)) << figure << "\n" << notes_text(result);
  EXPECT_NE(notes_text(result).find("LPIPS"), std::string::npos) << "the LPIPS note is shown";
  expect_figures_embedded(result);
  EXPECT_NE(read_file(result.html).find("<td>fixed 999</td>"), std::string::npos) << "the counts as words, not JSON";
  if (pages_rendered()) expect_clean_render(result, dir);
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

// A table with named classes and a categorical attribute, as CSV: 60 rows.
std::string named_classes_csv() {
  std::string text = "x1,x2,x3,colour,garment\n";
  for (int i = 0; i < 60; ++i) {
    const double t = ((i * 37) % 100) / 100.0;
    text += std::to_string(t) + "," + std::to_string(1 - t * t) + "," + std::to_string(0.3 * (i % 7)) + "," +
            (i % 3 == 0   ? "red"
             : i % 3 == 1 ? "green"
                          : "blue") +
            "," + (i % 2 ? "Trouser" : "T-shirt/top") + "\n";
  }
  return text;
}

// 60 grey 4 x 4 images of two classes, as an (n, H, W) array.
std::string images_npz(const TempDir& dir) {
  const Dataset data = testing::random_classification(60, 16, 2, 7);
  std::vector<double> x(data.X.data(), data.X.data() + data.X.size()), y(data.y.data(), data.y.data() + data.y.size());
  return dir.write("images.npz",
                   testing::zip_bytes({{"X.npy", testing::npy_bytes("<f8", "(60, 4, 4)", testing::raw_bytes(x))},
                                       {"y.npy", testing::npy_f8(y, 60)}},
                                      false));
}

// The report each command writes with --report, from small real runs, rendered in Chromium.
TEST(ReportBrowser, EveryCommandsReportRendersWholeInChromium) {
  // Every command writes its report wherever this runs; the pages are rendered where pages_rendered().
  const TempDir dir;
  const std::string table = dir.write("garments.csv", named_classes_csv()), images = images_npz(dir);
  std::vector<std::string> reports;
  const auto outputs = [&](const std::string& name) {
    JobOutputs out;
    out.report = dir.file(name);
    reports.push_back(out.report + "/report.html");
    return out;
  };
  {
    MeasureOptions o;
    o.task.data.data = table;
    o.task.data.target = "garment";
    run_job<MeasureJob>(o, outputs("measure"));
    // The scatter plots' legend and the histogram name the data's classes.
    EXPECT_NE(read_file(dir.file("measure/summary.json")).find("T-shirt/top"), std::string::npos);
  }
  {
    BoundJobOptions o;
    o.task.data.data = images;
    run_job<BoundJob>(o, outputs("bound"));
  }
  {
    ReconstructJobOptions o;
    o.bound.task.data.data = images;
    o.attack.trials = 20;
    run_job<ReconstructJob>(o, outputs("reconstruct"));
  }
  {
    DpSgdJobOptions o;
    o.data.data = images;
    o.dpsgd.steps = 30;
    o.dpsgd.batch_size = 10;
    o.dpsgd.runs = 2;
    o.dpsgd.report_epochs = {1, 3};
    run_job<DpSgdJob>(o, outputs("dpsgd"));
  }
  {
    IrfilJobOptions o;
    o.task.data.data = table;
    o.task.data.target = "garment";
    o.irfil.iterations = 2;
    run_job<IrfilJob>(o, outputs("irfil"));
  }
  {
    AttackJobOptions o;
    o.task.data.data = table;
    o.task.data.target = "garment";
    o.attribute = "colour";
    o.attack.trials = 3;
    o.attack.sigmas = {1e-2, 1e-1};
    run_job<AttackJob>(o, outputs("attack"));
  }
  for (const AccountantKind kind : {AccountantKind::kRdp, AccountantKind::kPld}) {
    AccountantOptions o;
    o.sample_rate = 0.01;
    o.noise_multiplier = 1.1;
    o.steps = 200;
    o.accountant = kind;
    run_job<AccountantJob>(o, outputs("accountant-" + to_string(kind)));
  }
  // The accountant's report has its curves, and its table is named for what it holds.
  EXPECT_TRUE(std::filesystem::exists(dir.file("accountant-rdp/rdp-curve.csv")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("accountant-pld/eps-by-delta.csv")));
  for (const std::string& report : reports) {
    SCOPED_TRACE(report);
    ReportResult result;
    result.html = report;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(report).parent_path()))
      if (entry.path().extension() == ".png") result.figures.push_back(entry.path().string());
    EXPECT_FALSE(result.figures.empty());
    if (pages_rendered()) expect_clean_render(result, dir);
  }
}

}  // namespace
}  // namespace filkit
