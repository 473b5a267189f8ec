// The groups of the commands' --help: where each option of a job's declaration (visit_fields) is
// listed. Presentation only: the options, their defaults and help stay in their declarations.
// tests/cli/help_test.cpp checks that every flag of every command falls in one of these groups.
#pragma once

#include <array>
#include <string_view>

namespace filkit::cli {

/// The groups in the order --help lists them.
inline constexpr std::array<std::string_view, 10> kOptionGroups = {
    "Data", "Preprocessing", "Model", "Privacy", "Training", "Attack", "Accounting", "Report", "Outputs", "Resources"};

namespace detail {

struct GroupOf {
  std::string_view name, group;
};

// A field's group wherever it appears...
inline constexpr GroupOf kGroupByName[] = {
    // Data: what is loaded and how it is split.
    {"data", "Data"},
    {"classes", "Data"},
    {"target", "Data"},
    {"categorical", "Data"},
    {"drop", "Data"},
    {"regression", "Data"},
    {"missing", "Data"},
    {"unseen_levels", "Data"},
    {"image_layout", "Data"},
    {"test_fraction", "Data"},
    {"train_size", "Data"},
    {"test_size", "Data"},
    {"public_fraction", "Data"},
    {"public_split", "Data"},
    {"public_size", "Data"},
    {"weights", "Data"},
    {"weights_column", "Data"},
    {"seed", "Data"},
    // Preprocessing, fitted on the training split.
    {"pca", "Preprocessing"},
    {"row_scaling", "Preprocessing"},
    {"scale_pixels", "Preprocessing"},
    {"standardize", "Preprocessing"},
    // Model: what is fitted or trained and how.
    {"model", "Model"},
    {"engine", "Model"},
    {"hidden", "Model"},
    {"arch", "Model"},
    {"torchscript", "Model"},
    {"network_init", "Model"},
    {"intercept", "Model"},
    {"l2", "Model"},
    {"tolerance", "Model"},
    {"solver", "Model"},
    {"reference_logit", "Model"},
    {"freeze_fraction", "Model"},
    {"gradient_model", "Model"},
    {"objective", "Model"},
    {"lambda", "Model"},
    {"lambda_decay", "Model"},
    {"lambda_min", "Model"},
    {"snr", "Model"},
    {"gradient_hidden", "Model"},
    {"gradient_conv", "Model"},
    {"gradient_unit", "Model"},
    {"gradient_steps", "Model"},
    {"gradient_decay", "Model"},
    {"gradient_min_steps", "Model"},
    {"gradient_batch_size", "Model"},
    {"gradient_step_size", "Model"},
    {"gradient_weight_decay", "Model"},
    {"gradient_probes", "Model"},
    {"gradient_trace", "Model"},
    {"gradient_probe_draws", "Model"},
    {"gradient_precision", "Model"},
    {"gradient_state_precision", "Model"},
    // Privacy: the mechanism and what is private.
    {"sigma", "Privacy"},
    {"releases", "Privacy"},
    {"label", "Privacy"},
    {"noise_multiplier", "Privacy"},
    {"clip_norm", "Privacy"},
    {"sampling", "Privacy"},
    {"subsampling", "Privacy"},
    {"kappa_delta", "Privacy"},
    {"norm_bound", "Privacy"},
    {"diameter", "Privacy"},
    {"attribute", "Privacy"},
    {"subset", "Privacy"},
    {"iterations", "Privacy"},
    {"weighting", "Privacy"},
    {"min_weight", "Privacy"},
    {"max_weight", "Privacy"},
    // Training: the optimiser and its schedule.
    {"batch_size", "Training"},
    {"steps", "Training"},
    {"step_size", "Training"},
    {"optimizer", "Training"},
    {"momentum", "Training"},
    {"adam_beta1", "Training"},
    {"adam_beta2", "Training"},
    {"adam_epsilon", "Training"},
    {"adam_bias_correction_offset", "Training"},
    {"weight_decay", "Training"},
    {"precision", "Training"},
    {"init_scale", "Training"},
    {"runs", "Training"},
    {"run", "Training"},
    {"report_epochs", "Training"},
    {"methods", "Training"},
    {"sgd_clip", "Training"},
    {"pretrain_steps", "Training"},
    {"pretrain_batch_size", "Training"},
    {"pretrain_step_size", "Training"},
    {"pretrain_weight_decay", "Training"},
    {"pretrain_sampling", "Training"},
    // Attack: the attacks run on the release.
    {"trials", "Attack"},
    {"rows", "Attack"},
    {"divisor_guard", "Attack"},
    {"sigmas", "Attack"},
    {"white_box", "Attack"},
    {"black_box", "Attack"},
    {"white_box_solver", "Attack"},
    {"examples", "Attack"},
    {"compare_naive", "Attack"},
    {"groups", "Attack"},
    {"train_shadow_models", "Attack"},
    {"target_shadow_models", "Attack"},
    {"fixed_size", "Attack"},
    {"attacker_hidden", "Attack"},
    {"clip_inputs", "Attack"},
    {"ridge", "Attack"},
    {"attacker_epochs", "Attack"},
    {"attacker_batch_size", "Attack"},
    {"attacker_step_size", "Attack"},
    {"attacker_weight_decay", "Attack"},
    {"attacker_init", "Attack"},
    {"same_seed", "Attack"},
    {"shared_start", "Attack"},
    // Accounting: how FIL and (eps, delta) are computed and reported.
    {"trace", "Accounting"},
    {"spectral", "Accounting"},
    {"probes", "Accounting"},
    {"power_iterations", "Accounting"},
    {"rdp_delta", "Accounting"},
    {"accountant", "Accounting"},
    {"bootstrap_resamples", "Accounting"},
    {"confidence_level", "Accounting"},
    {"sample_rate", "Accounting"},
    {"n", "Accounting"},
    {"epochs", "Accounting"},
    {"delta", "Accounting"},
    {"orders", "Accounting"},
    {"mechanism", "Accounting"},
    {"target_eps", "Accounting"},
    {"discretization", "Accounting"},
    // The report command's inputs.
    {"input", "Report"},
    {"table", "Report"},
    {"report", "Report"},
    {"gnuplot", "Report"},
    {"images", "Report"},
    {"reload_timeout", "Report"},
    // Outputs and resumption.
    {"save_reconstructions", "Outputs"},
    {"curve_points", "Outputs"},
    {"checkpoint", "Outputs"},
    {"checkpoint_every", "Outputs"},
    {"stop_after", "Outputs"},
    {"run_dir", "Outputs"},
    {"shadow_models", "Outputs"},
    // Resources: memory, threads, batching for speed.
    {"max_memory", "Resources"},
    {"chunk", "Resources"},
};

struct JobGroupOf {
  std::string_view job, name, group;
};

// ...except where a job gives it another role.
inline constexpr JobGroupOf kGroupByJob[] = {
    {"accountant", "noise_multiplier", "Accounting"},
    {"accountant", "steps", "Accounting"},
    {"accountant", "batch_size", "Accounting"},
    {"accountant", "sampling", "Accounting"},
    {"dpsgd", "seed", "Training"},
    {"public-training", "seed", "Training"},
    {"learned-attack", "seed", "Training"},
};

}  // namespace detail

/// The --help group of field `name` of job `job`; empty when none is declared (a test fails).
constexpr std::string_view option_group(std::string_view job, std::string_view name) {
  for (const detail::JobGroupOf& entry : detail::kGroupByJob)
    if (entry.job == job && entry.name == name) return entry.group;
  for (const detail::GroupOf& entry : detail::kGroupByName)
    if (entry.name == name) return entry.group;
  return {};
}

}  // namespace filkit::cli
