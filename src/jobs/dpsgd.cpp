#include "filkit/jobs/dpsgd.hpp"

#include "filkit/data/pipeline.hpp"

namespace filkit {

void DpSgdJobOptions::validate() const {
  data.validate();
  preprocess.validate();
  dpsgd.validate();
}

DpSgdJobResult run_dpsgd_job(const DpSgdJobOptions& options) {
  options.validate();
  DpSgdJobResult result;
  PreparedData prepared = load_and_preprocess(options.data, options.preprocess);
  result.data = std::move(prepared.data);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
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
  json["settings"]["train_size"] = options.data.train_size;
  json["settings"]["test_size"] = options.data.test_size;
  json["settings"]["data_seed"] = options.data.seed;
  json["settings"]["preprocessing"] = preprocessor.to_json();
  json["seconds"] = seconds;
  return json;
}

}  // namespace filkit
