#include "jobs/shadow_model_store.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/data/npy.hpp"
#include "base/parsing.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace filkit {

namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

/// The first setting (a key path such as "training.lambda") whose values differ, with both values.
struct Difference {
  std::string key;
  nlohmann::json stored, now;
};
std::optional<Difference> first_difference(const nlohmann::json& stored, const nlohmann::json& now,
                                           const std::string& prefix = "") {
  if (stored.is_object() && now.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : stored.items()) keys.push_back(key);
    for (const auto& [key, value] : now.items())
      if (!stored.contains(key)) keys.push_back(key);
    // The settings before the data's hashes: a changed seed is named as the seed, not as the
    // other rows it draws.
    const auto is_hash = [](const std::string& key) { return key.ends_with("_hash"); };
    std::stable_partition(keys.begin(), keys.end(), [&](const std::string& key) { return !is_hash(key); });
    for (const std::string& key : keys) {
      const nlohmann::json missing = "(not recorded)";
      const auto found = first_difference(stored.contains(key) ? stored[key] : missing,
                                          now.contains(key) ? now[key] : missing, prefix + key + ".");
      if (found) return found;
    }
    return std::nullopt;
  }
  if (stored == now) return std::nullopt;
  return Difference{prefix.substr(0, prefix.size() - 1), stored, now};
}

}  // namespace

std::string ShadowModelStore::model_sha256(Index candidate, const std::string& row_hash, const VectorXd& parameters) {
  std::string bytes = std::to_string(candidate) + " " + row_hash + " ";
  bytes.append(reinterpret_cast<const char*>(parameters.data()),
               static_cast<std::size_t>(parameters.size()) * sizeof(double));
  return sha256_hex(bytes);
}

ShadowModelStore::ShadowModelStore(const std::string& directory, const std::string& method, nlohmann::json fingerprint,
                                   const Dataset& candidates, ByteSize max_memory)
    : base_((std::filesystem::path(directory) / method).string()),
      fingerprint_(std::move(fingerprint)),
      candidates_(&candidates) {
  const std::string json_file = json_path(), npy_file = npy_path();
  if (!std::filesystem::exists(json_file)) return;
  const auto refuse = [&](const std::string& what) { throw DataError("'" + json_file + "' " + what); };
  nlohmann::json stored;
  try {
    stored = nlohmann::json::parse(detail::read_file_bytes(json_file, max_memory));
  } catch (const nlohmann::json::exception& error) {
    refuse(std::string("is not a shadow-model store's JSON: ") + error.what());
  }
  if (!stored.is_object() || !stored.contains("format") || !stored["format"].is_string())
    refuse(std::string("is not a shadow-model store (it has no \"format\" \"") + kFormat + "\")");
  if (stored["format"] == kFormatWithoutModelHashes)
    refuse(std::string("was written by an earlier filkit (format \"") + kFormatWithoutModelHashes +
           "\", whose rows are not hashed with their parameters, so a reordered .npy went unnoticed): remove it and "
           "its .npy to train the models again");
  if (stored["format"] != kFormat)
    refuse(std::string("is not a shadow-model store (its \"format\" is not \"") + kFormat + "\")");
  if (const auto difference = first_difference(stored.value("fingerprint", nlohmann::json::object()), fingerprint_))
    refuse("holds shadow models trained with " + difference->key + " = " + difference->stored.dump() +
           ", and this attack has " + difference->now.dump() +
           ": run it with the same settings, or give --shadow-models another directory");
  const nlohmann::json& rows = stored["candidates"];
  const nlohmann::json& hashes = stored["row_hashes"];
  const nlohmann::json& model_hashes = stored["model_sha256"];
  if (!rows.is_array() || !hashes.is_array() || !model_hashes.is_array() || rows.size() != hashes.size() ||
      rows.size() != model_hashes.size() || !stored["parameters"].is_number_integer() ||
      stored["parameters"].get<Index>() < 1)
    refuse(
        "lacks its \"candidates\", \"row_hashes\" and \"model_sha256\" (one each per candidate) or its "
        "\"parameters\" (a positive count)");
  if (!std::filesystem::exists(npy_file))
    refuse("lists " + std::to_string(rows.size()) + " shadow models, and '" + npy_file +
           "', which holds them, is missing");
  // Sizes before anything is read or hashed: a regular file (a link to /dev/zero was hashed for
  // ever) no larger than the array the JSON records, with its header, and within max_memory.
  std::error_code error;
  if (!std::filesystem::is_regular_file(npy_file, error))
    refuse("lists its shadow models in '" + npy_file +
           "', which is not a regular file (a device, a FIFO or a directory)");
  const auto npy_bytes = std::filesystem::file_size(npy_file, error);
  const double expected =
      static_cast<double>(rows.size()) * static_cast<double>(stored["parameters"].get<Index>()) * 8.0;
  if (error || static_cast<double>(npy_bytes) > expected + 65536.0 || npy_bytes > max_memory.bytes)
    refuse("records " + std::to_string(rows.size()) + " shadow models, and '" + npy_file + "' holds " +
           std::to_string(npy_bytes) + " bytes, more than their " +
           std::to_string(static_cast<std::uint64_t>(expected)) +
           " bytes and an npy header (or than --max-memory): remove both to train the models again");
  if (file_sha256_hex(npy_file) != stored.value("npy_sha256", ""))
    refuse("and '" + npy_file +
           "' do not belong together (the .npy's SHA-256 is not the one recorded): a save was "
           "interrupted between the two files, or one was replaced; remove both to train the models again");
  const NpyArray array = read_npy(npy_file, max_memory);
  const Index count = static_cast<Index>(rows.size()), p = stored["parameters"].get<Index>();
  if (array.shape.size() != 2 || array.shape[0] != count || array.shape[1] != p)
    refuse("records " + std::to_string(count) + " shadow models of " + std::to_string(p) + " parameters, and '" +
           npy_file + "' does not hold a " + std::to_string(count) + " x " + std::to_string(p) + " array");
  parameter_count_ = p;
  Index previous = -1;
  for (Index r = 0; r < count; ++r) {
    const nlohmann::json& c = rows[static_cast<std::size_t>(r)];
    const nlohmann::json& h = hashes[static_cast<std::size_t>(r)];
    if (!c.is_number_integer() || c.get<Index>() <= previous || !h.is_string())
      refuse("\"candidates\"[" + std::to_string(r) + "] = " + c.dump() +
             ": expected increasing candidate indices, each with its row's hash as a string");
    const Index candidate = c.get<Index>();
    previous = candidate;
    if (candidate < candidates.n() && hex(row_hash(candidates, candidate)) != h.get<std::string>())
      refuse(
          "holds a shadow model of candidate " + std::to_string(candidate) +
          " trained on another example than this attack's candidate " + std::to_string(candidate) +
          " (its row's hash differs): the data or its preprocessing changed; give --shadow-models another directory");
    const VectorXd parameters = Eigen::Map<const VectorXd>(array.values.data() + r * p, p);
    const nlohmann::json& model_hash = model_hashes[static_cast<std::size_t>(r)];
    if (!model_hash.is_string() ||
        model_sha256(candidate, h.get<std::string>(), parameters) != model_hash.get<std::string>())
      refuse("records candidate " + std::to_string(candidate) + "'s shadow model as row " + std::to_string(r) +
             " of '" + npy_file + "', and that row is another model (its SHA-256 is not model_sha256[" +
             std::to_string(r) + "]): rows were reordered or replaced; remove both files to train the models again");
    models_[candidate] = parameters;
    row_hashes_[candidate] = h.get<std::string>();
  }
  loaded_ = count;
}

