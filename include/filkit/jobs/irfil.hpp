// The IRFIL job behind `filkit irfil`: load -> preprocess -> IRFIL (leakage/irfil.hpp: refit with
// per-example weights inversely proportional to each example's FIL until every example leaks
// alike; docs/mathematics.md, section 4) -> weights and FIL before and after.
#pragma once

#include "filkit/jobs/job.hpp"
#include "filkit/jobs/task.hpp"
#include "filkit/leakage/irfil.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

struct IrfilJobOptions {
  /// Tabular data by default: no row scaling, the model by the task.
  TaskOptions task{.data = {.row_scaling = RowScaling::kNone}, .model = std::nullopt};
  IrfilOptions irfil;
  /// Drive the update by the FIL of this attribute (a name of the column map, or columns 3,4,5)
  /// instead of the whole example; empty = the whole example.
  std::string attribute;
  std::uint64_t seed = 0;
  void validate() const;
};

template <class Visit>
void visit_fields(IrfilJobOptions& o, Visit&& visit) {
  visit_fields(o.task, visit);
  visit_fields(o.irfil, visit);
  visit("attribute", o.attribute,
        "Drive the update by the FIL of this attribute (a name of the column map, or columns 3,4,5) instead of the "
        "whole example");
  visit("seed", o.seed, "Seed of every random choice (any train/test split)");
}

struct IrfilJobResult final : JobResult {
  IrfilJobOptions options;  ///< as run, autos resolved
  Task task;                ///< on several MPI ranks: this rank's shard
  IrfilResult irfil;
  VectorXd labels;  ///< the training labels, in the order of the tables (all of them at rank 0)
  nlohmann::json to_json() const override;
  /// index, label, weight (final), eta_before, eta_after.
  NumericTable table() const override;
  /// "history_out": the training weights of every iteration.
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
};

IrfilJobResult run_irfil(const IrfilJobOptions& options, bool progress = false);

struct IrfilJob {
  using Options = IrfilJobOptions;
  static constexpr const char* name = "irfil";
  static constexpr bool runs_on_mpi_ranks = true;  // sharded (docs/distributed.md)
  static constexpr const char* description =
      "Iteratively reweighted FIL (Algorithm 1 of the FIL paper): refit with per-example weights inversely "
      "proportional to each example's FIL until every example leaks alike. E.g. --data income-regression "
      "--attribute MARITAL.STATUS --intercept.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the FIL paper's IRFIL experiments (Hannun et al. 2021)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"label", "the FIL paper counts the label among an example's coordinates"},
            {"pca", "PCA 20 for the built-in images, as the FIL paper"}};
  }
  static constexpr const char* out_help = "Per-example CSV: index, label, weight (final), eta_before, eta_after";
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"history_out", "CSV of the training weights of every iteration: index, label, iteration_0..iteration_T"}};
  }
  static IrfilJobResult run(const Options& options, bool progress) { return run_irfil(options, progress); }
};

}  // namespace filkit
