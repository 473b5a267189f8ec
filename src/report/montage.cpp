// The examples' images in the report: the run's training images re-loaded as its summary records
// them, and each image as the red, green and blue pixels gnuplot draws.
#include "filkit/base/errors.hpp"
#include "filkit/base/options.hpp"
#include "filkit/data/load.hpp"
#include "filkit/data/npy.hpp"
#include "filkit/data/pipeline.hpp"
#include "report/report_internal.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

namespace filkit::report {

namespace {

// [channels, height, width] of integers, each in 1..2^20 (a real image's, and C*H*W cannot
// overflow); `where` names the field for the message. Throws std::invalid_argument otherwise.
ImageShape image_shape_of(const nlohmann::json& record, const std::string& where) {
  const auto dimension = [](const nlohmann::json& value) {
    return value.is_number_integer() && value.get<std::int64_t>() >= 1 && value.get<std::int64_t>() <= (1 << 20);
  };
  if (!record.is_array() || record.size() != 3 || !std::all_of(record.begin(), record.end(), dimension))
    throw DataError("the summary's " + where + " is " + record.dump() +
                    ", not [channels, height, width] of integers in 1..1048576");
  const auto at = [&](std::size_t k) { return static_cast<Index>(record[k].get<std::int64_t>()); };
  return ImageShape{at(0), at(1), at(2)};
}

// The image shape the summary records for the loaded data (preprocessing.input_image, written by
// Preprocessor::to_json): nullopt if the summary predates it; an empty shape (all zero) if it
// records null, i.e. a table. Throws std::invalid_argument when the record is malformed.
std::optional<ImageShape> recorded_image_shape(const nlohmann::json& summary) {
  const auto preprocessing = summary.find("preprocessing");
  if (preprocessing == summary.end() || !preprocessing->is_object()) return std::nullopt;
  const auto record = preprocessing->find("input_image");
  if (record == preprocessing->end()) return std::nullopt;
  if (record->is_null()) return ImageShape{0, 0, 0};
  return image_shape_of(*record, "preprocessing.input_image");
}

// What a path is, for a message, when it is not a regular file or directory.
std::string kind_of(const struct stat& status) {
  if (S_ISFIFO(status.st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(status.st_mode)) return "a character device";
  if (S_ISBLK(status.st_mode)) return "a block device";
  if (S_ISSOCK(status.st_mode)) return "a socket";
  if (S_ISDIR(status.st_mode)) return "a directory";
  if (S_ISLNK(status.st_mode)) return "a symbolic link";
  return "not a regular file";
}

// Why the report does not re-load what settings.data names, or empty. A summary is not trusted:
// opening a FIFO blocks until something writes to it and a device may never end, so the data
// must be a regular file, or NAME:DIR a directory of regular files and directories only (the
// loader opens files of its own choosing there). Checked by stat before anything is opened; a
// path that does not exist is left to the loader's message.
std::string unsafe_data_source(const std::string& data) {
  struct stat status {};
  if (::stat(data.c_str(), &status) == 0)
    return S_ISREG(status.st_mode) ? "" : "settings.data '" + data + "' is " + kind_of(status) + ", not a regular file";
  const std::size_t colon = data.find(':');
  if (colon == std::string::npos) return "";
  const std::string dir = data.substr(colon + 1);
  if (::stat(dir.c_str(), &status) != 0) return "";
  if (!S_ISDIR(status.st_mode)) return "the directory '" + dir + "' of settings.data is " + kind_of(status);
  constexpr int kMaxEntries = 1000;  // a dataset directory holds a few files
  int entries = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (++entries > kMaxEntries)
      return "the directory '" + dir + "' of settings.data holds more than " + std::to_string(kMaxEntries) + " entries";
    const std::string path = it->path().string();
    if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode) && !S_ISDIR(status.st_mode))
      return "'" + path + "' in the directory of settings.data is " + kind_of(status) + ", not a regular file";
  }
  if (error) return "cannot list the directory '" + dir + "' of settings.data: " + error.message();
  return "";
}

// The training split exactly as the job loaded it (its settings read back field by field), before
// any preprocessing: the montage shows the examples, not their scaled or projected features.
Dataset reload_training_split(const nlohmann::json& summary, const nlohmann::json& settings) {
  DataPipelineOptions pipeline;
  options_from_settings(settings, pipeline);
  std::uint64_t seed = 0;
  if (const auto found = summary.find("seed"); found != summary.end()) option_from_json("seed", *found, seed);
  DataOptions options = pipeline.data_options(seed);
  // The summary's budget is not trusted either: at most the default one.
  options.max_memory.bytes = std::min(options.max_memory.bytes, default_memory_budget().bytes);
  return load_dataset(options).train;
}

}  // namespace

