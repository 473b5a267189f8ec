// The report: reads the inputs, lets each command's section draw its figures, writes the HTML.
#include "filkit/report/report.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/summary_schema.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/data/text_table.hpp"
#include "base/json_input.hpp"
#include "base/parsing.hpp"
#include "report/report_internal.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace filkit {

namespace fs = std::filesystem;
using report::Input;
using report::Section;

void ReportOptions::validate() const {
  if (inputs.empty()) option_error("input", "none given; give at least one summary JSON");
  if (tables.size() > inputs.size())
    option_error("table", std::to_string(tables.size()) + " tables for " + std::to_string(inputs.size()) + " " +
                              option_name("input") + "s; the k-th table belongs to the k-th input");
  if (out_dir.empty()) option_error("report", "empty; name the report directory");
  if (gnuplot.empty()) option_error("gnuplot", "empty; name the gnuplot executable");
  require_positive("reload_timeout", reload_timeout);
}

nlohmann::json report::read_summary(const std::string& path) {
  std::string text;
  try {
    text = detail::read_file_bytes(path);  // within the default memory budget, as any input
  } catch (const std::exception& error) {
    throw DataError("report input '" + path + "': " + error.what());
  }
  // Nesting bounded: the facts table dumps fields, and dump() recurses once a level.
  const nlohmann::json json = detail::parse_json_input(text, "report input '" + path + "'");
  if (!json.is_object() || !json.contains("command") || !json["command"].is_string())
    throw DataError("report input '" + path + "': no \"command\" field naming the command that wrote it");
  return json;
}

report::Columns report::read_columns(const std::string& path) {
  const TextTable table = read_csv(path);
  report::Columns columns;
  for (std::size_t j = 0; j < table.header.size(); ++j) {
    std::vector<double>& values = columns[table.header[j]];
    for (const auto& row : table.rows) {
      char* end = nullptr;
      const double value = std::strtod(row[j].c_str(), &end);
      // The whole cell, not just up to a NUL byte inside it.
      values.push_back(end != row[j].c_str() && end == row[j].c_str() + row[j].size() ? value : std::nan(""));
    }
  }
  return columns;
}

namespace {

std::vector<Input> read_inputs(const ReportOptions& options) {
  std::vector<Input> inputs;
  for (std::size_t k = 0; k < options.inputs.size(); ++k) {
    Input input{options.inputs[k], report::read_summary(options.inputs[k]), "", {}, {}};
    input.schema_departures = summary_schema_violations(input.summary, 3);
    if (k < options.tables.size() && !options.tables[k].empty()) {
      input.table_path = options.tables[k];
      input.table = report::read_columns(input.table_path);
    }
    inputs.push_back(std::move(input));
  }
  return inputs;
}

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

/// A note naming where a summary departs from its schema (schemas/summary/), so that a figure or
/// fact missing from its section is explained.
void add_schema_note(const Input& input, Section& section) {
  if (input.schema_departures.empty()) return;
  std::string listed;
  for (const std::string& departure : input.schema_departures) listed += (listed.empty() ? "" : "; ") + departure;
  section.notes.push_back(input.summary_path + ": departs from the " + input.summary["command"].get<std::string>() +
                          " summary schema of filkit " FILKIT_VERSION
                          " (written by another version, or edited), so some figures may be missing: " +
                          listed);
}

// Facts every summary may carry, shown above the figures.
void add_common_facts(const Input& input, Section& section) {
  const nlohmann::json& settings = input.summary.value("settings", nlohmann::json::object());
  const auto text = [](const nlohmann::json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
  };
  section.facts.push_back({"summary", input.summary_path});
  if (!input.table_path.empty()) section.facts.push_back({"table", input.table_path});
  if (settings.is_object() && settings.contains("data")) section.facts.push_back({"data", text(settings["data"])});
  if (settings.is_object() && settings.contains("model")) section.facts.push_back({"model", text(settings["model"])});
  for (const char* key : {"n", "d", "seed"})
    if (input.summary.contains(key)) section.facts.push_back({key, text(input.summary[key])});
  for (const char* key : {"sigma", "l2"})
    if (const auto value = report::number_at(settings, key))
      section.facts.push_back({key, report::format_number(*value)});
  for (const char* key : {"train_accuracy", "test_accuracy", "eta.mean", "eta.median", "dfil.median"})
    if (const auto value = report::number_at(input.summary, key))
      section.facts.push_back({key, report::format_number(*value)});
}

// Each command's section, by the "command" its summaries carry. dpsgd's inputs share one section,
// drawn after the others (dpsgd_section).
using DrawSection = void (*)(const Input& input, report::Plotter& plotter, Section& section,
                             const report::ImageReload& images);
struct SectionOf {
  std::string_view command;
  DrawSection draw;  ///< nullptr: drawn apart (dpsgd)
};
constexpr SectionOf kSections[] = {
    {"measure", report::measure_section},
    {"bound", [](const Input& input, report::Plotter& plotter, Section& section,
                 const report::ImageReload&) { report::bound_section(input, plotter, section); }},
    {"reconstruct", [](const Input& input, report::Plotter& plotter, Section& section,
                       const report::ImageReload&) { report::reconstruct_section(input, plotter, section); }},
    {"irfil", [](const Input& input, report::Plotter& plotter, Section& section,
                 const report::ImageReload&) { report::irfil_section(input, plotter, section); }},
    {"public-training", [](const Input& input, report::Plotter& plotter, Section& section,
                           const report::ImageReload&) { report::public_training_section(input, plotter, section); }},
    {"fim", [](const Input& input, report::Plotter& plotter, Section& section,  // summaries from before its rename
               const report::ImageReload&) { report::public_training_section(input, plotter, section); }},
    {"learned-attack", [](const Input& input, report::Plotter& plotter, Section& section,
                          const report::ImageReload&) { report::learned_attack_section(input, plotter, section); }},
    {"attack", [](const Input& input, report::Plotter& plotter, Section& section,
                  const report::ImageReload&) { report::attack_section(input.summary, "attack", plotter, section); }},
    {"accountant", [](const Input& input, report::Plotter& plotter, Section& section,
                      const report::ImageReload&) { report::accountant_section(input, plotter, section); }},
    {"dpsgd", nullptr},
};

const SectionOf* section_of(std::string_view command) {
  for (const SectionOf& entry : kSections)
    if (entry.command == command) return &entry;
  return nullptr;
}

}  // namespace

