// Private SGD (DP-SGD) for logistic and softmax regression (G in closed form) and for smooth
// networks (networks.hpp: G probed through LibTorch) with per-example Fisher information
// accounting: Algorithm 1 of Guo, Karrer, Chaudhuri, van der Maaten, "Bounding training data
// reconstruction in private (deep) learning", ICML 2022 (docs/mathematics.md, section 7).
//
// Training. Step t draws a batch B_t (uniformly without replacement, |B_t| = B, q = B/n; or
// Poisson sampling, each example with probability q, normalised by the expected size B), clips
// each per-example gradient smoothly (clipped_gradient.hpp: g~ = g / (GELU(||g||/C - 1) + 1),
// ||g~|| <= 1.11524 C) and releases the noisy sum:
//   u_t = (sum_{i in B_t} g~_i + N(0, sigma^2 C^2 I)) / B + weight_decay * w_{t-1},
//   v_t = momentum * v_{t-1} + u_t,   w_t = w_{t-1} - rho * v_t      (v_0 = 0; jax momentum),
// or Adam on u_t. The optimiser and weight decay are post-processing of the released sums, so
// they change nothing in the accounting below.
//
// Accounting (Theorems 3 and 4). The noisy sum's FIM about a batch member z, given the past, is
//   I_t(z) = G_t^T G_t / (sigma C)^2,   G_t = d g~(z; w_{t-1}) / dz   (p x d_z, exact for GLMs).
// Per example the accountant adds kappa I_t(z) over the steps that sampled it,
//   kappa = q / (q + (1 - q) e^{-eps0}),   eps0 = 1.11524 * 2 sqrt(2 ln(1.25/delta)) / sigma
// (eps0 makes one step (eps0, delta)-DP; with probability <= T delta the amplified bound fails and
// kappa = 1, the `SubsamplingFactor::kOne` option, is the safe one). The realised sum is an
// unbiased estimate of an upper bound on the FIM of the final model; `runs` independent runs
// average it. The paper rounds 1.11524 to 1.115 in eps0; we use the exact maximum so that the
// step's DP guarantee is not overstated (kappa changes by < 2e-4 relative). Theorem 4 is proved
// for fixed-size batches; the same mixture argument gives it for Poisson sampling.
//
// Reported per example (label public by default, as in the paper: only x is private):
//   dFIL  eta_bar = sqrt(Tr(I) / d_z)        -> unbiased reconstruction MSE >= 1 / eta_bar^2;
//   eta   = sqrt(sum_t kappa ||G_t||_2^2) / (sigma C) >= ||I||_2^(1/2)
//                                             -> variance of any unbiased coordinate estimate >= 1/eta^2.
// eta is the sum of the per-step spectral norms, an upper bound on the spectral norm of the
// accumulated FIM: the exact norm needs the d_z x d_z FIM of every example (12665 x 784^2 doubles
// for MNIST 0/1), and the paper too reports per-step spectral norms (by power iteration) and
// traces. Traces add exactly, so dFIL is exact given the run.
//
// Reported per snapshot for the data set (Guo et al. 2022, figure 5): the max and median over
// examples of dFIL (of the run-averaged traces) and their MSE bounds 1/dFIL^2; with runs > 1 also
// each run's own, and confidence intervals from the bootstrap over runs (run_bootstrap.hpp).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/enum_names.hpp"
#include "filkit/base/jacobian_estimators.hpp"
#include "filkit/base/precision.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/run_bootstrap.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/models/label_privacy.hpp"
#include "filkit/networks/networks.hpp"
#include "filkit/privacy/neighbouring_relation.hpp"
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"
#include "filkit/privacy/step_privacy.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace filkit {

