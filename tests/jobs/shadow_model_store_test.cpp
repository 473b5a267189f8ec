// The learned attack's shadow-model store (src/jobs/shadow_model_store.hpp) on its own: what it
// keeps, and the files it refuses, each with the file and the reason.
#include "jobs/shadow_model_store.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/data/npy.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace filkit {
namespace {

constexpr ByteSize kMemory{std::uint64_t{1} << 26};

/// Saves a store of three candidates' models in `dir`; returns its .npy's path.
std::string save_store(const testing::TempDir& dir, const Dataset& candidates) {
  ShadowModelStore store(dir.file(""), "sgd", {{"seed", 5}}, candidates, kMemory);
  for (Index candidate = 0; candidate < 3; ++candidate)
    store.add(candidate, testing::normal_vector(4, 10 + static_cast<unsigned>(candidate)));
  store.save();
  return store.npy_path();
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }
void write_json(const std::string& path, const nlohmann::json& json) { std::ofstream(path) << json.dump(1); }

TEST(ShadowModelStore, ReopensWithEveryModelItsCandidateAndNothingElse) {
  const testing::TempDir dir;
  const Dataset candidates = testing::random_classification(5, 3, 2, 1);
  save_store(dir, candidates);
  const ShadowModelStore reopened(dir.file(""), "sgd", {{"seed", 5}}, candidates, kMemory);
  EXPECT_EQ(reopened.loaded(), 3);
  for (Index candidate = 0; candidate < 3; ++candidate) {
    ASSERT_TRUE(reopened.find(candidate).has_value());
    EXPECT_EQ(*reopened.find(candidate), testing::normal_vector(4, 10 + static_cast<unsigned>(candidate)));
  }
  EXPECT_FALSE(reopened.find(3).has_value());
}

// Issue 50: rows of the .npy permuted, and the JSON's SHA-256 of the .npy updated to match, were
// loaded and paired every shadow model with another candidate.
TEST(ShadowModelStore, RefusesRowsMovedToAnotherCandidateEvenWithTheFileHashUpdated) {
  const testing::TempDir dir;
  const Dataset candidates = testing::random_classification(5, 3, 2, 1);
  const std::string npy = save_store(dir, candidates), json_file = dir.file("sgd.json");
  NpyArray array = read_npy(npy);
  ASSERT_EQ(array.shape, (std::vector<Index>{3, 4}));
  RowMatrix rows = Eigen::Map<const RowMatrix>(array.values.data(), 3, 4);
  rows.row(0).swap(rows.row(1));
  const std::string bytes = npy_bytes(rows);
  std::ofstream(npy, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  nlohmann::json json = read_json(json_file);
  json["npy_sha256"] = file_sha256_hex(npy);
  write_json(json_file, json);
  EXPECT_THROW_NAMING(ShadowModelStore(dir.file(""), "sgd", {{"seed", 5}}, candidates, kMemory), DataError,
                      "sgd.json' records candidate 0's shadow model as row 0", "that row is another model",
                      "model_sha256[0]", "reordered or replaced");
}

TEST(ShadowModelStore, RefusesAStoreOfTheEarlierFormatAndMissingOrMalformedHashes) {
  const testing::TempDir dir;
  const Dataset candidates = testing::random_classification(5, 3, 2, 1);
  save_store(dir, candidates);
  const std::string json_file = dir.file("sgd.json");
  const nlohmann::json saved = read_json(json_file);
  const auto refused_with = [&](const nlohmann::json& json, const std::string& expected,
                                const std::string& also = "sgd.json' ") {
    write_json(json_file, json);
    EXPECT_THROW_NAMING(ShadowModelStore(dir.file(""), "sgd", {{"seed", 5}}, candidates, kMemory), DataError,
                        "sgd.json' ", expected, also);
  };
  nlohmann::json earlier = saved;
  earlier["format"] = ShadowModelStore::kFormatWithoutModelHashes;
  earlier.erase("model_sha256");
  refused_with(earlier, "written by an earlier filkit");
  nlohmann::json unhashed = saved;
  unhashed.erase("model_sha256");
  refused_with(unhashed, "\"model_sha256\" (one each per candidate)");
  nlohmann::json short_list = saved;
  short_list["model_sha256"].erase(2);
  refused_with(short_list, "\"model_sha256\" (one each per candidate)");
  nlohmann::json not_text = saved;
  not_text["model_sha256"][1] = 7;
  refused_with(not_text, "as row 1", "another model");
  nlohmann::json no_parameters = saved;
  no_parameters["parameters"] = 0;
  refused_with(no_parameters, "\"parameters\" (a positive count)");
  nlohmann::json formatless = saved;
  formatless["format"] = 2;
  refused_with(formatless, "is not a shadow-model store");
}

// A model whose candidate's data row changed is refused as before, by the data row's hash, whose
// message says the data changed (not that rows were reordered).
TEST(ShadowModelStore, RefusesAModelOfAnotherDataRowNamingTheData) {
  const testing::TempDir dir;
  Dataset candidates = testing::random_classification(5, 3, 2, 1);
  save_store(dir, candidates);
  candidates.X(1, 0) += 1.0;
  EXPECT_THROW_NAMING(ShadowModelStore(dir.file(""), "sgd", {{"seed", 5}}, candidates, kMemory), DataError,
                      "candidate 1 trained on another example", "the data or its preprocessing changed");
}

}  // namespace
}  // namespace filkit