bool has_report_section(std::string_view command) { return section_of(command) != nullptr; }

std::vector<Section> report::draw_sections(const std::vector<Input>& inputs, Plotter& plotter,
                                           const ImageReload& images) {
  std::vector<Section> sections;
  std::vector<const Input*> dpsgd;
  for (const Input& input : inputs) {
    const std::string command = input.summary["command"].get<std::string>();
    if (command == "dpsgd") {
      dpsgd.push_back(&input);
      continue;
    }
    Section section;
    section.id = std::to_string(sections.size() + 1) + "-" + command;
    section.title = command + ": " + file_name(input.summary_path);
    add_common_facts(input, section);
    add_schema_note(input, section);
    if (const SectionOf* drawn = section_of(command)) drawn->draw(input, plotter, section, images);
    else section.notes.push_back("no report section for command '" + command + "' yet; only its facts are shown");
    sections.push_back(std::move(section));
  }
  if (!dpsgd.empty()) {
    Section section;
    section.id = std::to_string(sections.size() + 1) + "-dpsgd";
    section.title = "dpsgd: " + std::to_string(dpsgd.size()) + " run(s)";
    for (const Input* input : dpsgd) {
      section.facts.push_back({"summary", input->summary_path});
      add_schema_note(*input, section);
    }
    report::dpsgd_section(dpsgd, plotter, section, images);
    sections.push_back(std::move(section));
  }
  return sections;
}

namespace {

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t left = bytes.size() - i;
    std::uint32_t chunk = static_cast<unsigned char>(bytes[i]) << 16;
    if (left > 1) chunk |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (left > 2) chunk |= static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(chunk >> 18) & 63];
    out += alphabet[(chunk >> 12) & 63];
    out += left > 1 ? alphabet[(chunk >> 6) & 63] : '=';
    out += left > 2 ? alphabet[chunk & 63] : '=';
  }
  return out;
}

std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string read_binary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ResourceError("cannot read the figure '" + path.string() + "'");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The inline script lets a headless browser report how the page rendered, as data attributes of
// <body>: the images that failed to decode, script errors, and text boxes that overlap each other
// or an image (each line box of every text node, compared pairwise; boxes sharing no more than
// 2 px either way, as neighbouring lines may, do not count), with the first few overlaps named.
const char* kRenderCheckScript = R"(<script>
(function () {
  var errors = 0;
  window.onerror = function () { errors += 1; if (document.body) document.body.dataset.scriptErrors = errors; };
  function boxes() {
    var list = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node, k = 0;
    while ((node = walker.nextNode())) {
      if (!node.textContent.trim() || node.parentElement.closest('script, style')) continue;
      var range = document.createRange();
      range.selectNodeContents(node);
      var rects = range.getClientRects();
      for (var i = 0; i < rects.length; ++i)
        if (rects[i].width > 0 && rects[i].height > 0)
          list.push({owner: 't' + k, rect: rects[i], what: node.textContent.trim().slice(0, 40)});
      k += 1;
    }
    for (var j = 0; j < document.images.length; ++j)
      list.push({owner: 'i' + j, rect: document.images[j].getBoundingClientRect(), what: 'image ' + document.images[j].alt});
    return list;
  }
  function overlaps(list) {
    var found = [];
    for (var a = 0; a < list.length; ++a)
      for (var b = a + 1; b < list.length; ++b) {
        if (list[a].owner === list[b].owner) continue;
        var r = list[a].rect, s = list[b].rect;
        var w = Math.min(r.right, s.right) - Math.max(r.left, s.left), h = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
        if (w > 2 && h > 2) found.push(list[a].what + ' / ' + list[b].what);
      }
    return found;
  }
  window.addEventListener('load', function () {
    var broken = 0;
    for (var i = 0; i < document.images.length; ++i)
      if (!document.images[i].complete || document.images[i].naturalWidth === 0) broken += 1;
    var found = overlaps(boxes());
    document.body.dataset.images = document.images.length;
    document.body.dataset.brokenImages = broken;
    document.body.dataset.overlaps = found.length;
    document.body.dataset.overlapExamples = found.slice(0, 5).join(' | ');
    document.body.dataset.scriptErrors = errors;
  });
})();
</script>)";

