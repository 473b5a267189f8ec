// Vectors to and from JSON arrays (exact when the JSON is stored as CBOR).
#pragma once

#include "filkit/base/types.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace filkit::detail {

inline VectorXd to_vector(const nlohmann::json& values) {
  const std::vector<double> v = values.get<std::vector<double>>();
  return Eigen::Map<const VectorXd>(v.data(), static_cast<Index>(v.size()));
}

inline std::vector<double> to_list(const VectorXd& v) { return std::vector<double>(v.data(), v.data() + v.size()); }

}  // namespace filkit::detail
