"""filkit: how much a trained model leaks about each training example, by Fisher information loss.

The numerical work happens in the C++ library (module ``filkit._filkit``); this package re-exports
it. NumPy arrays go in and out; library errors raise filkit.Error subclasses with the library's
message: OptionError and DataError (both ValueError; OptionError.option is the keyword at fault),
ResourceError (OSError), MemoryLimitError (MemoryError) and NumericalError (ArithmeticError).

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

from ._filkit import *  # noqa: F401,F403
from ._filkit import __version__  # noqa: F401
