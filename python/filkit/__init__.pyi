"""Type hints of the filkit module (the C++ bindings in filkit._filkit). The keywords of the functions
that take options are written by scripts/write-stubs.py from the options' declaration."""
import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

FloatArray = npt.NDArray[np.float64]

# The library's typed errors (base/errors.hpp); each is also the built-in exception named beside it.
class Error(Exception): ...
class OptionError(Error, ValueError):
    option: str  # the keyword whose value breaks its rule
class DataError(Error, ValueError): ...
class ResourceError(Error, OSError): ...
class MemoryLimitError(ResourceError, MemoryError): ...
class NumericalError(Error, ArithmeticError): ...

class AttributeColumns:
    name: str
    columns: List[int]
    levels: List[str]
    dropped_level: str
    categorical: bool

class Dataset:
    def __init__(self, X: npt.ArrayLike, y: npt.ArrayLike, source: str = "numpy",
                 image: Optional[Tuple[int, int, int]] = None) -> None: ...
    @property
    def X(self) -> FloatArray: ...
    @property
    def y(self) -> FloatArray: ...
    @property
    def n(self) -> int: ...
    @property
    def d(self) -> int: ...
    feature_names: List[str]
    attributes: List[AttributeColumns]
    class_names: List[str]
    source: str
    @property
    def image(self) -> Optional[Tuple[int, int, int]]: ...
    dropped_rows: int
    def attribute(self, name: str) -> AttributeColumns: ...
    def select_rows(self, rows: Sequence[int]) -> "Dataset": ...

class DatasetSplit:
    def __init__(self, train: Dataset, test: Dataset) -> None: ...
    train: Dataset
    test: Dataset

def load_dataset(data: str = "fashion-mnist", *, classes: Sequence[int] = ..., target: str = "",
                 categorical: Sequence[str] = ..., drop: Sequence[str] = ...,
                 missing: Literal["drop", "level"] = "drop", unseen_levels: Literal["drop", "zero", "error"] = "drop",
                 image_layout: Literal["nchw", "nhwc", "auto"] | None = "auto", regression: bool = False,
                 test_fraction: float = 0.2, seed: int = 0, train_size: int = 0, test_size: int = 0,
                 max_memory: int | str = ...) -> DatasetSplit: ...
def builtin_dataset_names() -> List[str]: ...
def preprocess(split: DatasetSplit, *, scale_pixels: bool = False, standardize: Literal["none", "channel"] = "none",
               row_scaling: Literal["none", "global-max", "unit-ball"] = "none", pca: int = 0,
               scale_after_pca: bool = False, threads: int = 0,
               quiet: bool = False) -> Tuple[DatasetSplit, Dict[str, Any]]: ...

class Model:
    kind: str
    intercept: bool
    regression: bool
    l2: float
    n_train: int
    num_classes: int
    weights: FloatArray
    iterations: int
    gradient_norm: float
    @property
    def flat(self) -> FloatArray: ...

def fit(data: Dataset, weights: Optional[npt.ArrayLike] = ..., *,
        model: Literal["least-squares", "logistic", "softmax"] = "logistic", regression: bool = False,
        max_iterations: int = 100, l2: float = 0.0008, intercept: bool = False, tolerance: float = 1e-10,
        solver: Literal["auto", "newton", "lbfgs"] = "auto", threads: int = 0, quiet: bool = False) -> Model: ...
def perturb_output(model: Model, sigma: float, seed: int) -> Model: ...
def predict(model: Model, X: npt.ArrayLike) -> FloatArray: ...
def accuracy(model: Model, data: Dataset) -> float: ...
def mean_squared_error(model: Model, data: Dataset) -> float: ...
def per_example_loss(model: Model, data: Dataset) -> Tuple[FloatArray, FloatArray]: ...

class PerExampleFil:
    eta: FloatArray
    dfil: FloatArray
    private_dims: int
    def attribute_mse_bound(self) -> FloatArray: ...
    def example_mse_bound(self) -> FloatArray: ...

class SubsetFil:
    eta: float
    dfil: float
    examples: int
    coordinates: int

class FisherInformationLoss:
    def __init__(self, model: Model, data: Dataset, weights: Optional[npt.ArrayLike] = ..., *, sigma: float = 1.0,
                 label: Literal["private", "public"] = "private", structured: bool = True) -> None: ...
    def per_example(self) -> PerExampleFil: ...
    def per_example_attribute(self, columns: Sequence[int]) -> FloatArray: ...
    def subset(self, rows: Sequence[int] = ..., columns: Optional[Sequence[int]] = None,
               label: Optional[bool] = None) -> SubsetFil: ...
    def jacobian(self, i: int, columns: Optional[Sequence[int]] = None, label: Optional[bool] = None) -> FloatArray: ...
    @property
    def hessian(self) -> FloatArray: ...
    @property
    def num_params(self) -> int: ...

