#include "filkit/dpsgd_job.hpp"

#include <chrono>

namespace filkit {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
}  // namespace

void DpSgdJobOptions::validate() const {
  data.validate();
  preprocess.validate();
  dpsgd.validate();
}

DpSgdJobResult run_dpsgd_job(const DpSgdJobOptions& options) {
  options.validate();
  DpSgdJobResult result;
  auto start = Clock::now();
  const DatasetSplit raw = load_dataset(options.data);
  result.seconds["load"] = seconds_since(start);
  start = Clock::now();
  result.data = preprocess(raw, options.preprocess, &result.preprocessor);
  result.seconds["preprocess"] = seconds_since(start);
  result.training = train_dpsgd(result.data.train, result.data.test, options.dpsgd, options.progress);
  for (const auto& [stage, seconds] : result.training.seconds) result.seconds[stage] = seconds;
  return result;
}

nlohmann::json DpSgdJobResult::summary(const DpSgdJobOptions& options) const {
  nlohmann::json json = training.summary(options.dpsgd);
  json["command"] = "dpsgd";
  json["n_test"] = data.test.n();
  json["d"] = data.train.d();
  json["settings"]["data"] = options.data.data;
  json["settings"]["source"] = data.train.source;
  json["settings"]["classes"] = options.data.classes;
  json["settings"]["preprocessing"] = preprocessor.to_json();
  json["seconds"] = seconds;
  return json;
}

}  // namespace filkit
