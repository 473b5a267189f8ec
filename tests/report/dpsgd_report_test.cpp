// The dpsgd page as a reader needs it (issue 49): an RDP bound many decades below the dFIL bounds
// drawn as a marker at the MSE axis' edge, not as the axis' range; the settings table's clipping;
// and `filkit dpsgd --report` snapshotting each epoch when no schedule is given, so that the
// figures over the steps have more than one point.
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/report/report.hpp"
#include "report/report_internal.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>

namespace filkit {
namespace {

using testing::TempDir;

// A one-run dpsgd summary of three snapshots whose dFIL bounds lie near 1e-2 and whose RDP bound
// is `rdp_bound` at every snapshot.
nlohmann::json far_rdp_summary(double rdp_bound) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (int step = 1; step <= 3; ++step)
    snapshots.push_back({{"step", 10 * step},
                         {"test_accuracy", 0.8},
                         {"rdp", {{"mse_bound", rdp_bound}}},
                         {"dfil",
                          {{"max", 10.0 * step},
                           {"median", 5.0 * step},
                           {"mse_bound_at_max", 0.01 / (step * step)},
                           {"mse_bound_at_median", 0.04 / (step * step)}}}});
  return {{"command", "dpsgd"}, {"clipping", "smooth"}, {"snapshots", snapshots}};
}

// The MSE-bounds figure's script (a dry-run plotter draws nothing) and caption.
std::pair<std::string, std::string> mse_bounds_figure(const nlohmann::json& summary) {
  const std::vector<report::Input> inputs = {{"run.json", summary, "", {}}};
  report::Plotter plotter = report::Plotter::dry_run();
  const std::vector<report::Section> sections = report::draw_sections(inputs, plotter, {false, 1.0});
  for (std::size_t k = 0; k < sections.at(0).figures.size(); ++k)
    if (sections[0].figures[k].file.find("mse-bounds") != std::string::npos)
      return {plotter.dry_run_scripts().at(k), sections[0].figures[k].caption};
  ADD_FAILURE() << "no mse-bounds figure";
  return {};
}

TEST(DpsgdReport, DrawsAnRdpBoundFarBelowTheDfilBoundsAsAMarkerAtTheAxisEdge) {
  const auto [script, caption] = mse_bounds_figure(far_rdp_summary(6e-73));
  // The axis spans the dFIL bounds (1.1e-3 .. 4e-2), halved and doubled, not 70 decades.
  std::smatch range;
  ASSERT_TRUE(std::regex_search(script, range, std::regex(R"(set yrange \[([^:\]]+):([^\]]+)\])"))) << script;
  const double lo = std::stod(range[1]), hi = std::stod(range[2]);
  EXPECT_NEAR(lo, 0.01 / 9 / 2, 1e-9) << script;
  EXPECT_NEAR(hi, 0.04 * 2, 1e-9) << script;
  // The bound is a labelled marker (with its value) at the lower edge, and the caption says why.
  EXPECT_NE(script.find("using 1:7 with points pt 11"), std::string::npos) << script;
  EXPECT_NE(script.find("'RDP bound, below the axis (6e-73)'"), std::string::npos) << script;
  EXPECT_EQ(script.find("using 1:6 with linespoints"), std::string::npos) << "no line of the RDP bound itself";
  EXPECT_NE(caption.find("the RDP bound lies far below the dFIL bounds (down to 6e-73, more than 4 decades below)"),
            std::string::npos)
      << caption;

  // A bound among the others, or a few decades from them, is drawn as it is, the axis its range.
  for (const double near : {5e-3, 1e-5}) {
    const auto [plain, plain_caption] = mse_bounds_figure(far_rdp_summary(near));
    EXPECT_EQ(plain.find("set yrange"), std::string::npos) << near;
    EXPECT_NE(plain.find("using 1:6 with linespoints"), std::string::npos) << near;
    EXPECT_EQ(plain_caption.find("far below"), std::string::npos) << near;
  }
  // Far above: at the upper edge.
  const auto [above, above_caption] = mse_bounds_figure(far_rdp_summary(1e9));
  EXPECT_NE(above.find("using 1:8 with points pt 9"), std::string::npos) << above;
  EXPECT_NE(above_caption.find("far above"), std::string::npos) << above_caption;
}

TEST(DpsgdReport, DrawsTheFarBoundWithGnuplotAndShowsTheClippingInTheSettings) {
  const TempDir dir;
  ReportOptions options;
  options.inputs = {dir.write("run.json", far_rdp_summary(6e-73).dump())};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  for (const std::string& note : result.notes) EXPECT_EQ(note.find("RDP"), std::string::npos) << note;
  bool drawn = false;
  for (const std::string& figure : result.figures)
    drawn = drawn || figure.find("1-dpsgd-mse-bounds.png") != std::string::npos;
  EXPECT_TRUE(drawn);
  const std::string html = testing::read_bytes(result.html);
  EXPECT_NE(html.find("<th>clipping</th><td>smooth</td>"), std::string::npos);
  EXPECT_NE(html.find("drawn as triangles at the axis' lower edge"), std::string::npos);
}

TEST(DpsgdJobSnapshots, EachEpochOrTenthsOfAShortRunAtMostFifty) {
  EXPECT_EQ(epoch_snapshots(100, 10, 50), (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_EQ(epoch_snapshots(100, 10, 59), (std::vector<double>{1, 2, 3, 4, 5}));  // 5.9 epochs
  const std::vector<double> short_run = epoch_snapshots(100, 10, 15);             // 1.5 epochs
  ASSERT_EQ(short_run.size(), 9u);
  EXPECT_DOUBLE_EQ(short_run.front(), 0.15);
  EXPECT_DOUBLE_EQ(short_run.back(), 1.35);
  const std::vector<double> long_run = epoch_snapshots(10, 10, 500);  // 500 epochs: every 10th
  ASSERT_EQ(long_run.size(), 50u);
  EXPECT_EQ(long_run.front(), 10);
  EXPECT_EQ(long_run.back(), 500);
}

TEST(DpsgdJobSnapshots, AReportWithoutAScheduleSnapshotsEachEpochAndAScheduleIsKept) {
  const TempDir dir;
  DpSgdJobOptions options;
  options.data.data = testing::write_npz_dataset(dir, testing::random_classification(60, 4, 2, 11));
  options.data.test_fraction = 0.25;  // 45 training examples
  options.dpsgd.batch_size = 9;       // 5 steps an epoch
  options.dpsgd.steps = 20;           // 4 epochs
  const auto snapshot_steps = [](const std::string& summary_path) {
    std::vector<int> steps;
    const nlohmann::json summary = nlohmann::json::parse(testing::read_bytes(summary_path));
    for (const auto& s : summary["snapshots"]) steps.push_back(s["step"]);
    return steps;
  };
  JobOutputs report;
  report.report = dir.file("report");
  run_job<DpSgdJob>(options, report);
  EXPECT_EQ(snapshot_steps(dir.file("report/summary.json")), (std::vector<int>{5, 10, 15, 20}));
  const nlohmann::json settings =
      nlohmann::json::parse(testing::read_bytes(dir.file("report/summary.json")))["settings"];
  EXPECT_EQ(settings["report_epochs"], (nlohmann::json{1, 2, 3, 4})) << "the summary records the schedule";
  // Without a report, the final step only; with a schedule, the schedule.
  JobOutputs json;
  json.json = dir.file("plain.json");
  run_job<DpSgdJob>(options, json);
  EXPECT_EQ(snapshot_steps(json.json), (std::vector<int>{20}));
  options.dpsgd.report_epochs = {2};
  run_job<DpSgdJob>(options, report);
  EXPECT_EQ(snapshot_steps(dir.file("report/summary.json")), (std::vector<int>{10, 20}));
}

}  // namespace
}  // namespace filkit