/// The factor kappa of the per-step FIM.
enum class SubsamplingFactor {
  kAmplified,  ///< kappa = q / (q + (1 - q) e^{-eps0}) (Theorem 4, Equation 3)
  kOne,        ///< kappa = 1 (Theorem 4, Equation 2: holds with probability 1)
};
template <>
struct EnumNames<SubsamplingFactor> {
  static constexpr const char* what = "subsampling factor";
  static constexpr std::pair<SubsamplingFactor, const char*> names[] = {{SubsamplingFactor::kAmplified, "amplified"},
                                                                        {SubsamplingFactor::kOne, "one"}};
};

/// How the released noisy gradient moves the parameters (post-processing: no effect on accounting).
enum class Optimizer {
  kSgd,   ///< v = momentum v + u, w -= rho v  (u: the noisy averaged gradient plus weight decay)
  kAdam,  ///< Adam (Kingma and Ba 2015) on u, bias-corrected, step size rho
};
template <>
struct EnumNames<Optimizer> {
  static constexpr const char* what = "optimizer";
  static constexpr std::pair<Optimizer, const char*> names[] = {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}};
};

struct DpSgdOptions {
  /// logistic (y in {0,1}) or softmax (y in {0..K-1}, K = largest label + 1), in closed form;
  /// ignored when `network` is set.
  ModelKind kind = ModelKind::kLogistic;
  /// A network trained through LibTorch (networks.hpp) instead of the closed-form GLM: the
  /// softmax network (the GLM by autodiff), a tanh MLP or the paper's ConvNet. Labels public.
  std::optional<NetworkOptions> network;
  /// Prepend a public constant-1 coordinate (its weight is trained like the others).
  bool intercept = false;
  /// Whether the label is a private coordinate (logistic: y as a real number; softmax: the
  /// one-hot vector). Default public, as in the paper.
  LabelPrivacy label = LabelPrivacy::kPublic;
  /// B: batch size (uniform) or expected batch size (Poisson); 1 <= B <= n. Paper: 600.
  Index batch_size = 600;
  BatchSampling sampling = BatchSampling::kUniform;
  /// T: number of steps, >= 1. Paper: 1000..5000.
  Index steps = 1000;
  /// rho: step size, > 0. Paper: 0.01, 0.03, 0.1.
  double step_size = 0.1;
  /// C: clip norm, > 0. Paper: 1..32.
  double clip_norm = 1.0;
  /// sigma: noise multiplier (noise std sigma C on the sum), > 0. Paper: 0.2..10.
  double noise_multiplier = 1.0;
  Optimizer optimizer = Optimizer::kSgd;
  /// Momentum mass in [0, 1) (sgd). Paper: 0.5.
  double momentum = 0.5;
  /// Adam's moment decay rates in [0, 1) and its epsilon > 0.
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  /// Added to Adam's step count in its bias corrections, >= 0: 0 is Adam (Kingma and Ba); 1 is the
  /// thesis' code (Edmunds 2024), which calls jax's optimizers.adam with i = 1, 2, ..., and jax
  /// corrects with i + 1, so its first step is 0.744 of the step size.
  Index adam_bias_correction_offset = 0;
  /// Weight decay >= 0 added to the averaged noisy gradient (times w).
  double weight_decay = 0.0;
  /// The arithmetic and storage of training (docs/mathematics.md, section 11, "float32"). float32
  /// is what the thesis' jax code computes: the model's gradients, the releases, their clip and
  /// their Jacobian products (the accounting's traces) in single precision, and the parameters,
  /// the gradient and the optimiser's moments rounded to single precision at every step. The
  /// accountants, the per-example sums of the traces and every reported statistic stay float64.
  /// Networks and private training with public data only: the closed-form GLMs of the dpsgd job
  /// are float64 (the softmax network is the same model by autodiff, in either).
  Precision precision = Precision::kFloat64;
  /// GLMs and the softmax network: w_0 ~ N(0, init_scale^2 I), drawn independently of the data; 0
  /// (default) starts at zero. The mlp and cnn start from PyTorch's default initialisation.
  double init_scale = 0.0;
  SubsamplingFactor subsampling = SubsamplingFactor::kAmplified;
  /// delta of the per-step (eps0, delta)-DP guarantee behind kappa, in (0, 1). auto = 1/(n T):
  /// the reconstruction paper's rule (section 6), at most 1/n over the T steps of a run.
  std::optional<double> kappa_delta;
  /// How Tr(G^T G) and ||G||_2 are computed per step, and the probes of an estimated trace
  /// (>= 1; paper: 50). auto: exact, exact and 50 for the closed-form GLMs; gaussian, none and 1
  /// for networks (exact traces of a network cost a backward pass per input coordinate).
  std::optional<TraceMethod> trace;
  std::optional<SpectralMethod> spectral;
  std::optional<int> probes;
  /// Power iterations per example and step, >= 1. Paper: 20.
  int power_iterations = NetworkAccountingRequest{}.power_iterations;
  /// Independent training runs whose accountants are averaged, >= 1. Paper: 10.
  int runs = 1;
  /// Seed of everything random: run r uses a seed derived from (seed, r), recorded in the result.
  std::uint64_t seed = 0;
  /// Epochs (multiples of n/B steps, > 0) at which to report besides the final step T; each must
  /// give a step <= T (rounded to the nearest step, at least 1).
  std::vector<double> report_epochs;
  /// delta of the reported (eps, delta)-DP guarantee, in (0, 1).
  double rdp_delta = 1e-5;
  /// Which accountant reports eps (privacy_accountant.hpp). Either accounts the sampler as what it
  /// is (neighbouring_relation(sampling)): Poisson batches under add/remove, fixed-size batches without
  /// replacement under replace-one. The RDP curve (order 2, its eps) is reported with either.
  AccountantKind accountant = AccountantKind::kRdp;
  /// The PLD accountant's loss grid spacing h (accountant = pld; kDiscretizationHelp), > 0.
  double discretization = PldSettings{}.discretization;
  /// runs > 1: confidence intervals for the max and median dFIL over examples by the bootstrap
  /// over runs (run_bootstrap.hpp): B resamples of the runs, in [10, 10^6] (default 1000), and
  /// the percentile interval's level in (0, 1) (default 0.95). The resamples are seeded from
  /// `seed` (DpSgdResult::bootstrap_seed). Reporting only: training and the resume file ignore them.
  int bootstrap_resamples = 1000;
  double confidence_level = 0.95;
  /// Memory budget: each run's per-example traces are kept at every snapshot for the intervals
  /// (S snapshots x R runs x n doubles, held twice, and four more times while a resume file is
  /// written), refused before training when above it. The dpsgd job sets it from --max-memory;
  /// not an option of its own.
  ByteSize max_memory = default_memory_budget();

