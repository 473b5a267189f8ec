// The learned attack's shadow models kept on disk (`filkit learned-attack --shadow-models DIR`), so
// that an attack of thousands of shadow models resumes where it was stopped, grows to more shadow
// models, or fits another attacker without training them again. Per method, two files:
//   DIR/<method>.npy   the parameters, one row (float64) per stored shadow model: numpy.load reads it;
//   DIR/<method>.json  which candidate each row is, the hash of each candidate's row, the SHA-256 of
//                      each row's parameters with its candidate (a reordered .npy is refused), the settings
//                      that decide a shadow model (the fingerprint), the .npy's SHA-256 and the
//                      filkit version that wrote them (for the record).
// Shadow model i depends only on D_fixed, candidate i, the public part, the training settings and
// (seed, i) (learned_reconstruction.hpp, ShadowTrainer); neither the attacker's settings nor the
// number of shadow models enter, so any attack with the same training reuses every model it needs.
#pragma once

#include "filkit/base/resources.hpp"
#include "filkit/data/dataset.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace filkit {

class ShadowModelStore {
 public:
  /// The store of `method` in `directory` (an existing directory). When DIR/<method>.json exists,
  /// its models are loaded, after checking that both files belong together (the .npy's SHA-256 and
  /// shape), that the store was made with `fingerprint` (else DataError naming the first setting
  /// that differs, both values, and what to do) and that every stored candidate within
  /// `candidates` has the same row (row_hash). Throws DataError naming the file otherwise; the
  /// .npy is refused beyond `max_memory` as read_npy refuses it.
  ShadowModelStore(const std::string& directory, const std::string& method, nlohmann::json fingerprint,
                   const Dataset& candidates, ByteSize max_memory);

  /// The stored parameters of candidate `candidate`, if any. Thread-safe.
  std::optional<VectorXd> find(Index candidate) const;
  /// Stores candidate `candidate`'s newly trained parameters, and saves the store when the last
  /// save is more than `kSaveInterval` (and 20 times its own duration) old. Thread-safe.
  void add(Index candidate, const VectorXd& parameters);
  /// Writes both files as a set (write_output_files: each replaced whole, never half written).
  /// Thread-safe.
  void save();

  Index loaded() const { return loaded_; }  ///< models found when the store was opened
  std::string npy_path() const { return base_ + ".npy"; }
  std::string json_path() const { return base_ + ".json"; }

  /// The SHA-256 (hex) recorded for a stored model: of "<candidate> <row_hash> " and the
  /// parameters' bytes, so that a row moved to another candidate's place is refused.
  static std::string model_sha256(Index candidate, const std::string& row_hash, const VectorXd& parameters);

  static constexpr std::chrono::seconds kSaveInterval{30};
  static constexpr const char* kFormat = "filkit shadow models 2";
  static constexpr const char* kFormatWithoutModelHashes = "filkit shadow models 1";

 private:
  void save_locked();

  std::string base_;  // DIR/<method>
  nlohmann::json fingerprint_;
  const Dataset* candidates_;
  Index parameter_count_ = -1;               // -1 until a model is stored
  std::map<Index, VectorXd> models_;         // by candidate
  std::map<Index, std::string> row_hashes_;  // by candidate, as stored (hex)
  Index loaded_ = 0;
  bool changed_ = false;
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point last_save_ = std::chrono::steady_clock::now();
  std::chrono::duration<double> save_duration_{0};
};

}  // namespace filkit
