"""Type hints of the filkit module (the C++ bindings in filkit._filkit)."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

FloatArray = npt.NDArray[np.float64]

class AttributeColumns:
    name: str
    columns: List[int]
    levels: List[str]
    dropped_level: str
    categorical: bool

class Dataset:
    def __init__(self, X: npt.ArrayLike, y: npt.ArrayLike, source: str = "numpy") -> None: ...
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
    def attribute(self, name: str) -> AttributeColumns: ...
    def select_rows(self, rows: Sequence[int]) -> "Dataset": ...

class DatasetSplit:
    def __init__(self, train: Dataset, test: Dataset) -> None: ...
    train: Dataset
    test: Dataset

def load_dataset(data: str = "fashion-mnist", classes: Sequence[int] = ..., target: str = "",
                 regression: bool = False, test_fraction: float = 0.2, seed: int = 0,
                 missing: str = "drop") -> DatasetSplit: ...
def builtin_dataset_names() -> List[str]: ...
def preprocess(split: DatasetSplit, scale_pixels: bool = False, row_scaling: str = "none", pca: int = 0,
               scale_after_pca: bool = False) -> Tuple[DatasetSplit, Dict[str, Any]]: ...

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

def fit(data: Dataset, model: str = "logistic", l2: float = 8e-4, intercept: bool = False,
        regression: bool = False, weights: Optional[npt.ArrayLike] = ..., tolerance: float = 1e-10,
        max_iterations: int = 100) -> Model: ...
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
    def __init__(self, model: Model, data: Dataset, weights: Optional[npt.ArrayLike] = ..., sigma: float = 1.0,
                 label: str = "private", structured: bool = True) -> None: ...
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

def measure(**options: Any) -> Tuple[MeasureResult, Dict[str, Any]]: ...