  /// Resuming long runs. With a path, the whole state (parameters, optimiser, generators,
  /// accountants, the runs done) is written there atomically every `checkpoint_every` steps (0:
  /// only when stopping early), and a later call with the same settings and data resumes from it,
  /// giving the same numbers as an uninterrupted run. The file is checked (a header, a CRC32 and
  /// every size and counter) and refused, never used, when damaged. Who removes it when every run
  /// is done: train_dpsgd's `when_done` argument says (the dpsgd job removes it only after
  /// writing its outputs).
  std::string checkpoint_path;
  Index checkpoint_every = 0;
  /// Stop (saving the state) after this many steps in this call; 0 runs to the end.
  Index stop_after = 0;
  /// These options with every auto filled in for the model (`network` set or not) and, given the
  /// number of training examples n, for the data (kappa_delta = 1/(n T)).
  DpSgdOptions resolved(std::optional<Index> n = std::nullopt) const;
  void validate() const;
};

/// The one declaration of adam_bias_correction_offset, shared by every job that trains with Adam.
template <class Visit>
void visit_adam_bias_correction_offset_field(DpSgdOptions& o, Visit&& visit) {
  visit("adam_bias_correction_offset", o.adam_bias_correction_offset,
        "Adam: added to the step count of its bias corrections; 1 = the thesis' code (jax's adam called with i = 1, 2, "
        "...)");
}

