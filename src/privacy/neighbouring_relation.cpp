#include "filkit/privacy/neighbouring_relation.hpp"

#include "filkit/base/checks.hpp"

namespace filkit {

NeighbouringRelation neighbouring_relation(BatchSampling sampling) {
  return sampling == BatchSampling::kUniform ? NeighbouringRelation::kReplaceOne : NeighbouringRelation::kAddRemove;
}

BatchSampling require_accountable(BatchSampling sampling, const std::string& option) {
  if (sampling == BatchSampling::kShuffle)
    option_error(option, to_string(sampling),
                 "no accountant covers shuffled epochs; give poisson (add/remove) or uniform (replace-one)");
  return sampling;
}

std::string describe(NeighbouringRelation relation) {
  return relation == NeighbouringRelation::kAddRemove
             ? "add/remove one example (Poisson sampling)"
             : "replace one example (fixed-size batches without replacement; sensitivity 2C)";
}

}  // namespace filkit
