// The report against hostile summaries (issue 27): strings of an input are data, never gnuplot
// commands; a report directory of any name works; the images are re-loaded from regular files
// only; nesting is bounded before a summary is used.
#include "filkit/report/report.hpp"
#include "report/report_internal.hpp"

#include "test_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>

namespace filkit {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Names that break out of a gnuplot string or run a command if pasted into a script: each of
// ` ' " \ $ ; and a line break, gnuplot's system() and @macros. The commands would create
// `marker`, which the tests check stays absent.
std::vector<std::string> hostile_names(const std::string& marker) {
  return {"x`touch " + marker + "`y",
          "it's '.system('touch " + marker + "').'",
          "q\"`touch " + marker + "`\"",
          "back\\slash\\",
          "$(touch " + marker + ") $HOME",
          "a; system(\"touch " + marker + "\"); b",
          "line\nbreak`touch " + marker + "`\n",
          "@x ^{sup}_{sub} & < >"};
}

// The page's text for `text` (report.cpp's escape_html).
std::string html_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// What gnuplot makes of `literal`: its `print` output, run in `dir`.
std::string gnuplot_prints(const TempDir& dir, const std::string& literal) {
  const std::string script =
      dir.write("print.gp", "set print '" + dir.file("printed.txt") + "'\nprint " + literal + "\n");
  std::remove(dir.file("printed.txt").c_str());
  const int status = std::system(("cd " + dir.file("") + " && gnuplot print.gp > /dev/null 2>&1").c_str());
  EXPECT_EQ(status, 0) << literal;
  return testing::read_bytes(dir.file("printed.txt"));
}

TEST(GnuplotString, IsReadBackByGnuplotAsWrittenAndRunsNothing) {
  const TempDir dir;
  const std::string marker = dir.file("PWNED");
  for (const std::string& name : hostile_names(marker)) {
    EXPECT_EQ(gnuplot_prints(dir, report::gnuplot_string(name)), name + "\n") << name;
    EXPECT_FALSE(fs::exists(marker)) << name;
  }
  // Other control characters would end or garble the command: drawn as spaces.
  EXPECT_EQ(gnuplot_prints(dir, report::gnuplot_string(std::string("a\rb\0c\td", 7))), "a b c d\n");
}

// A learned-attack summary whose method names (methods{} keys and method_codes) are `names`.
nlohmann::json learned_attack(const std::vector<std::string>& names) {
  nlohmann::json summary = {{"command", "learned-attack"}, {"counts", {{"fixed", 9}}}};
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t k = 0; k < names.size(); ++k) {
    summary["methods"][names[k]] = {{"mse", {{"mean", 0.02 + 0.001 * k}, {"std", 0.01}}},
                                    {"ssim", {{"mean", 0.5}, {"std", 0.1}}},
                                    {"perfect_privacy", {{"mse", {{"mean", 0.04}}}, {"ssim", {{"mean", 0.45}}}}}};
    summary["method_codes"][names[k]] = k;
  }
  for (double kind = -2; kind < static_cast<double>(names.size()); ++kind)
    rows.push_back(
        {{"method", kind}, {"target", 0}, {"label", 0}, {"pixels", std::vector<double>(16, 0.1 * (kind + 2))}});
  summary["reconstructions"] = {{"image", {1, 4, 4}}, {"rows", rows}};
  return summary;
}

nlohmann::json fim(const std::vector<std::string>& names) {
  nlohmann::json methods = nlohmann::json::array();
  for (const std::string& name : names)
    methods.push_back({{"method", name},
                       {"test_accuracy", {{"mean", 0.9}, {"std", 0.01}}},
                       {"max_dfil", {{"mean", 2.0}, {"std", 0.1}}},
                       {"mean_dfil", {{"mean", 0.5}, {"std", 0.01}}},
                       {"median_dfil", {{"mean", 0.4}, {"std", 0.01}}}});
  return {{"command", "fim"}, {"methods", methods}};  // public-training by its former name, as older summaries
}

// An irfil summary whose attack results are under the keys `names` (they name figure files).
nlohmann::json irfil(const std::vector<std::string>& names) {
  nlohmann::json summary = {{"command", "irfil"}};
  for (const std::string& name : names)
    summary[name] = {{"by_sigma",
                      {{{"sigma", 1.0},
                        {"eta_mean", 2.0},
                        {"white_box", 0.8},
                        {"black_box", 0.7},
                        {"release_test_mse", 0.1},
                        {"white_box_by_group", {0.6, 0.7}},
                        {"black_box_by_group", {0.6, 0.65}}}}}};
  return summary;
}

