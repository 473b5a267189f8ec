// The attribute-inference job behind `filkit attack`: load -> preprocess -> fit -> attacks on
// output-perturbed releases (leakage/attribute_inference.hpp; docs/mathematics.md, section 5) ->
// accuracy by sigma and by FIL group.
#pragma once

#include "filkit/jobs/job.hpp"
#include "filkit/jobs/task.hpp"
#include "filkit/leakage/attribute_inference.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

struct AttackJobOptions {
  /// Tabular data by default: no row scaling, the model by the task.
  TaskOptions task{.data = {.row_scaling = RowScaling::kNone}, .model = std::nullopt};
  /// The categorical attribute to infer (a name of the column map, or its one-hot columns 3,4,5);
  /// empty = the built-in dataset's sensitive attribute.
  std::string attribute;
  AttackOptions attack;
  /// CSV of training example weights (e.g. irfil's --out or --history-out); empty = unweighted.
  std::string weights;
  std::string weights_column = "weight";
  std::uint64_t seed = 0;
  void validate() const;
};

template <class Visit>
void visit_fields(AttackJobOptions& o, Visit&& visit) {
  visit_fields(o.task, visit);
  visit("attribute", o.attribute,
        "The categorical attribute to infer (a name of the column map, or its one-hot columns 3,4,5); default: the "
        "built-in dataset's sensitive attribute");
  visit_fields(o.attack, visit);
  visit("weights", o.weights, "CSV of training example weights (e.g. filkit irfil --out or --history-out)");
  visit("weights_column", o.weights_column, "Column of weights to use");
  visit("seed", o.seed, "Seed of every random choice: the noise draws, the attacked subset, any split");
}

struct AttackJobResult final : JobResult {
  AttackJobOptions options;  ///< as run, autos resolved (attribute filled in)
  Task task;
  AttackResult attack;
  nlohmann::json to_json() const override;
  /// By sigma and eta group (-1 = all): eta, prior, white-box and black-box accuracy, release MSE.
  NumericTable table() const override;
  /// "examples_out": per attacked example.
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
};

AttackJobResult run_attack(const AttackJobOptions& options, bool progress = false);

struct AttackJob {
  using Options = AttackJobOptions;
  static constexpr const char* name = "attack";
  static constexpr const char* description =
      "Attribute inference against output-perturbed releases w' = w* + N(0, sigma^2 I): prior, black-box "
      "(Fredrikson et al. 2014) and white-box (the FIL threat model), by sigma and by decile of attribute FIL. "
      "E.g. --data income-regression --intercept --sigmas 1e-3,1e-2.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the FIL paper's attribute inference (Hannun et al. 2021)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"pca", "PCA 20 for the built-in images, as the FIL paper"}};
  }
  static constexpr const char* out_help =
      "CSV by sigma and eta group (-1 = all): eta, prior, white-box and black-box accuracy, release MSE";
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"examples_out",
             "Per-example CSV: index, level, group, sigma, eta, nearest_shift (white-box margin), prior_correct, "
             "white/black-box accuracy"}};
  }
  static constexpr bool runs_on_mpi_ranks = true;  // sharded (docs/distributed.md)
  static AttackJobResult run(const Options& options, bool progress) { return run_attack(options, progress); }
};

}  // namespace filkit