def composed_sigma(sigmas: Sequence[float]) -> float: ...
def composed_fil(information_matrices: Sequence[npt.ArrayLike]) -> float: ...

class GroupFil:
    name: str
    fil: SubsetFil

class MeasureResult:
    data: DatasetSplit
    model: Model
    release: Model
    sigma: float
    fil: PerExampleFil
    loss: FloatArray
    gradient_norm: FloatArray
    attribute_columns: List[int]
    attribute_eta: FloatArray
    attribute_fil: SubsetFil
    groups: List[GroupFil]
    train_accuracy: float
    test_accuracy: float
    train_mse: float
    test_mse: float
    seconds: Dict[str, float]
    labels: FloatArray
    n_train: int
    n_test: int

def measure(*, data: str = "fashion-mnist", classes: Sequence[int] | Literal["auto"] | None = "auto", target: str = "",
            categorical: Sequence[str] = ..., drop: Sequence[str] = ..., regression: bool = False,
            missing: Literal["drop", "level"] = "drop", unseen_levels: Literal["drop", "zero", "error"] = "drop",
            image_layout: Literal["nchw", "nhwc", "auto"] | None = "auto", test_fraction: float = 0.2,
            train_size: int = 0, test_size: int = 0, pca: int | Literal["auto"] | None = "auto",
            row_scaling: Literal["none", "global-max", "unit-ball"] = "global-max",
            scale_pixels: bool | Literal["auto"] | None = "auto", standardize: Literal["none", "channel"] = "none",
            max_memory: int | str = ...,
            model: Literal["least-squares", "logistic", "softmax", "auto"] | None = "logistic", l2: float = 0.0008,
            intercept: bool = False, tolerance: float = 1e-10, solver: Literal["auto", "newton", "lbfgs"] = "auto",
            sigma: float = 1.0, label: Literal["private", "public"] = "private", releases: int = 1, attribute: str = "",
            subset: Sequence[str] = ..., seed: int = 0, out: str | os.PathLike[str] | None = None,
            json: str | os.PathLike[str] | None = None, report: str | os.PathLike[str] | None = None,
            release_out: str | os.PathLike[str] | None = None, threads: int = 0,
            quiet: bool = False) -> Tuple[MeasureResult, Dict[str, Any]]: ...
def run(job: str, **options: Any) -> Dict[str, Any]: ...
def jobs() -> List[str]: ...
def defaults(job: str) -> Dict[str, Any]: ...
def keywords(function: str) -> List[Tuple[str, Any]]: ...

class PrivacySpent:
    eps: float
    delta: float
    optimal_order: float
    orders: List[float]
    rdp: List[float]
    status: str
    warning: str

class PrivacyAccountant:
    def step(self, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None: ...
    def epsilon(self, delta: float) -> float: ...
    def delta(self, epsilon: float) -> float: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Dict[str, Any]) -> None: ...
    def noise_multiplier(self, target_eps: float, delta: float, sample_rate: float, steps: int) -> float: ...
    @property
    def description(self) -> str: ...
    @property
    def history(self) -> List[Dict[str, Any]]: ...

class RdpAccountant(PrivacyAccountant):
    def __init__(self, orders: Optional[Any] = None, sampling: str = "poisson") -> None: ...
    def compose(self, *, noise_multiplier: float, sample_rate: float, steps: int) -> None: ...
    def get_privacy_spent(self, delta: float) -> PrivacySpent: ...
    @property
    def orders(self) -> List[float]: ...
    @property
    def rdp(self) -> List[float]: ...
    @property
    def sampling(self) -> str: ...
    @property
    def neighbouring_relation(self) -> str: ...

class PldAccountant(PrivacyAccountant):
    def __init__(self, sampling: str = "poisson", discretization: float = 1e-4,
                 truncation_mass: float = 1e-15) -> None: ...
    @property
    def infinity_mass(self) -> float: ...
    @property
    def sampling(self) -> str: ...
    @property
    def neighbouring_relation(self) -> str: ...
    @property
    def discretization(self) -> float: ...

def subsampled_gaussian_rdp(sample_rate: float, noise_multiplier: float, orders: Optional[Any] = None) -> List[float]: ...
def rdp_orders(grid: str = "opacus") -> List[float]: ...
def neighbouring_relation(sampling: str) -> str: ...
def sampling_note(sampler: str) -> Optional[str]: ...
EFFECTIVE_NOISE_MULTIPLIER_REASON: str
def noise_multiplier_for_epsilon(target_eps: float, delta: float, sample_rate: float, steps: int,
                                 orders: Optional[Any] = None) -> Tuple[float, PrivacySpent]: ...

