// Whether a model's labels are among the private coordinates of an example: FIL (leakage/) and
// the FIL of private SGD (dpsgd/) both need it.
#pragma once

#include <string>

namespace filkit {

/// Whether the labels are private coordinates (the FIL paper) or public (the reconstruction
/// papers). For softmax a private label is its one-hot vector (K coordinates).
enum class LabelPrivacy { kPrivate, kPublic };
std::string to_string(LabelPrivacy label);                        // "private", "public"
LabelPrivacy label_privacy_from_string(const std::string& name);  // throws std::invalid_argument

}  // namespace filkit