std::optional<RunImages> run_training_images(const nlohmann::json& summary, std::size_t rows, std::string& why_not,
                                             double timeout_seconds) {
  const nlohmann::json settings = summary.value("settings", nlohmann::json::object());
  if (!settings.is_object() || !settings.contains("data") || !settings["data"].is_string()) {
    why_not = "the summary has no settings.data";
    return std::nullopt;
  }
  const std::string data = settings["data"].get<std::string>();
  std::optional<ImageShape> recorded;
  try {
    recorded = recorded_image_shape(summary);
  } catch (const std::invalid_argument& error) {
    why_not = error.what();
    return std::nullopt;
  }
  const std::string extension = std::filesystem::path(data).extension().string();
  if ((recorded && recorded->size() == 0) || extension == ".csv" || extension == ".arff") {
    why_not = data + " is a table, not images" +
              (recorded && recorded->size() == 0 ? " (the summary records no image shape)" : "");
    return std::nullopt;
  }
  if (recorded) {
    // The recorded shape against the recorded row length, before the work of re-loading.
    const auto dimension = number_at(summary, "preprocessing.input_dimension");
    if (dimension && *dimension != static_cast<double>(recorded->size())) {
      why_not = "the summary records images of " + to_string(*recorded) + " (" + std::to_string(recorded->size()) +
                " values) but rows of " + format_number(*dimension) + " values (preprocessing.input_dimension)";
      return std::nullopt;
    }
    if (const std::string problem = montage_problem(*recorded, recorded->size()); !problem.empty()) {
      why_not = problem;
      return std::nullopt;
    }
  }
  if (const std::string unsafe = unsafe_data_source(data); !unsafe.empty()) {
    why_not = unsafe + ": not re-loaded";
    return std::nullopt;
  }
  Dataset train;
  try {
    // On a thread of its own, waited for at most timeout_seconds: the files were checked to be
    // regular, but one may still be slow to read (a network file system) or replaced by a FIFO
    // since. A thread cannot be interrupted: one that overruns is left to finish (within the
    // memory budget) and its result dropped.
    auto reload = std::make_shared<std::packaged_task<Dataset()>>(
        [summary, settings] { return reload_training_split(summary, settings); });
    std::future<Dataset> reloaded = reload->get_future();
    const auto start = std::chrono::steady_clock::now();
    std::thread([reload] { (*reload)(); }).detach();
    // Also a load that ended during the wait's scheduling slack but took longer than the limit:
    // the limit holds for the time taken, not only for how long the wait happened to last.
    const std::chrono::duration<double> limit(timeout_seconds);
    if (reloaded.wait_for(limit) != std::future_status::ready || std::chrono::steady_clock::now() - start > limit) {
      why_not = "re-loading " + data + " took longer than " + format_number(timeout_seconds) +
                " s (the limit set by --reload-timeout, reload_timeout in Python): not re-loaded";
      return std::nullopt;
    }
    train = reloaded.get();
  } catch (const std::exception& error) {
    why_not = "cannot re-load " + data + ": " + error.what();
    return std::nullopt;
  }
  if (!train.image) {
    why_not = data + " re-loads a table of " + std::to_string(train.d()) + " columns, not images";
    return std::nullopt;
  }
  if (recorded && *recorded != *train.image) {
    why_not = "the summary records images of " + to_string(*recorded) + " but " + data + " re-loads images of " +
              to_string(*train.image) + " (the data changed since the run?)";
    return std::nullopt;
  }
  if (static_cast<std::size_t>(train.n()) != rows) {
    why_not =
        data + " re-loads " + std::to_string(train.n()) + " training rows but the table has " + std::to_string(rows);
    return std::nullopt;
  }
  if (const std::string problem = montage_problem(*train.image, train.d()); !problem.empty()) {
    why_not = problem;
    return std::nullopt;
  }
  return RunImages{std::move(train.X), *train.image};
}

