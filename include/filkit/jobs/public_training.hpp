// The job behind `filkit public-training` (formerly `filkit fim`, still accepted): load ->
// preprocess -> split into public and private parts -> pre-train on the public part -> train on
// the private part by sgd, dpsgd, prune and fim with per-example FIL accounting
// (public_data/public_data_training.hpp; docs/mathematics.md, section 11) -> a table of every
// private example's dFIL per method and a summary comparing the methods like the thesis' tables
// 3.1-3.4 (accuracy and max/mean/median dFIL, mean and standard deviation over runs).
#pragma once

#include "filkit/data/pipeline.hpp"
#include "filkit/jobs/dpsgd.hpp"
#include "filkit/jobs/job.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include <map>
#include <string>
#include <vector>

namespace filkit {

struct PublicTrainingJobOptions {
  /// MNIST pixels / 255, no PCA, no row scaling, every class (the thesis' table 3.1 data).
  DataPipelineOptions data{.data = "mnist", .classes = std::vector<int>{}, .pca = 0, .row_scaling = RowScaling::kNone};
  /// The thesis' section 3.1 settings (its table B.1, figure 3.1 column) and its code's gradient
  /// model (constant, 200 epochs of the public part before the first private step, then 50 fewer,
  /// at least 20). Private batches are independent uniform draws unless sampling = shuffle (the
  /// thesis' code).
  /// The trained model: softmax regression (default, the thesis' linear model) or a network
  /// through LibTorch (cnn: the thesis' table 3.2 ConvNet; mlp; custom with arch or torchscript).
  ModelChoice model = ModelChoice::kSoftmax;
  NetworkOptions network;
  PublicDataTrainingOptions training = default_training();
  static PublicDataTrainingOptions default_training();
  /// `training` with the model resolved into private_phase.network (empty for softmax).
  PublicDataTrainingOptions training_options() const;
  void validate() const;
};

template <class Visit>
void visit_fields(PublicTrainingJobOptions& o, Visit&& visit) {
  visit_fields(o.data, visit);
  visit("model", o.model,
        "The trained model: softmax (regression, the thesis' linear model), or through LibTorch mlp, cnn (the "
        "thesis' table 3.2 ConvNet), cifar-cnn, custom (arch or torchscript)");
  visit("hidden", o.network.hidden, "mlp: hidden layer widths");
  visit("arch", o.network.layers, "custom: layers, as filkit dpsgd --arch");
  visit("torchscript", o.network.torchscript, "custom: a TorchScript file, as filkit dpsgd --torchscript");
  visit_network_init_field(o.network, visit);
  PublicDataTrainingOptions& t = o.training;
  visit("public_fraction", t.public_fraction, "Fraction of the training examples that are public, in (0, 1)");
  visit("public_split", t.public_split,
        "Which examples are public: random (a seeded random subset) or first (the first ones in the data's order, "
        "the same for every seed, as the thesis' code)");
  visit("freeze_fraction", t.freeze_fraction,
        "prune and fim: fraction of the pre-trained parameters frozen (smallest magnitudes), in [0, 1)");
  visit("reference_logit", t.reference_logit,
        "softmax: hold the last class's logit at 0 (K - 1 trained logits; for 2 classes the thesis' one-logit "
        "binary model)");
  visit("methods", t.methods, "Methods compared on the private part: sgd, dpsgd, prune, fim");
  visit_sgd_clip_field(t, visit);
  visit_pretrain_fields(t.pretrain, visit);
  visit_fields(t.gradient_model, visit);
  visit_fields(t.private_phase, visit);
}

/// One method's numbers over the runs (the thesis' tables: mean and standard deviation over runs).
struct MethodSummary {
  std::string method;
  std::vector<double> test_accuracy, train_accuracy;  ///< one per run
  /// Per run: max, mean and median over the private examples of that run's dFIL (empty for sgd).
  std::vector<double> max_dfil, mean_dfil, median_dfil;
  /// The same by the thesis' own accountant (fisher_term_dfil in public_training.cpp): 2 probes, sqrt(T + 1e-7),
  /// its kappa with the clip bound 1.115. Empty without accounting.
  std::vector<double> fisher_term_max_dfil, fisher_term_mean_dfil, fisher_term_median_dfil;
};

struct PublicTrainingJobResult final : JobResult {
  PublicTrainingJobOptions options;  ///< as run, autos resolved
  DatasetSplit data;                 ///< after preprocessing (train = public + private)
  PublicPrivateSplit split;
  Preprocessor preprocessor;
  PublicDataTrainingResult training;
  std::vector<MethodSummary> methods;
  std::map<std::string, double> seconds;
  std::string torchscript_sha256;  ///< of the TorchScript file, when one is the network (in the settings)
  nlohmann::json to_json() const override;
  /// One row per (accounted method, private example): method (1 dpsgd, 2 prune, 3 fim), row in the
  /// training data, label, times sampled, dFIL (run average), 1/dFIL^2, Fisher trace.
  NumericTable table() const override;
  /// models_out: one row per (method, run), the pre-trained start first (method -1), then the
  /// parameters (kModelParameterLayout).
  NumericTable extra_table(const std::string& name) const override;
  void print_summary(std::ostream& out) const override;
  bool complete() const override { return training.complete; }
  /// Removes the resume file (private_phase.checkpoint_path), kept by run_public_training until every output
  /// is written.
  void outputs_written() const override;
};

PublicTrainingJobResult run_public_training(const PublicTrainingJobOptions& options, bool progress = false);

struct PublicTrainingJob {
  using Options = PublicTrainingJobOptions;
  static constexpr const char* name = "public-training";
  /// Its name until the job was named for what it does (FIM also names the Fisher matrix).
  static constexpr const char* former_name = "fim";
  static constexpr const char* description =
      "Private training with public data that leaks less Fisher information (Edmunds 2024): split the data into "
      "public and private parts, pre-train on the public part, then train on the private part by sgd, dpsgd, prune "
      "(frozen smallest-magnitude parameters) and fim (a learned perturbation c, trained on public data, added to "
      "every released gradient to lower ||d clip(g + c)/dx||: the thesis' gradient model as its code computes it), "
      "with every private example's dFIL. Without options: MNIST, softmax regression, 50 % public.";
  /// Why defaults differ from other commands' (shown in --help where they do): the thesis' table
  /// 3.1 setting, except where default_reasons says the default is filkit's.
  static constexpr const char* defaults_reason =
      "the thesis' table 3.1 setting (Edmunds 2024, chapter 3 and table B.1)";
  /// The defaults that are filkit's rather than the thesis' code's, and why, beside the thesis'
  /// own with a particular reason. The thesis' code: github.com/brandonedmunds2/Thesis (its
  /// train_classifier.py and datasets.py; docs/mathematics.md, section 11).
  static std::vector<DefaultReason> default_reasons() {
    return {
        {"label", "the thesis bounds the reconstruction of the features"},
        {"pca", "the thesis trains on the raw pixels"},
        {"rdp_delta", "the thesis' delta"},
        {"sampling",
         "filkit's, not the thesis': independent batches, which the reported epsilon and kappa cover; the thesis' "
         "code shuffles (shuffle: every example once an epoch, which no accountant here covers). 59 uniform "
         "batches of 512 of 30000 leave (1 - 512/30000)^59 = 36 % of the private examples unsampled, with dFIL "
         "0, so the median dFIL falls far below the thesis' table 3.1"},
        {"pretrain_sampling", "filkit's; the thesis' code shuffles (shuffle, with pretrain-steps 1770)"},
        {"pretrain_steps",
         "filkit's: 30 epochs' worth of independent batches (30 x 30000 / 512 = 1758, rounded to 1760); the thesis' "
         "code takes 30 epochs of 59 batches, 1770 steps with pretrain-sampling shuffle"},
        {"public_split",
         "filkit's, so that the seed draws the split; the thesis' code takes the first examples (first)"},
        {"intercept", "filkit's: the thesis' linear model (a jax stax Dense layer) has a bias"},
        {"init_scale",
         "filkit's: w_0 = 0; the thesis' stax Dense layers start Glorot-normal (0.0502 for MNIST softmax)"},
        {"spectral", "the thesis reports dFIL, not eta"}};
  }
  static constexpr const char* out_help =
      "Per-example CSV, one row per (method, private example): method (1 dpsgd, 2 prune, 3 fim), index, label, times "
      "sampled, dfil, 1/dfil^2, fisher_trace";
  /// The resume file, which no output may be (run_job checks).
  static std::string checkpoint(const Options& options) { return options.training.private_phase.checkpoint_path; }
  static std::vector<ExtraOutput> extra_outputs() {
    return {{"models_out",
             "CSV of the trained models, one row per (method, run): method (-1 the pre-trained model every method "
             "starts from, 0 sgd, 1 dpsgd, 2 prune, 3 fim), run, then w0..w{p-1}: " +
                 std::string(kModelParameterLayout)}};
  }
  static constexpr bool runs_on_mpi_ranks = true;  // runs spread over the ranks (docs/distributed.md)
  static PublicTrainingJobResult run(const Options& options, bool progress) {
    return run_public_training(options, progress);
  }
};

}  // namespace filkit