class ConfidenceInterval:
    lower: float
    upper: float

class MaxAndMedian:
    max: float
    median: float

class RunBootstrap:
    estimate: MaxAndMedian
    per_run: List[MaxAndMedian]
    max_interval: Optional[ConfidenceInterval]
    median_interval: Optional[ConfidenceInterval]
    max_replicates: List[float]
    median_replicates: List[float]
    level: float
    resamples: int
    seed: int

class DpSgdSnapshot:
    step: int
    epoch: float
    private_dims: int
    fisher_trace: FloatArray
    fisher_trace_standard_error: FloatArray
    fisher_trace_per_run: FloatArray
    dfil_over_runs: RunBootstrap
    fisher_spectral: FloatArray
    times_sampled: FloatArray
    train_accuracy: List[float]
    test_accuracy: List[float]
    privacy: PrivacySpent
    epsilon: float
    pld_infinity_mass: float
    rdp_order2: float
    def rdp_mse_bound(self) -> float: ...
    @property
    def dfil(self) -> FloatArray: ...
    @property
    def eta(self) -> FloatArray: ...

class DpSgdResult:
    n: int
    num_classes: int
    private_dims: int
    sampling_rate: float
    kappa_delta: float
    step_epsilon: float
    kappa: float
    run_seeds: List[int]
    bootstrap_seed: int
    snapshots: List[DpSgdSnapshot]
    models: List[Model]
    parameters: List[FloatArray]
    parameter_count: int
    architecture: str
    complete: bool
    resumed: bool
    steps_done: int
    seconds: Dict[str, float]
    @property
    def final_snapshot(self) -> DpSgdSnapshot: ...
    @property
    def dfil(self) -> FloatArray: ...

def train_dpsgd(train: Dataset, test: Dataset, *,
                model: Literal["logistic", "softmax", "mlp", "cnn", "cifar-cnn", "custom"] = "logistic",
                engine: Literal["auto", "closed-form", "torch"] = "auto", hidden: Sequence[int] = ..., arch: str = "",
                torchscript: str = "", network_init: Literal["pytorch", "jax"] = "pytorch", chunk: int = 100,
                intercept: bool = False, label: Literal["private", "public"] = "public", batch_size: int = 600,
                sampling: Literal["uniform", "poisson", "shuffle"] = "uniform", steps: int = 1000,
                step_size: float = 0.1, clip_norm: float = 1.0, noise_multiplier: float = 1.0,
                optimizer: Literal["sgd", "adam"] = "sgd", momentum: float = 0.5, adam_beta1: float = 0.9,
                adam_beta2: float = 0.999, adam_epsilon: float = 1e-08, adam_bias_correction_offset: int = 0,
                weight_decay: float = 0.0, precision: Literal["float64", "float32"] = "float64",
                init_scale: float = 0.0, subsampling: Literal["amplified", "one"] = "amplified",
                kappa_delta: float | Literal["auto"] | None = "auto",
                trace: Literal["exact", "coordinates", "gaussian", "auto"] | None = "auto",
                spectral: Literal["exact", "power-iteration", "none", "auto"] | None = "auto",
                probes: int | Literal["auto"] | None = "auto", power_iterations: int = 20, runs: int = 1,
                report_epochs: Sequence[float] = ..., rdp_delta: float = 1e-05,
                accountant: Literal["rdp", "pld"] = "rdp", discretization: float = 0.0001,
                bootstrap_resamples: int = 1000, confidence_level: float = 0.95, checkpoint: str = "",
                checkpoint_every: int = 0, stop_after: int = 0, seed: int = 0, threads: int = 0,
                quiet: bool = False) -> Tuple[DpSgdResult, Dict[str, Any]]: ...
def subsampling_kappa(sample_rate: float, noise_multiplier: float, delta: float) -> float: ...
def networks_available() -> bool: ...