/// The user-facing fields of DpSgdOptions (the model, kind and network, is chosen by the caller).
template <class Visit>
void visit_fields(DpSgdOptions& o, Visit&& visit) {
  visit("intercept", o.intercept, "Add a public constant-1 coordinate");
  visit("label", o.label, "Whether labels are private coordinates: private or public");
  visit("batch_size", o.batch_size, "B: batch size (expected size with Poisson sampling)");
  visit("sampling", o.sampling,
        "uniform (B without replacement), poisson (rate B/n) or shuffle (epochs of a permutation, every example once "
        "an epoch; not covered by the Poisson RDP and kappa)");
  visit("steps", o.steps, "T: number of steps");
  visit("step_size", o.step_size, "rho: step size, > 0");
  visit("clip_norm", o.clip_norm, "C: clip norm of the GELU clipping, > 0");
  visit("noise_multiplier", o.noise_multiplier, "sigma: noise N(0, sigma^2 C^2 I) on the clipped sum, > 0");
  visit("optimizer", o.optimizer, "sgd (with momentum) or adam");
  visit("momentum", o.momentum, "Momentum mass in [0, 1)");
  visit("adam_beta1", o.adam_beta1, "Adam: first-moment decay");
  visit("adam_beta2", o.adam_beta2, "Adam: second-moment decay");
  visit("adam_epsilon", o.adam_epsilon, "Adam: epsilon");
  visit_adam_bias_correction_offset_field(o, visit);
  visit("weight_decay", o.weight_decay, "Weight decay, >= 0");
  visit("precision", o.precision,
        "Training's arithmetic: float64, or float32 as the thesis' jax (gradients, releases, clip and the traces' "
        "Jacobian products in single precision; parameters and optimiser state rounded to it every step; the "
        "accountants and statistics stay float64). Networks and public-training only");
  visit("init_scale", o.init_scale, "w_0 ~ N(0, init_scale^2 I); 0 starts at zero (GLMs and the softmax network)");
  visit("subsampling", o.subsampling, "Subsampling factor kappa: amplified (q/(q+(1-q)e^-eps0)) or one");
  visit("kappa_delta", o.kappa_delta,
        "delta of the per-step DP guarantee behind kappa; auto = 1/(n T), the paper's rule (at most 1/n over a run)");
  visit("trace", o.trace,
        "Tr(G^T G) per step: exact, coordinates or gaussian; auto = exact for GLMs, gaussian for networks");
  visit("spectral", o.spectral,
        "||G||_2 per step: exact, power-iteration or none; auto = exact for GLMs, none for networks");
  visit("probes", o.probes, "Probes per example and step of an estimated trace; auto = 50 for GLMs, 1 for networks");
  visit("power_iterations", o.power_iterations, "Power iterations per example and step");
  visit("runs", o.runs, "Independent runs averaged by the accountant");
  visit("report_epochs", o.report_epochs,
        "Also report snapshots at these epochs (multiples of n/B steps); none given and a report asked for: each "
        "epoch (at most 50, evenly; tenths of a run shorter than two epochs)");
  visit("rdp_delta", o.rdp_delta, "delta of the reported (eps, delta)-DP guarantee");
  visit("accountant", o.accountant,
        "rdp or pld: the accountant of the reported eps, for the sampler's neighbouring relation (poisson: "
        "add/remove; uniform: without replacement, replace-one; shuffle: not covered, accounted as poisson)");
  visit("discretization", o.discretization, kDiscretizationHelp);
  visit("bootstrap_resamples", o.bootstrap_resamples,
        "Runs > 1: bootstrap resamples of the runs behind the confidence intervals of max and median dFIL");
  visit("confidence_level", o.confidence_level, "Runs > 1: level of those (percentile) confidence intervals");
  visit("checkpoint", o.checkpoint_path,
        "Resume file: the state is saved here and a rerun with the same settings resumes from it");
  visit("checkpoint_every", o.checkpoint_every, "Save the state every this many steps (0: only when stopping early)");
  visit("stop_after", o.stop_after, "Stop (saving the state) after this many steps in this call; 0 runs to the end");
  visit("seed", o.seed, "Seed of every random choice: batches, noise, probes, initialisation, subsets and splits");
}

