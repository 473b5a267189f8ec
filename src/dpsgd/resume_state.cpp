#include "dpsgd/resume_state.hpp"

#include "filkit/base/io.hpp"

#include "dpsgd/vector_json.hpp"

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace filkit::detail {

nlohmann::json job_fingerprint(const Dataset& train, const Dataset& test, const DpSgdOptions& options) {
  nlohmann::json settings = to_json(options);
  for (const char* key : {"checkpoint_path", "checkpoint_every", "stop_after"}) settings.erase(key);
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a over the bytes of X and y
  auto mix = [&hash](const double* data, Index count) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < sizeof(double) * static_cast<std::size_t>(count); ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  };
  for (const Dataset* data : {&train, &test}) {
    mix(data->X.data(), data->X.size());
    mix(data->y.data(), data->y.size());
  }
  return {{"settings", settings}, {"train", {train.n(), train.d()}}, {"test", {test.n(), test.d()}},
          {"data_hash", std::to_string(hash)}};
}

void save_state(const std::string& path, const nlohmann::json& fingerprint, const ResumeState& state) {
  nlohmann::json sums = nlohmann::json::array(), parameters = nlohmann::json::array();
  for (const SnapshotSums& c : state.sums)
    sums.push_back({to_list(c.trace), to_list(c.trace_squares), to_list(c.spectral), to_list(c.sampled)});
  for (const VectorXd& w : state.parameters) parameters.push_back(to_list(w));
  const nlohmann::json json = {{"format", "filkit-dpsgd-state"},
                               {"version", 1},
                               {"job", fingerprint},
                               {"run", state.run},
                               {"step", state.step},
                               {"trainer", state.trainer},
                               {"sums", sums},
                               {"train_accuracy", state.train_accuracy},
                               {"test_accuracy", state.test_accuracy},
                               {"run_seeds", state.run_seeds},
                               {"parameters", parameters},
                               {"training_seconds", state.training_seconds},
                               {"evaluation_seconds", state.evaluation_seconds}};
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(json);  // exact doubles, compact
  write_output_file(path, std::string(bytes.begin(), bytes.end()));
}

std::optional<ResumeState> load_state(const std::string& path, const nlohmann::json& fingerprint) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json json;
  try {
    json = nlohmann::json::from_cbor(bytes);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("checkpoint " + path + ": not a filkit DP-SGD state file (" + e.what() +
                             "); delete it or choose another path");
  }
  if (json.value("format", "") != "filkit-dpsgd-state")
    throw std::runtime_error("checkpoint " + path + ": not a filkit DP-SGD state file; delete it or choose another path");
  const nlohmann::json& saved = json.at("job");
  if (saved != fingerprint) {
    std::string difference = "the data differ";
    for (const auto& [key, value] : fingerprint.at("settings").items())
      if (!saved.at("settings").contains(key) || saved.at("settings").at(key) != value) {
        difference = "setting '" + key + "' was " + saved.at("settings").value(key, nlohmann::json()).dump() +
                     ", now " + value.dump();
        break;
      }
    throw std::runtime_error("checkpoint " + path + " belongs to a different job (" + difference +
                             "): delete it to start afresh, or choose another path");
  }
  ResumeState state;
  state.run = json.at("run").get<int>();
  state.step = json.at("step").get<Index>();
  state.trainer = json.at("trainer");
  for (const auto& c : json.at("sums"))
    state.sums.push_back({to_vector(c.at(0)), to_vector(c.at(1)), to_vector(c.at(2)), to_vector(c.at(3))});
  state.train_accuracy = json.at("train_accuracy").get<std::vector<std::vector<double>>>();
  state.test_accuracy = json.at("test_accuracy").get<std::vector<std::vector<double>>>();
  state.run_seeds = json.at("run_seeds").get<std::vector<std::uint64_t>>();
  for (const auto& w : json.at("parameters")) state.parameters.push_back(to_vector(w));
  state.training_seconds = json.at("training_seconds").get<double>();
  state.evaluation_seconds = json.at("evaluation_seconds").get<double>();
  return state;
}

}  // namespace filkit::detail