class Network:
    def __init__(self, architecture: str, input_dim: int, num_classes: int, hidden: Sequence[int] = ...,
                 intercept: bool = False, chunk: int = 100, arch: str = "", torchscript: str = "",
                 image: Optional[Tuple[int, int, int]] = None, max_memory: str | int | None = None) -> None: ...
    parameter_count: int
    layers: str
    input_dim: int
    num_classes: int
    def describe(self) -> str: ...
    def initial_parameters(self, seed: int = 0) -> FloatArray: ...
    def logits(self, w: FloatArray, X: FloatArray) -> FloatArray: ...
    def accuracy(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float: ...
    def gradients(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray: ...
    def clipped_gradients(self, w: FloatArray, X: FloatArray, y: FloatArray, clip_norm: float) -> FloatArray: ...
    def jacobian_vector_products(self, w: FloatArray, X: FloatArray, y: FloatArray, clip_norm: float,
                                 V: FloatArray) -> FloatArray: ...
    def vector_jacobian_products(self, w: FloatArray, X: FloatArray, y: FloatArray, clip_norm: float,
                                 U: FloatArray) -> FloatArray: ...
    def account_batch(self, w: FloatArray, X: FloatArray, y: FloatArray, clip_norm: float, trace: str = "gaussian",
                      spectral: str = "none", probes: int = 1, power_iterations: int = 20,
                      seed: int = 0) -> Tuple[FloatArray, FloatArray, FloatArray]: ...

class IrfilResult:
    weights: List[FloatArray]
    eta_before: FloatArray
    eta_after: FloatArray
    model: Model
    summary: Dict[str, Any]

def irfil(train: Dataset, test: Dataset, attribute_columns: Sequence[int] = ..., *,
          model: Literal["least-squares", "logistic", "softmax"] = "logistic", regression: bool = False,
          max_iterations: int = 100, l2: float = 0.0008, intercept: bool = False, tolerance: float = 1e-10,
          solver: Literal["auto", "newton", "lbfgs"] = "auto", iterations: int = 10,
          weighting: Literal["example", "class", "hybrid"] = "example", min_weight: float = 0.0,
          max_weight: float = ..., sigma: float = 1.0, label: Literal["private", "public"] = "private",
          threads: int = 0, quiet: bool = False) -> IrfilResult: ...

class AttackResult:
    examples: List[int]
    eta: FloatArray
    prior_accuracy: float
    model: Model
    summary: Dict[str, Any]

def attribute_inference(train: Dataset, test: Dataset, attribute: str, weights: Optional[npt.ArrayLike] = ...,
                        seed: int = 0, *, model: Literal["least-squares", "logistic", "softmax"] = "logistic",
                        regression: bool = False, max_iterations: int = 100, l2: float = 0.0008,
                        intercept: bool = False, tolerance: float = 1e-10,
                        solver: Literal["auto", "newton", "lbfgs"] = "auto", sigmas: Sequence[float] = ...,
                        trials: int = 20, white_box: bool = True, black_box: bool = True,
                        white_box_solver: Literal["update", "refit"] = "update", examples: int = 0,
                        compare_naive: int = 0, groups: int = 10, threads: int = 0,
                        quiet: bool = False) -> AttackResult: ...

class ReconstructionBounds:
    rdp_epsilon: float
    rdp_epsilon_at_data_norm: float
    rdp_mse_bound: float
    rdp_mse_bound_at_data_norm: float
    perfect_privacy_mse: float
    fil: PerExampleFil
    dfil_bound: FloatArray
    fil_bound: FloatArray
    share_dfil_bound_above_line: float
    share_fil_bound_above_line: float
    @property
    def max_row_norm(self) -> float: ...

def reconstruction_bounds(model: Model, train: Dataset, sigma: float = 1e-2, diameter: float = 1.0,
                          norm_bound: float = 1.0, threads: int = 0) -> ReconstructionBounds: ...
def output_perturbation_rdp_epsilon(n: int, l2: float, sigma: float, norm_bound: float = 1.0) -> float: ...
def rdp_mse_bound(epsilon: float, diameter: float = 1.0) -> float: ...

class GlmAttackResult:
    rows: List[int]
    mean_mse: FloatArray
    guarded: npt.NDArray[np.int32]
    linearised_mse: FloatArray
    mse_standard_error: FloatArray
    squared_bias: FloatArray  # ||E x_hat - x||^2 / d (docs/mathematics.md, section 6.7)
    squared_bias_standard_error: FloatArray
    jacobian_trace: FloatArray  # tr J_mu / d, 1 for an unbiased attacker
    jacobian_trace_standard_error: FloatArray
    total_guarded: int
    examples_all_guarded: int
    trials: int
    reconstruction_rows: List[int]
    reconstructions: FloatArray
    originals: FloatArray

def glm_reconstruction_attack(model: Model, train: Dataset, sigma: float = 1e-5, trials: int = 10000,
                              seed: int = 0, rows: Sequence[int] = ..., save_reconstructions: Sequence[int] = ...,
                              divisor_guard: float = 1e-300, threads: int = 0,
                              quiet: bool = False) -> GlmAttackResult: ...
