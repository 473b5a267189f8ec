#include "filkit/models/label_privacy.hpp"

#include <stdexcept>

namespace filkit {

std::string to_string(LabelPrivacy label) { return label == LabelPrivacy::kPrivate ? "private" : "public"; }

LabelPrivacy label_privacy_from_string(const std::string& name) {
  if (name == "private") return LabelPrivacy::kPrivate;
  if (name == "public") return LabelPrivacy::kPublic;
  throw std::invalid_argument("unknown label privacy '" + name + "': expected private or public");
}

}  // namespace filkit