std::optional<VectorXd> ShadowModelStore::find(Index candidate) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = models_.find(candidate);
  if (found == models_.end()) return std::nullopt;
  return found->second;
}

void ShadowModelStore::add(Index candidate, const VectorXd& parameters) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (parameter_count_ < 0) parameter_count_ = parameters.size();
  if (parameters.size() != parameter_count_)
    throw DataError("shadow-model store '" + json_path() + "': candidate " + std::to_string(candidate) + " has " +
                    std::to_string(parameters.size()) + " parameters, the stored models " +
                    std::to_string(parameter_count_));
  models_[candidate] = parameters;
  row_hashes_[candidate] = hex(row_hash(*candidates_, candidate));
  changed_ = true;
  const auto age = std::chrono::steady_clock::now() - last_save_;
  if (age >= kSaveInterval && age >= 20 * save_duration_) save_locked();
}

void ShadowModelStore::save() {
  const std::lock_guard<std::mutex> lock(mutex_);
  save_locked();
}

void ShadowModelStore::save_locked() {
  if (!changed_) return;
  const auto start = std::chrono::steady_clock::now();
  RowMatrix parameters(static_cast<Index>(models_.size()), parameter_count_);
  nlohmann::json rows = nlohmann::json::array(), hashes = nlohmann::json::array(),
                 model_hashes = nlohmann::json::array();
  Index r = 0;
  for (const auto& [candidate, w] : models_) {
    parameters.row(r++) = w.transpose();
    rows.push_back(candidate);
    hashes.push_back(row_hashes_.at(candidate));
    model_hashes.push_back(model_sha256(candidate, row_hashes_.at(candidate), w));
  }
  std::string npy = npy_bytes(parameters);
  const nlohmann::json json = {{"format", kFormat},
                               {"about",
                                "row r of the .npy (float64) holds the parameters of the shadow model trained "
                                "on D_fixed and candidate candidates[r], whose row hashes to row_hashes[r]; "
                                "model_sha256[r] is the SHA-256 of \"<candidates[r]> <row_hashes[r]> \" "
                                "followed by row r's 8-byte little-endian doubles"},
                               {"fingerprint", fingerprint_},
                               {"parameters", parameter_count_},
                               {"candidates", rows},
                               {"row_hashes", hashes},
                               {"model_sha256", model_hashes},
                               {"npy_sha256", sha256_hex(npy)},
                               {"filkit_version", version()},
                               {"filkit_build", build()}};
  // The .npy first: a save stopped between the two renames leaves a JSON whose recorded SHA-256
  // names the other .npy, which opening the store reports.
  write_output_files({{npy_path(), std::move(npy)}, {json_path(), json.dump(1) + "\n"}});
  changed_ = false;
  last_save_ = std::chrono::steady_clock::now();
  save_duration_ = last_save_ - start;
}

}  // namespace filkit
