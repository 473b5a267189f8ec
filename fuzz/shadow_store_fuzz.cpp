// The learned attack's shadow-model store (src/jobs/shadow_model_store.hpp), opened as
// `learned-attack --shadow-models DIR` opens it, against fixed candidates (4 rows of 3 features)
// and a fixed fingerprint {"seed": 5}: DIR/sgd.json and DIR/sgd.npy from the input.
// Input: a mode byte, then the JSON, a NUL, then the .npy. The mode's bits make the hashes that
// a random input would almost never match come out right, so that the fuzzer explores the checks
// behind them: bit 0, the JSON's "npy_sha256" is set to the .npy's; bit 1, each "row_hashes"[r]
// of a candidate within the 4 rows to that row's hash; bit 2, each "model_sha256"[r] to the
// model hash of row r of the .npy (where the .npy reads as a 2-D array). The fix-ups happen only
// where the JSON has the fields in the right types, and the JSON is re-written (so seeds' layout
// is not kept); with mode 0 the files are exactly the input.
#include "jobs/shadow_model_store.hpp"

#include "filkit/base/sha256.hpp"
#include "filkit/data/npy.hpp"

#include "fuzz_util.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace {

const filkit::Dataset& candidates() {
  static const filkit::Dataset data = [] {
    filkit::Dataset d;
    d.X.resize(4, 3);
    for (filkit::Index i = 0; i < 4; ++i)
      for (filkit::Index j = 0; j < 3; ++j) d.X(i, j) = 0.25 * static_cast<double>(i) - 0.5 * static_cast<double>(j);
    d.y = filkit::VectorXd::LinSpaced(4, 0.0, 1.0);
    return d;
  }();
  return data;
}

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// The JSON with the hashes the mode asks for set right, where it has their fields.
std::string fixed_up(std::string json_text, const std::string& npy, const std::string& npy_path, unsigned mode) {
  nlohmann::json json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return json_text;
  if (mode & 1) json["npy_sha256"] = filkit::sha256_hex(npy);
  const auto array_of = [&](const char* key) { return json.contains(key) && json[key].is_array(); };
  if (!array_of("candidates") || !array_of("row_hashes")) return json.dump();
  nlohmann::json& rows = json["candidates"];
  nlohmann::json& hashes = json["row_hashes"];
  for (std::size_t r = 0; r < rows.size() && r < hashes.size(); ++r)
    if ((mode & 2) && rows[r].is_number_integer() && rows[r].get<filkit::Index>() >= 0 &&
        rows[r].get<filkit::Index>() < 4)
      hashes[r] = hex(filkit::row_hash(candidates(), rows[r].get<filkit::Index>()));
  if ((mode & 4) && array_of("model_sha256")) {
    filkit::NpyArray array;
    if (!filkit::fuzz::runs_or_rejects([&] { array = filkit::read_npy(npy_path, filkit::fuzz::kFuzzMemory); }) ||
        array.shape.size() != 2)
      return json.dump();
    nlohmann::json& models = json["model_sha256"];
    const filkit::Index p = array.shape[1];
    for (std::size_t r = 0; r < rows.size() && r < hashes.size() && r < models.size(); ++r)
      if (rows[r].is_number_integer() && hashes[r].is_string() && static_cast<filkit::Index>(r) < array.shape[0])
        models[r] = filkit::ShadowModelStore::model_sha256(
            rows[r].get<filkit::Index>(), hashes[r].get<std::string>(),
            Eigen::Map<const filkit::VectorXd>(array.values.data() + static_cast<filkit::Index>(r) * p, p));
  }
  return json.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::vector<std::string_view> parts = filkit::fuzz::split(filkit::fuzz::as_text(data + 1, size - 1), '\0', 2);
  const std::string npy(parts.size() > 1 ? parts[1] : std::string_view());
  const std::string npy_path = filkit::fuzz::write_input("sgd.npy", npy);
  filkit::fuzz::write_input("sgd.json", fixed_up(std::string(parts[0]), npy, npy_path, data[0]));
  filkit::fuzz::runs_or_rejects([&] {
    const filkit::ShadowModelStore store(filkit::fuzz::scratch_dir().string(), "sgd", {{"seed", 5}}, candidates(),
                                         filkit::fuzz::kFuzzMemory);
    // What the attack takes from an opened store: each candidate's parameters, all of one size.
    filkit::Index parameters = -1, found = 0;
    for (filkit::Index candidate = 0; candidate < 64; ++candidate) {
      const std::optional<filkit::VectorXd> model = store.find(candidate);
      if (!model) continue;
      ++found;
      FILKIT_FUZZ_CHECK(parameters < 0 || model->size() == parameters);
      parameters = model->size();
      FILKIT_FUZZ_CHECK(parameters > 0);
    }
    FILKIT_FUZZ_CHECK(found <= store.loaded());
  });
  return 0;
}
