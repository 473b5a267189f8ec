// The sensitive attribute of an attribute-inference attack (docs/mathematics.md, section 5): a
// categorical attribute is a one-hot block of X whose dropped level is all zeros; its candidate
// levels are the patterns that block can take, with each training example's true level and the
// levels' shares of the training set (the prior adversary's knowledge).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"

#include <string>
#include <vector>

namespace filkit {

/// The attribute `spec` of `data`: a name from its column map, or comma-separated column indices
/// ("3,4,5"; levels are then named after the columns, "none" for all zeros). Throws
/// std::invalid_argument for unknown names or columns outside X.
AttributeColumns find_attribute(const Dataset& data, const std::string& spec);

/// The levels of a categorical attribute as patterns of its columns, and each training
/// example's level.
struct AttributeCandidates {
  std::string name;
  std::vector<Index> columns;       ///< the attribute's columns in X
  MatrixXd patterns;                ///< K x |columns|: row k = level k (scaled one-hot; last row 0)
  std::vector<std::string> levels;  ///< K names, the dropped (all-zero) level last
  std::vector<Index> truth;         ///< each training example's level, 0..K-1 (on an MPI rank: of its rows)
  VectorXd prior;                   ///< K: share of the training set at each level (all ranks')
  Index mode = 0;                   ///< the most frequent level (ties: the first)
  Index num_levels() const { return patterns.rows(); }
};

/// Reads the candidates from the training data. Every row's block must be all zeros or one entry
/// equal to the block's common nonzero value (1, or 1/scale after global-max row scaling).
/// Throws std::invalid_argument otherwise (a numeric attribute, unit-ball scaling, PCA). On the
/// ranks of an MPI job (collective) `train` is the rank's rows: the prior and the common value are
/// of all ranks', the truth of the rank's rows.
AttributeCandidates attribute_candidates(const Dataset& train, const AttributeColumns& attribute,
                                         const Communicator& comm = Communicator::local());

}  // namespace filkit