/// The state of the accountant (averaged over runs) and of the models at one step.
struct DpSgdSnapshot {
  Index step = 0;
  double epoch = 0.0;  ///< step * B / n
  /// Tr(I_i): sum over sampled steps of kappa Tr(G^T G) / (sigma C)^2, mean over runs.
  VectorXd fisher_trace;
  /// Standard error of that mean over runs (0 for one run).
  VectorXd fisher_trace_standard_error;
  /// Tr(I_i) of each run alone: R x n, row r the Theorem 3 sum of run r; fisher_trace is its mean.
  MatrixXd fisher_trace_per_run;
  /// The max and median over examples of dFIL: of the mean over runs (those of dfil()), of each
  /// run alone, and their bootstrap confidence intervals over runs (none for one run).
  RunBootstrap dfil_over_runs;
  /// sum over sampled steps of kappa ||G||_2^2 / (sigma C)^2, mean over runs (>= ||I_i||_2).
  VectorXd fisher_spectral;
  /// How many steps sampled each example, mean over runs.
  VectorXd times_sampled;
  std::vector<double> train_accuracy;  ///< one per run
  std::vector<double> test_accuracy;   ///< one per run; NaN without test data
  /// (eps, delta)-DP of the run so far by the RDP accountant (rdp_accountant.hpp): `step` steps
  /// of the Gaussian mechanism at rate q with noise multiplier sigma / 1.11524 (the GELU clip
  /// bounds ||g~|| by 1.11524 C: rdp_noise_multiplier), delta = rdp_delta, Opacus's order grid,
  /// under the relation neighbouring_relation(options.sampling) says (Poisson, or without replacement under
  /// replace-one for fixed-size batches; Opacus, TF Privacy and the paper's code account those
  /// as Poisson batches instead).
  PrivacySpent privacy;
  /// eps at rdp_delta by options.accountant for the same steps (privacy.eps for the RDP one).
  double epsilon = 0.0;
  /// PLD accountant: the mass at infinite loss its truncation adds to every delta; else 0.
  double pld_infinity_mass = 0.0;
  /// The (2, eps2)-RDP of the run so far: RDP at order 2 times `step` (same relation as privacy).
  double rdp_order2 = 0.0;
  /// Theorem 1's unbiased reconstruction MSE bound for data in [0, 1]^d: 1 / (4 (e^eps2 - 1)).
  double rdp_mse_bound() const;

  /// d_z, the private coordinates of an example (DpSgdResult::private_dims), for dfil().
  Index private_dims = 0;

  /// dFIL eta_bar_i = sqrt(Tr(I_i) / d_z).
  VectorXd dfil(Index private_dims) const;
  /// dfil(private_dims) with the snapshot's own d_z; throws std::logic_error when it is unset.
  VectorXd dfil() const;
  /// eta_i = sqrt(fisher_spectral_i) (NaN when not computed).
  VectorXd eta() const;
  double mean_test_accuracy() const;
  double mean_train_accuracy() const;
};