const char* kStyle = R"(<style>
body { font-family: 'DejaVu Sans', sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
section { border-top: 1px solid #ccc; margin-top: 2em; }
table.facts td { padding: 0.1em 1em 0.1em 0; font-size: 90%; vertical-align: top; overflow-wrap: anywhere; }
table.data { border-collapse: collapse; margin: 1em 0; font-size: 90%; }
table.data caption { caption-side: bottom; text-align: left; color: #444; padding-top: 0.4em; }
table.data th, table.data td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
table.data th { background: #f4f4f4; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 90%; color: #444; }
p.note { color: #8a5a00; font-size: 90%; }
</style>)";

std::string section_html(const Section& section, const fs::path& out_dir) {
  std::string html = "<section>\n<h2>" + escape_html(section.title) + "</h2>\n<table class=\"facts\">\n";
  for (const auto& [key, value] : section.facts)
    html += "<tr><td>" + escape_html(key) + "</td><td>" + escape_html(value) + "</td></tr>\n";
  html += "</table>\n";
  for (const report::Table& table : section.tables) {
    html += "<table class=\"data\">\n<caption>" + escape_html(table.caption) + "</caption>\n<tr>";
    for (const std::string& cell : table.header) html += "<th>" + escape_html(cell) + "</th>";
    html += "</tr>\n";
    for (const auto& row : table.rows) {
      html += "<tr>";
      for (std::size_t k = 0; k < row.size(); ++k)
        html += (k == 0 ? "<th>" : "<td>") + escape_html(row[k]) + (k == 0 ? "</th>" : "</td>");
      html += "</tr>\n";
    }
    html += "</table>\n";
  }
  for (const std::string& note : section.notes) html += "<p class=\"note\">" + escape_html(note) + "</p>\n";
  for (const report::Figure& figure : section.figures)
    html += "<figure><img alt=\"" + escape_html(figure.file) + "\" src=\"data:image/png;base64," +
            base64(read_binary(out_dir / figure.file)) + "\">\n<figcaption>" + escape_html(figure.caption) + " (" +
            escape_html(figure.file) + ")</figcaption></figure>\n";
  return html + "</section>\n";
}

std::string page_html(const std::vector<Section>& sections, const fs::path& out_dir) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>filkit report</title>\n";
  html += std::string(kStyle) + "\n" + kRenderCheckScript + "\n</head>\n<body>\n<h1>filkit report</h1>\n";
  html += "<p>filkit " + escape_html(version()) +
          ": Fisher information loss (FIL) of the inputs below. "
          "eta is the per-example FIL (spectral norm of the Jacobian over sigma); dFIL its trace form; "
          "1/dFIL<sup>2</sup> the Cramér–Rao bound on the MSE of any unbiased reconstruction.</p>\n";
  for (const Section& section : sections) html += section_html(section, out_dir);
  return html + "</body>\n</html>\n";
}

// A scratch directory inside the report directory (so figures move into place by rename),
// removed however the report ends.
class ScratchDir {
 public:
  explicit ScratchDir(const fs::path& parent) : path_(parent / (".report-scratch-" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

ReportResult write_report(const ReportOptions& options) {
  options.validate();
  const std::vector<Input> inputs = read_inputs(options);
  const fs::path out_dir(options.out_dir);
  std::error_code error;
  const bool existed = fs::exists(out_dir, error);
  create_output_directory("report", options.out_dir);
  std::vector<Section> sections;
  try {
    const ScratchDir scratch(out_dir);
    report::Plotter plotter(options.gnuplot, scratch.path(), out_dir);
    sections = report::draw_sections(inputs, plotter, {options.images, options.reload_timeout});
    write_output_file((out_dir / "report.html").string(), page_html(sections, out_dir));
  } catch (...) {
    // A directory this call made holds only what it wrote: a failed report leaves nothing behind.
    if (!existed) fs::remove_all(out_dir, error);
    throw;
  }

  ReportResult result;
  result.html = (out_dir / "report.html").string();
  for (const Section& section : sections) {
    for (const report::Figure& figure : section.figures) result.figures.push_back((out_dir / figure.file).string());
    for (const std::string& note : section.notes) result.notes.push_back(section.title + ": " + note);
  }
  return result;
}

}  // namespace filkit