TEST(ReportHostileInput, DrawsNamesAsWrittenRunsNothingAndWorksInAnyDirectory) {
  const TempDir dir;
  const std::string marker = dir.file("PWNED");
  const std::vector<std::string> names = hostile_names(marker);
  ReportOptions options;
  options.inputs = {dir.write("attack.json", learned_attack(names).dump()), dir.write("fim.json", fim(names).dump()),
                    dir.write("irfil.json", irfil(names).dump())};
  // The report directory's own name holds every special character too.
  options.out_dir = dir.file("report `touch " + marker + "` ' \" \\ $HOME ; system(\"x\")\nend");
  const ReportResult result = write_report(options);
  EXPECT_FALSE(fs::exists(marker)) << "a name ran a command";
  std::string notes;
  for (const std::string& note : result.notes) notes += note + "\n";
  // 2 (mse, ssim) + reconstructions, fim's accuracy and dfil, and per attack key 2 of irfil.
  EXPECT_EQ(result.figures.size(), 5 + 2 * names.size()) << notes;
  for (const std::string& figure : result.figures) {
    EXPECT_TRUE(fs::is_regular_file(figure)) << figure;
    EXPECT_EQ(fs::path(figure).parent_path(), fs::path(options.out_dir)) << "a figure outside the report: " << figure;
  }
  const std::string html = testing::read_bytes(result.html);
  for (const std::string& name : names) EXPECT_NE(html.find(html_escaped(name)), std::string::npos) << name;
  // Only the report's files are left: figures and the page, no scratch directory.
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(options.out_dir)) ++entries;
  EXPECT_EQ(entries, result.figures.size() + 1);
}

TEST(ReportHostileInput, NamesFigureFilesOnlyWithSafeCharactersAndNeverTwice) {
  const TempDir dir;
  ReportOptions options;
  options.inputs = {dir.write("irfil.json", irfil({"../../escape", "a b", "a_b", ".hidden"}).dump())};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  std::set<std::string> files;
  for (const std::string& figure : result.figures) {
    const std::string file = fs::path(figure).filename().string();
    EXPECT_EQ(fs::path(figure).parent_path(), fs::path(options.out_dir)) << figure;
    EXPECT_EQ(file.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."),
              std::string::npos)
        << file;
    EXPECT_TRUE(files.insert(file).second) << "twice: " << file;
  }
  EXPECT_EQ(files.size(), 8u);
  EXPECT_TRUE(files.count("1-irfil-a_b-by-group.png") && files.count("1-irfil-a_b-by-group-2.png"));
  EXPECT_FALSE(fs::exists(dir.file("escape-vs-eta.png")));
}

TEST(ReportHostileInput, AFigureGnuplotCannotDrawIsANoteNotAFailedReport) {
  const TempDir dir;
  // No release_test_mse (the right axis has no point) and no SSIM of any method: gnuplot refuses
  // those two figures; the others are drawn.
  nlohmann::json attack = irfil({"attack"})["attack"];
  attack["by_sigma"][0].erase("release_test_mse");
  attack["command"] = "attack";
  nlohmann::json scores = learned_attack({"sgd"});
  scores["methods"]["sgd"].erase("ssim");
  scores["methods"]["sgd"]["perfect_privacy"].erase("ssim");
  ReportOptions options;
  options.inputs = {dir.write("attack.json", attack.dump()), dir.write("la.json", scores.dump())};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  std::string notes;
  for (const std::string& note : result.notes) notes += note + "\n";
  EXPECT_NE(notes.find("1-attack-attack-vs-eta.png: not drawn, 'gnuplot' failed (exit 1): "), std::string::npos)
      << notes;
  EXPECT_NE(notes.find("2-learned-attack-ssim.png: not drawn"), std::string::npos) << notes;
  std::set<std::string> files;
  for (const std::string& figure : result.figures) files.insert(fs::path(figure).filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"1-attack-attack-by-group.png", "2-learned-attack-mse.png",
                                          "2-learned-attack-reconstructions.png"}));
}

