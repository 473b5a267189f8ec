// The floating-point precision of a computation: float64 for every measurement, float32 where a
// user asks for what the thesis' jax code computes by default (docs/mathematics.md, section 11,
// "float32"). Which computations follow which option: DpSgdOptions::precision (training, releases
// and their Jacobian products) and the gradient model's own two (networks/gradient_model.hpp).
#pragma once

#include "filkit/base/enum_names.hpp"

#include <utility>

namespace filkit {

enum class Precision {
  kFloat64,  ///< double, as every measurement
  kFloat32,  ///< single, as jax computes by default
};
template <>
struct EnumNames<Precision> {
  static constexpr const char* what = "precision";
  static constexpr std::pair<Precision, const char*> names[] = {{Precision::kFloat64, "float64"},
                                                                {Precision::kFloat32, "float32"}};
};

}  // namespace filkit
