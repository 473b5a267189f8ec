// Whether a model's labels are among the private coordinates of an example: FIL (leakage/) and
// the FIL of private SGD (dpsgd/) both need it.
#pragma once

#include "filkit/base/enum_names.hpp"
#include <string>

namespace filkit {

/// Whether the labels are private coordinates (the FIL paper) or public (the reconstruction
/// papers). For softmax a private label is its one-hot vector (K coordinates).
enum class LabelPrivacy { kPrivate, kPublic };
template <>
struct EnumNames<LabelPrivacy> {
  static constexpr const char* what = "label privacy";
  static constexpr std::pair<LabelPrivacy, const char*> names[] = {{LabelPrivacy::kPrivate, "private"},
                                                                   {LabelPrivacy::kPublic, "public"}};
};

}  // namespace filkit
