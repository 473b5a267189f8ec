"""filkit: how much a trained model leaks about each training example, by Fisher information loss.

The numerical work happens in the C++ library (module ``filkit._filkit``); this package re-exports
it. NumPy arrays go in and out; library errors raise ValueError (bad input) or RuntimeError
(numerical failure) with the library's message.

Example::

    import filkit
    result, summary = filkit.measure()              # the default job
    print(summary["eta"]["mean"], result.fil.eta[:5])

    split = filkit.load_dataset("mnist", classes=[0, 1])
    split, record = filkit.preprocess(split, scale_pixels=True, row_scaling="global-max", pca=20)
    model = filkit.fit(split.train, model="logistic", l2=8e-4)
    fil = filkit.FisherInformationLoss(model, split.train, sigma=1.0)
    eta = fil.per_example().eta
"""

from ._blas import choose_openblas_kernels as _choose_openblas_kernels

_choose_openblas_kernels()  # before the extension, NumPy or PyTorch load OpenBLAS (filkit/_blas.py)

try:
    from ._filkit import *  # noqa: E402,F401,F403
    from ._filkit import __version__  # noqa: E402,F401
except ImportError as _missing:  # not built here: filkit.torch's accounting still works (docs/pytorch.md)
    _extension_error = _missing

    def __getattr__(name):
        raise AttributeError(f"filkit.{name}: filkit's compiled module filkit._filkit did not load ({_extension_error}); "
                             "build it with scripts/setup.sh and put build/python on PYTHONPATH. filkit.torch's "
                             "per-example accounting works without it.")
