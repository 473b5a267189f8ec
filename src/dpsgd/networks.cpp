// The parts of networks.hpp that do not need LibTorch (the Network itself lives in src/torch/).
#include "filkit/dpsgd/networks.hpp"


#include <stdexcept>

namespace filkit {


void NetworkOptions::validate() const {
  if (architecture == NetworkArchitecture::kMlp) {
    if (hidden.empty()) throw std::invalid_argument("NetworkOptions.hidden: an mlp needs at least one hidden layer");
    for (Index width : hidden)
      if (width < 1)
        throw std::invalid_argument("NetworkOptions.hidden = " + std::to_string(width) + ": widths must be >= 1");
  }
  if (intercept && architecture != NetworkArchitecture::kSoftmax)
    throw std::invalid_argument("NetworkOptions.intercept: only the softmax network takes an intercept (the mlp "
                                "and cnn layers have biases)");
  if (chunk < 1) throw std::invalid_argument("NetworkOptions.chunk = " + std::to_string(chunk) + ": must be >= 1");
}

}  // namespace filkit