// A FIFO with a writer waiting for a reader: should the report open it after all, the writer
// lets it read a few bytes and the end, so a regression fails the test instead of hanging it.
class Fifo {
 public:
  explicit Fifo(std::string path) : path_(std::move(path)) {
    EXPECT_EQ(::mkfifo(path_.c_str(), 0600), 0);
    writer_ = std::thread([this] {
      const int fd = ::open(path_.c_str(), O_WRONLY);
      if (fd >= 0) {
        [[maybe_unused]] const auto ignored = ::write(fd, "PK", 2);
        ::close(fd);
      }
    });
  }
  ~Fifo() {
    // A reader that does not wait releases the writer still waiting in open().
    const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK);
    writer_.join();
    if (fd >= 0) ::close(fd);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::thread writer_;
};

std::string why_not_reloaded(const std::string& data) {
  const nlohmann::json summary = {{"command", "measure"},
                                  {"settings", {{"data", data}, {"test_fraction", 0.0}}},
                                  {"preprocessing", {{"input_image", {1, 4, 4}}, {"input_dimension", 16}}}};
  std::string why_not;
  EXPECT_FALSE(report::run_training_images(summary, 20, why_not).has_value());
  return why_not;
}

TEST(ReportHostileInput, ReloadsImagesFromRegularFilesOnly) {
  const TempDir dir;
  const Fifo fifo(dir.file("data.npz"));
  std::string why = why_not_reloaded(fifo.path());
  EXPECT_NE(why.find("is a FIFO (named pipe), not a regular file: not re-loaded"), std::string::npos) << why;
  why = why_not_reloaded("/dev/zero");
  EXPECT_NE(why.find("'/dev/zero' is a character device"), std::string::npos) << why;
  why = why_not_reloaded(dir.file(""));
  EXPECT_NE(why.find("is a directory"), std::string::npos) << why;
  // A built-in's directory holding a FIFO among its files.
  fs::create_directories(dir.file("mnist"));
  const Fifo in_dir(dir.file("mnist/train-images-idx3-ubyte"));
  why = why_not_reloaded("mnist:" + dir.file("mnist"));
  EXPECT_NE(why.find("train-images-idx3-ubyte' in the directory of settings.data is a FIFO"), std::string::npos) << why;

  // Through the whole report: a note in the page, the other figures drawn.
  std::string table = "index,label,eta,dfil\n";
  for (int i = 0; i < 20; ++i)
    table += std::to_string(i) + "," + std::to_string(i % 2) + "," + std::to_string(0.1 + 0.01 * i) + ",1\n";
  ReportOptions options;
  options.inputs = {dir.write("measure.json", nlohmann::json{{"command", "measure"},
                                                             {"settings", {{"data", fifo.path()}}},
                                                             {"preprocessing", {{"input_image", {1, 4, 4}}}}}
                                                  .dump())};
  options.tables = {dir.write("measure.csv", table)};
  options.out_dir = dir.file("report");
  const ReportResult result = write_report(options);
  std::string notes;
  for (const std::string& note : result.notes) notes += note + "\n";
  EXPECT_NE(notes.find("highest/lowest-eta images: skipped, settings.data '" + fifo.path() + "' is a FIFO"),
            std::string::npos)
      << notes;
  EXPECT_NE(testing::read_bytes(result.html).find("is a FIFO (named pipe)"), std::string::npos);
  EXPECT_FALSE(result.figures.empty());
}

// {"command": "measure", "a": [[[...]]]} with `depth` levels in all (the object is one).
std::string nested_summary(int depth, const std::string& field = "a") {
  return R"({"command": "learned-attack", ")" + field + "\": " + std::string(static_cast<std::size_t>(depth - 1), '[') +
         std::string(static_cast<std::size_t>(depth - 1), ']') + "}";
}

TEST(ReportHostileInput, RefusesSummariesNestedBeyondTheLimitNamingFileAndLimit) {
  const TempDir dir;
  // The limit itself is read, and the facts table prints it.
  ReportOptions options;
  options.inputs = {dir.write("deep-ok.json", nested_summary(64, "counts"))};
  options.out_dir = dir.file("report");
  EXPECT_NO_THROW(write_report(options));
  EXPECT_NO_THROW(report::read_summary(dir.write("a.json", nested_summary(64))));
  for (const auto& [depth, field] :
       std::vector<std::pair<int, std::string>>{{65, "a"}, {60000, "a"}, {60000, "counts"}}) {
    const std::string path = dir.write("deep.json", nested_summary(depth, field));
    options.inputs = {path};
    try {
      write_report(options);
      ADD_FAILURE() << "expected std::invalid_argument for nesting " << depth;
    } catch (const std::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("report input '" + path + "': nests arrays and objects deeper than 64 levels"),
                std::string::npos)
          << message;
    }
  }
}

}  // namespace
}  // namespace filkit