struct DpSgdResult {
  Index n = 0;                 ///< training examples
  Index num_classes = 2;       ///< K (2 for logistic)
  Index private_dims = 0;      ///< d_z
  double sampling_rate = 0.0;  ///< q = B / n
  double kappa_delta = 0.0;    ///< delta behind kappa, as used (auto resolved to 1/(n T))
  double step_epsilon = 0.0;   ///< eps0 of one step
  double kappa = 1.0;
  std::vector<std::uint64_t> run_seeds;
  /// Seed of the bootstrap's resamples (derived from the options' seed; the same for every snapshot).
  std::uint64_t bootstrap_seed = 0;
  /// In increasing step order; the last is the final step T.
  std::vector<DpSgdSnapshot> snapshots;
  /// GLMs: the final model of each run (evaluate with accuracy(), predict()); empty for networks.
  std::vector<Model> models;
  std::map<std::string, double> seconds;  ///< wall time: "training" (with accounting), "evaluation"
  /// The final parameters of each run (GLMs: W column by column; networks: networks.hpp's order).
  std::vector<VectorXd> parameters;
  Index parameter_count = 0;
  /// Networks: one line a layer.
  std::string architecture;
  /// False when the call stopped early (stop_after) and saved its state to checkpoint_path: then
  /// snapshots, models and parameters are empty.
  bool complete = true;
  /// Steps done over all runs, including those of earlier calls.
  Index steps_done = 0;
  /// Whether this call resumed from a checkpoint file.
  bool resumed = false;

  const DpSgdSnapshot& final_snapshot() const { return snapshots.back(); }
  /// Settings, derived constants, seeds, per-snapshot summaries (median / max of eta and dFIL
  /// and their MSE bounds; for dFIL also each run's and, with runs > 1, confidence intervals),
  /// accuracies, timings and the version.
  nlohmann::json summary(const DpSgdOptions& options) const;
  /// One row per (snapshot, example): step, epoch, index, label, times sampled, eta, dFIL,
  /// 1/eta^2, 1/dFIL^2, the trace and its standard error; with runs > 1 also each run's trace
  /// (columns fisher_trace_run0 .. fisher_trace_run<R-1>).
  std::vector<std::string> table_header() const;
  /// For the terminal: per snapshot, the max and median dFIL with their intervals, the range of
  /// the runs' own values and the MSE bounds 1/dFIL^2 (one line saying why there are no intervals
  /// for one run).
  void print_dfil_over_runs(std::ostream& out) const;
  /// `labels`: the training labels of all n examples (gathered from the ranks of an MPI job).
  std::vector<std::vector<double>> table_rows(const VectorXd& labels) const;
};

/// What train_dpsgd does with the resume file (DpSgdOptions.checkpoint_path) once every run is done.
enum class CheckpointWhenDone {
  kRemove,  ///< removes it before returning: the results exist only in the returned value
  kKeep,    ///< keeps it: the caller removes it once the results are safe (e.g. written to disk);
            ///< until then a further call with the same settings resumes from it to the same results
};

/// Trains `options.runs` models on `train` by DP-SGD with FIL accounting; `test` (possibly
/// empty) gives test accuracy. The closed-form GLMs (options.network empty) give bitwise
/// identical results for any number of threads; networks run LibTorch's kernels on OpenMP's
/// number of threads, and whether their rounding depends on it is LibTorch's (not promised).
///
/// On the ranks of an MPI job (`comm`, docs/distributed.md), `train` and `test` are each rank's
/// rows, in rank order; every rank samples the same batches over all n rows, clips and accounts
/// its own members, the clipped sums are added over the ranks and the noise is drawn once from
/// the run's seed (the same numbers on every rank). Results agree with one process's to rounding
/// (the sums are added in another order). Rank 0 gathers the per-example accounting and returns
/// the whole result; the other ranks return the parameters and models with no snapshots. A
/// resume file is written by rank 0 over all n rows and read by every rank, so a run stopped on
/// K ranks resumes on any number (the file must be on a file system every rank sees). Throws
/// std::invalid_argument for invalid options (naming the field), labels outside the model's
/// domain, a batch size above n or an unwritable checkpoint_path, and std::runtime_error naming
/// the file for a resume file that is damaged or belongs to another job.
DpSgdResult train_dpsgd(const Dataset& train, const Dataset& test, const DpSgdOptions& options, bool progress = false,
                        CheckpointWhenDone when_done = CheckpointWhenDone::kRemove,
                        const Communicator& comm = Communicator::local());