std::optional<RunImages> stored_training_images(const nlohmann::json& summary, const std::string& summary_path,
                                                std::size_t rows, std::string& why_not) {
  const nlohmann::json record = summary.value("images", nlohmann::json());
  if (!record.is_object() || !record.contains("file") || !record["file"].is_string() || !record.contains("shape")) {
    why_not =
        "the summary's images is " + record.dump().substr(0, 200) + ", not {\"file\": NAME, \"shape\": [C, H, W]}";
    return std::nullopt;
  }
  ImageShape shape;
  try {
    shape = image_shape_of(record["shape"], "images.shape");
  } catch (const std::invalid_argument& error) {
    why_not = error.what();
    return std::nullopt;
  }
  if (const std::string problem = montage_problem(shape, shape.size()); !problem.empty()) {
    why_not = problem;
    return std::nullopt;
  }
  // A name in the summary's folder, never a path: the summary is data, and may not lead the
  // report to a file elsewhere.
  const std::string file = record["file"].get<std::string>();
  if (file.empty() || file.size() > 255 || file == "." || file == ".." || file.find('/') != std::string::npos ||
      file.find('\0') != std::string::npos) {
    why_not = "the summary's images.file '" + file.substr(0, 100) +
              "' is not a file name in the summary's folder (no directories)";
    return std::nullopt;
  }
  const std::filesystem::path path = std::filesystem::path(summary_path).parent_path() / file;
  // lstat: a symbolic link could lead out of the folder, a FIFO or device block the report.
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    why_not = "the images file '" + path.string() + "' the summary names does not exist";
    return std::nullopt;
  }
  if (!S_ISREG(status.st_mode)) {
    why_not = "the images file '" + path.string() + "' is " + kind_of(status) + ", not a regular file: not read";
    return std::nullopt;
  }
  NpyArray array;
  try {
    array = read_npy(path.string(), default_memory_budget());  // the summary's budget is not trusted
  } catch (const std::exception& error) {
    why_not = "cannot read the images: " + std::string(error.what());
    return std::nullopt;
  }
  Index per_image = array.shape.empty() ? 0 : 1;
  for (std::size_t k = 1; k < array.shape.size(); ++k) per_image *= array.shape[k];
  if (array.shape.size() < 2 || static_cast<std::size_t>(array.shape[0]) != rows || per_image != shape.size()) {
    std::string dims;
    for (Index dim : array.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
    why_not = "the images file '" + path.string() + "' holds an array of shape (" + dims + "), not " +
              std::to_string(rows) + " images of " + to_string(shape) + " (the table's examples)";
    return std::nullopt;
  }
  RowMatrix X = Eigen::Map<const RowMatrix>(array.values.data(), static_cast<Index>(rows), per_image);
  return RunImages{std::move(X), shape};
}

std::string montage_problem(const ImageShape& shape, Index columns) {
  if (shape.channels < 1 || shape.height < 1 || shape.width < 1)
    return "the image shape " + to_string(shape) + " has a dimension below 1";
  if (shape.size() != columns)
    return "images of " + to_string(shape) + " fill " + std::to_string(shape.size()) + " values, but the rows hold " +
           std::to_string(columns);
  if (shape.channels != 1 && shape.channels != 3)
    return "images of " + std::to_string(shape.channels) + " channels (" + to_string(shape) +
           "): only grey (1 channel) or red, green, blue (3) can be drawn";
  return "";
}

DisplayRange display_range(const RowMatrix& images) {
  if (images.size() == 0) return {};
  return {images.minCoeff(), images.maxCoeff()};
}

RgbImage display_image(const RowMatrix& images, Index row, const ImageShape& shape, const DisplayRange& range) {
  if (const std::string problem = montage_problem(shape, images.cols()); !problem.empty())
    throw DataError("display_image: " + problem);
  if (row < 0 || row >= images.rows())
    throw DataError("display_image: row " + std::to_string(row) + " is outside 0.." +
                    std::to_string(images.rows() - 1));
  // Halves, not hi - lo: finite for any two finite values (the loaders allow +-1e150 only, but
  // the map should not depend on that).
  const double half_span = range.hi / 2 - range.lo / 2;
  const auto intensity = [&](double value) -> std::uint8_t {
    if (!(half_span > 0)) return 128;
    const double scaled = std::round(255.0 * (value / 2 - range.lo / 2) / half_span);
    return static_cast<std::uint8_t>(std::clamp(scaled, 0.0, 255.0));  // NaN cannot reach here: loaders refuse it
  };
  const Index plane = shape.height * shape.width;
  RgbImage image{shape.height, shape.width, std::vector<std::array<std::uint8_t, 3>>(static_cast<std::size_t>(plane))};
  for (Index p = 0; p < plane; ++p)
    for (Index c = 0; c < 3; ++c)
      image.pixels[static_cast<std::size_t>(p)][static_cast<std::size_t>(c)] =
          intensity(images(row, (shape.channels == 1 ? 0 : c) * plane + p));
  return image;
}

std::string rgbimage_data(const RgbImage& image) {
  std::string text;
  text.reserve(static_cast<std::size_t>(image.height * image.width) * 16);
  char line[64];
  for (Index h = 0; h < image.height; ++h)
    for (Index w = 0; w < image.width; ++w) {
      const auto& [r, g, b] = image.at(h, w);
      std::snprintf(line, sizeof line, "%lld %lld %d %d %d\n", static_cast<long long>(w), static_cast<long long>(h), r,
                    g, b);
      text += line;
    }
  return text;
}

}  // namespace filkit::report
