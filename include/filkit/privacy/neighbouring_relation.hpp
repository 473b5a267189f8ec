// How a batch is drawn, and the neighbouring relation that fixes for the accountants
// (privacy_accountant.hpp; docs/accountants.md, "Neighbouring relations").
//
// A step adds N(0, sigma^2 C^2 I) to a sum of per-example terms clipped to L2 norm C; sigma is the
// noise multiplier. The batch sampling fixes the relation a guarantee is stated for:
//   Poisson sampling (rate q)                            <-> add/remove one example: the sum
//                                                            moves by <= C;
//   fixed-size batches without replacement (q = B / n)  <-> replace one example: the sum moves
//                                                            by <= 2C, so the Gaussian has sigma / 2
//                                                            per unit of sensitivity
//                                                            (kReplaceOneSensitivity).
// The accountants take the relation; the jobs and front ends name the batch sampling
// (`--sampling poisson|uniform`) and map it with neighbouring_relation().
#pragma once

#include "filkit/base/enum_names.hpp"

#include <string>
#include <utility>

namespace filkit {

/// How each step's batch is drawn.
enum class BatchSampling {
  kUniform,  ///< a uniformly random subset of exactly B examples (the paper's Algorithm 1)
  kPoisson,  ///< each example independently with probability q = B/n (the RDP analysis's model)
  /// epochs: a permutation of the n examples cut into batches of B (the last one short), every
  /// example once an epoch (the thesis' code). kappa and the accountants assume Poisson
  /// sampling and do not cover it (dpsgd's summary says so).
  kShuffle,
};
template <>
struct EnumNames<BatchSampling> {
  static constexpr const char* what = "batch sampling";
  static constexpr std::pair<BatchSampling, const char*> names[] = {
      {BatchSampling::kUniform, "uniform"}, {BatchSampling::kPoisson, "poisson"}, {BatchSampling::kShuffle, "shuffle"}};
};

/// Which datasets count as neighbours: the relation an (eps, delta) guarantee is stated for.
enum class NeighbouringRelation {
  kAddRemove,   ///< one example added or removed (Poisson sampling)
  kReplaceOne,  ///< one example replaced by another (fixed-size batches without replacement)
};
template <>
struct EnumNames<NeighbouringRelation> {
  static constexpr const char* what = "neighbouring relation";
  static constexpr std::pair<NeighbouringRelation, const char*> names[] = {
      {NeighbouringRelation::kAddRemove, "add-remove"}, {NeighbouringRelation::kReplaceOne, "replace-one"}};
};

/// Sensitivity of the clipped sum under replace-one, in units of the clipping norm C.
inline constexpr double kReplaceOneSensitivity = 2.0;

/// The relation the accountants state a sampler's guarantee under: poisson -> add/remove,
/// uniform -> replace-one; shuffle -> add/remove (accounted as Poisson sampling at rate B/n,
/// which does not cover it).
NeighbouringRelation neighbouring_relation(BatchSampling sampling);

/// The batch sampling an accountant can cover, else (shuffle) an OptionError naming `option` with
/// the value and the rule: for the accountant job's --sampling and the front ends' accountants.
BatchSampling require_accountable(BatchSampling sampling, const std::string& option = "sampling");

/// "add/remove one example (Poisson sampling)" or "replace one example (...)": for summaries.
std::string describe(NeighbouringRelation relation);

}  // namespace filkit