/// The seed that makes run 0 of a call run `run` of a call with `options` (seed_of_run_alone(o, r)
/// as options.seed, runs 1: its run 0's seed is dpsgd_run_seed(o, r)), so that runs trained
/// apart, on different MPI ranks say, are the runs of one call (docs/distributed.md).
std::uint64_t seed_of_run_alone(const DpSgdOptions& options, int run);

/// The result of one call with `options` (options.runs runs) from its runs trained apart, run r
/// by a call of one run with seed_of_run_alone(options, r) (`runs`, in run order): the runs'
/// traces, accuracies, parameters and seeds in order, and the summaries over runs (mean trace,
/// standard errors, bootstrap intervals) formed as that call forms them, so bit for bit its result
/// but for the timings (summed). Throws std::logic_error for results that are not such runs.
DpSgdResult combine_runs(const std::vector<DpSgdResult>& runs, const DpSgdOptions& options);

/// Throws std::invalid_argument (naming option `run`) unless `run` is one of the runs of a call
/// with `options`: 0 .. options.runs - 1.
void check_run_index(const DpSgdOptions& options, int run);

/// Run `run` (0 .. options.runs - 1) of the call train_dpsgd(train, test, options) trained alone
/// (a call of one run with seed_of_run_alone: bit for bit that call's run `run`), and its run file
/// written to `path` (atomically, by rank 0; the format of the resume file, resume_state.hpp: the
/// finished state of the one-run call, identified by the whole call's settings and data and the
/// run). Returns the one-run call's result. `options.checkpoint_path` resumes the run itself as
/// train_dpsgd does; stopped early (stop_after), the result is incomplete and no run file is
/// written. Throws std::invalid_argument for a run outside the call's or an unwritable path.
DpSgdResult train_dpsgd_run(const Dataset& train, const Dataset& test, const DpSgdOptions& options, int run,
                            const std::string& path, bool progress = false,
                            CheckpointWhenDone when_done = CheckpointWhenDone::kRemove,
                            const Communicator& comm = Communicator::local());

/// The result of train_dpsgd(train, test, options) from the run files train_dpsgd_run wrote of
/// its runs (`paths[r]` holding run r), without training: bit for bit that call's result but for
/// the timings (the runs' summed) and `resumed` (false). The files may come from any number of
/// ranks; the bootstrap's settings (resamples, level) and the accountant may differ from the
/// runs' (they summarise, not train). Throws std::runtime_error naming the file for a file that
/// is missing, damaged, of other settings or data, or of another run (a copy of another's), and
/// std::logic_error for `paths` not of options.runs files.
DpSgdResult combine_dpsgd_run_files(const Dataset& train, const Dataset& test, const DpSgdOptions& options,
                                    const std::vector<std::string>& paths,
                                    const Communicator& comm = Communicator::local());

/// Every setting of the options, for the JSON outputs.
nlohmann::json to_json(const DpSgdOptions& options);
/// What a summary says about the sampler's accounting, or nullptr when nothing needs saying.
const char* sampling_note(BatchSampling sampling);
/// The sampling the accountants assume for a sampler: itself for poisson (add/remove) and uniform
/// (replace-one); poisson for shuffle, which that does not cover (sampling_note). The relation is
/// neighbouring_relation(sampling) (neighbouring_relation.hpp).
BatchSampling accounted_sampling(BatchSampling sampling);
/// The summaries' "accounting" object: accountant, sampling and neighbouring relation, delta,
/// sigma and the effective sigma / 1.11524 with its reason, whether the sampler is covered, the note.
nlohmann::json accounting_summary(const DpSgdOptions& options);

}  // namespace filkit
