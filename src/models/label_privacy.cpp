#include "filkit/models/label_privacy.hpp"

#include <stdexcept>

namespace filkit {}  // namespace filkit
