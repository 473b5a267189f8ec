// The DP-SGD job behind `filkit dpsgd`: load -> preprocess -> train privately with FIL accounting
// (dpsgd/training.hpp; docs/mathematics.md, section 7) -> per-example table and summary.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/data/pipeline.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/jobs/job.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// What is trained: a GLM (G in closed form, or the softmax network through LibTorch) or a network.
enum class ModelChoice { kLogistic, kSoftmax, kMlp, kCnn, kCifarCnn, kCustom };
template <>
struct EnumNames<ModelChoice> {
  static constexpr const char* what = "model";
  static constexpr std::pair<ModelChoice, const char*> names[] = {
      {ModelChoice::kLogistic, "logistic"}, {ModelChoice::kSoftmax, "softmax"},    {ModelChoice::kMlp, "mlp"},
      {ModelChoice::kCnn, "cnn"},           {ModelChoice::kCifarCnn, "cifar-cnn"}, {ModelChoice::kCustom, "custom"}};
};

/// Whether the choice is a network (mlp, cnn, cifar-cnn, custom), trained through LibTorch only.
bool is_network(ModelChoice model);
/// The LibTorch architecture of a choice: softmax is the softmax network; logistic has none
/// (std::logic_error: the softmax network with 2 classes is its counterpart).
NetworkArchitecture network_architecture(ModelChoice model);

/// How G = d g~ / dx is differentiated.
enum class DpSgdEngine { kAuto, kClosedForm, kTorch };
template <>
struct EnumNames<DpSgdEngine> {
  static constexpr const char* what = "engine";
  static constexpr std::pair<DpSgdEngine, const char*> names[] = {
      {DpSgdEngine::kAuto, "auto"}, {DpSgdEngine::kClosedForm, "closed-form"}, {DpSgdEngine::kTorch, "torch"}};
};

struct DpSgdJobOptions {
  /// MNIST pixels / 255, no PCA, no row scaling; classes auto = 0,1 for the GLMs, all for networks.
  DataPipelineOptions data{.data = "mnist", .pca = 0, .row_scaling = RowScaling::kNone};
  ModelChoice model = ModelChoice::kLogistic;
  /// auto = closed-form for logistic and softmax, torch for mlp and cnn.
  DpSgdEngine engine = DpSgdEngine::kAuto;
  /// mlp: hidden widths; networks: examples differentiated together (architecture from `model`).
  NetworkOptions network;
  DpSgdOptions dpsgd;
  /// The runs apart (a Slurm array, ranks of their own): with `run` K, only run K of dpsgd.runs is
  /// trained, bit for bit as the whole call trains it, into run_file(K) in `run_dir`, and no other
  /// output is written; with `run_dir` and no `run`, the call's R runs are read from there and
  /// combined into its outputs without training (train_dpsgd_run, combine_dpsgd_run_files).
  std::optional<int> run;
  std::string run_dir;

  /// The training options: model and engine resolved into dpsgd.kind / dpsgd.network, autos filled.
  DpSgdOptions training_options() const;
  /// Fills in every auto (classes, estimators) with the value it stands for.
  void resolve();
  void validate() const;
};

/// The networks' starting weights: one declaration for every job that trains a network.
template <class Visit>
void visit_network_init_field(NetworkOptions& network, Visit&& visit) {
  visit("network_init", network.initialisation,
        "Networks but softmax: the layers' starting weights, pytorch (PyTorch's defaults) or jax (jax stax's: "
        "Glorot-normal weights, biases N(0, 1e-2^2) dense and N(0, 1e-6^2) conv, as the thesis' code)");
}

/// What is trained and how it is differentiated: the job's and filkit.train_dpsgd's options.
template <class Visit>
void visit_model_fields(DpSgdJobOptions& o, Visit&& visit) {
  visit("model", o.model,
        "logistic or softmax (GLMs, G in closed form); through LibTorch: mlp (tanh), cnn (the paper's MNIST ConvNet), "
        "cifar-cnn (its CIFAR-10 ConvNet) or custom (arch or torchscript); networks use every class unless classes "
        "says otherwise");
  visit("engine", o.engine,
        "How G = d g~/dx is differentiated: closed-form (GLMs), torch (LibTorch autodiff; softmax and the networks), "
        "auto");
  visit("hidden", o.network.hidden, "mlp: hidden layer widths");
  visit(
      "arch", o.network.layers,
      "custom: layers, e.g. conv:16:8:2:2,tanh,avgpool:2:1,conv:32:4:2,tanh,avgpool:2:1,flatten,dense:32,tanh,dense:10 "
      "(dense:OUT[:nobias], conv:OUT:K[:STRIDE[:PAD]], avgpool:K[:STRIDE[:PAD]], flatten, tanh, sigmoid, "
      "softplus[:BETA], gelu[:tanh], elu[:ALPHA], selu)");
  visit("torchscript", o.network.torchscript,
        "custom: a TorchScript file (torch.jit.save of a chain of supported layers; its weights start the training)");
  visit_network_init_field(o.network, visit);
  visit("chunk", o.network.chunk, "Networks: examples differentiated together (memory vs speed)");
}

