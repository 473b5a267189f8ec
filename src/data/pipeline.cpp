#include "filkit/data/pipeline.hpp"

namespace filkit {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

PreparedData load_and_preprocess(const DataOptions& data, const PreprocessOptions& preprocessing) {
  PreparedData prepared;
  auto start = std::chrono::steady_clock::now();
  const DatasetSplit raw = load_dataset(data);
  prepared.seconds["load"] = seconds_since(start);
  start = std::chrono::steady_clock::now();
  prepared.data = preprocess(raw, preprocessing, &prepared.preprocessor);
  prepared.seconds["preprocess"] = seconds_since(start);
  return prepared;
}

}  // namespace filkit
