// What the attribute-inference attacks share: they are defined for binary GLMs only.
#pragma once

#include "filkit/base/errors.hpp"
#include "filkit/models/glm.hpp"

#include <stdexcept>
#include <string>

namespace filkit::detail {

inline void require_binary_model(const Model& model, const std::string& who) {
  if (model.kind == ModelKind::kSoftmax)
    throw OptionError::with_text("model", who + ": softmax models are not supported; use least-squares or logistic");
}

}  // namespace filkit::detail