template <class Visit>
void visit_fields(DpSgdJobOptions& o, Visit&& visit) {
  visit_fields(o.data, visit);
  visit_model_fields(o, visit);
  visit_fields(o.dpsgd, visit);
  visit("run", o.run,
        "Train only run K (0 .. runs - 1) of the runs, as the whole call trains it, into run_dir (no other outputs); "
        "auto = every run");
  visit("run_dir", o.run_dir,
        "Directory of the run files (run<K>.fkrun): run writes its run there; without run, the runs' files there are "
        "combined into the call's outputs (the same as training every run here but for timings), nothing trained");
}

/// The file of run `run` in a run_dir: run<run>.fkrun.
std::string run_file(const std::string& run_dir, int run);

struct DpSgdJobResult final : JobResult {
  DpSgdJobOptions options;  ///< as run, autos resolved
  DatasetSplit data;        ///< after preprocessing
  Preprocessor preprocessor;
  DpSgdResult training;
  Index n_test = 0;                       ///< test examples over all MPI ranks
  VectorXd labels;                        ///< the training labels of all n examples (gathered at rank 0)
  std::map<std::string, double> seconds;  ///< "load", "preprocess", and training's stages
  std::string torchscript_sha256;         ///< of the TorchScript file, when one is the network (in the settings)
  std::string run_file;                   ///< with options.run: the run file written
  nlohmann::json to_json() const override;
  /// One row per (snapshot, example); empty when the run stopped early to resume later.
  NumericTable table() const override;
  /// models_out: one row per run, the final parameters (kModelParameterLayout).
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
  bool complete() const override { return training.complete; }
  /// Removes the resume file (DpSgdOptions.checkpoint_path): kept by run_dpsgd until every output
  /// is written, so that a failed write can be redone by resuming.
  void outputs_written() const override;
};

/// The most snapshots epoch_snapshots chooses (each a copy of every example's traces per run).
inline constexpr Index kMaxEpochSnapshots = 50;
/// The snapshot schedule of a run with a report and no report_epochs, in epochs: every epoch of T
/// steps of B of n examples (every k-th when there are more than kMaxEpochSnapshots), or tenths of
/// the run when it is shorter than two epochs, so that the report's figures over the snapshots
/// have more than one point.
std::vector<double> epoch_snapshots(Index n, Index batch_size, Index steps);

/// Loads, preprocesses and trains. A finished run keeps its resume file (CheckpointWhenDone::kKeep):
/// DpSgdJobResult::outputs_written removes it once the outputs are safe. With `report` (the
/// outputs ask for a report) and no report_epochs, the run snapshots as epoch_snapshots says (the
/// summary's settings record the epochs).
DpSgdJobResult run_dpsgd(const DpSgdJobOptions& options, bool progress = false, bool report = false);

struct DpSgdJob {
  using Options = DpSgdJobOptions;
  static constexpr const char* name = "dpsgd";
  static constexpr const char* description =
      "Private SGD (DP-SGD with GELU-smoothed clipping) with per-example Fisher information accounting (Guo et al. "
      "2022, Algorithm 1): dFIL and eta of every training example, beside the RDP accountant's (eps, delta). "
      "Without options: MNIST 0 vs 1, logistic regression, B = 600, T = 1000, rho = 0.1, C = 1, noise multiplier 1.";
  /// Why defaults differ from other commands' (shown in --help where they do).
  static constexpr const char* defaults_reason = "defaults of the reconstruction paper's DP-SGD (Guo et al. 2022)";
  static std::vector<DefaultReason> default_reasons() {
    return {{"label", "the reconstruction paper bounds the reconstruction of the features"},
            {"pca", "DP-SGD trains on the raw pixels an attacker reconstructs (Guo et al. 2022)"},
            {"rdp_delta", "the usual delta of DP-SGD, below 1/n (Opacus' and TF Privacy's examples)"}};
  }
  static constexpr const char* out_help =
      "Per-example CSV, one row per (snapshot, example): step, epoch, index, label, times sampled, eta, dfil, MSE "
      "bounds, Fisher trace and its standard error; with --runs R > 1 each run's trace (fisher_trace_run0 ..). Empty "
      "cells: eta and its bound when not computed (--spectral none), the bounds of an example never sampled";
  /// The resume file, which no output may be (run_job checks).
  static std::string checkpoint(const Options& options) { return options.dpsgd.checkpoint_path; }
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"models_out", "CSV of the trained models, one row per run: run, then w0..w{p-1}: " +
                               std::string(kModelParameterLayout)}};
  }
  static constexpr bool runs_on_mpi_ranks = true;  // data-parallel (docs/distributed.md)
  static DpSgdJobResult run(const Options& options, bool progress) { return run_dpsgd(options, progress); }
  /// With a report asked for, snapshots each epoch unless report_epochs says otherwise. With
  /// `run`, the run file is the only output: others are refused.
  static DpSgdJobResult run(const Options& options, bool progress, const JobOutputs& outputs);
};

}  // namespace filkit
