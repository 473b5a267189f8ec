// Flag groups shared by the subcommands (data, preprocessing, model, run/output), so that every
// command spells a setting the same way and maps it onto the library's options the same way.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/data/load.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/data/preprocessing.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace filkit::cli {

/// --data, --classes, --target, --categorical, --regression, --missing, --test-fraction,
/// --pca, --scale, --pixel-scale.
struct DataFlags {
  std::string data = "fashion-mnist";
  std::string classes = "auto";  ///< "auto" = 0,1 for built-ins and all for files; "all"; "0,1"
  std::string target;
  std::vector<std::string> categorical;
  bool regression = false;
  std::string missing = "drop";
  double test_fraction = 0.2;
  std::string pca = "auto";  ///< "auto" = 20 for built-ins and none for files; "0" = none
  std::string scale = "global-max";
  std::string pixel_scale = "auto";  ///< divide by 255: "auto" = for built-in images; on; off
  Index train_size = 0;  ///< random subset of the training split (0 = all)
  Index test_size = 0;   ///< random subset of the test split (0 = all)
};
void add_data_flags(CLI::App& command, DataFlags& flags);
/// The library options these flags mean (validated by the library).
DataOptions to_data_options(const DataFlags& flags, std::uint64_t seed);
PreprocessOptions to_preprocess_options(const DataFlags& flags);

/// --model, --l2, --intercept, --tolerance, --solver.
struct ModelFlags {
  std::string model = "logistic";  ///< or least-squares, softmax; auto = by the task
  double l2 = 8e-4;
  bool intercept = false;
  double tolerance = 1e-10;
  std::string solver = "auto";
};
void add_model_flags(CLI::App& command, ModelFlags& flags);
FitOptions to_fit_options(const ModelFlags& flags, bool regression);

/// --seed, --threads, --quiet, --out, --json.
struct RunFlags {
  std::uint64_t seed = 0;
  int threads = 0;  ///< 0 = OpenMP's default (all cores)
  bool quiet = false;
  std::string out;   ///< per-example CSV
  std::string json;  ///< summary JSON
};
void add_run_flags(CLI::App& command, RunFlags& flags, const std::string& out_description);
/// Sets the OpenMP thread count (threads > 0).
void apply_threads(int threads);

/// Writes a numeric table as CSV (integers printed without a decimal point), atomically.
void write_table(const std::string& path, const std::vector<std::string>& header,
                 const std::vector<std::vector<double>>& rows);
/// Writes JSON (2-space indent), atomically.
void write_json(const std::string& path, const nlohmann::json& json);

}  // namespace filkit::cli
