"""filkit: how much a trained model leaks about each training example, by Fisher information loss.

The numerical work happens in the C++ library (module ``filkit._filkit``); this package re-exports
it. NumPy arrays go in and out; library errors raise filkit.Error subclasses with the library's
message: OptionError and DataError (both ValueError; OptionError.option is the keyword at fault),
ResourceError (OSError), MemoryLimitError (MemoryError) and NumericalError (ArithmeticError); other
failures ValueError or RuntimeError, and an argument of the wrong type a TypeError naming it.
Every function and class has a signature (``inspect.signature``, ``help``) whose keywords and
defaults come from the library's one declaration of each option, the same names as the command
line's flags (``--row-scaling`` is ``row_scaling=``). Results pickle.

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

import ast as _ast  # noqa: E402
import functools as _functools
import inspect as _inspect
import numbers as _numbers
import os as _os
import warnings as _warnings

try:
    from . import _filkit
    from ._filkit import *  # noqa: E402,F401,F403
    from ._filkit import __version__  # noqa: E402,F401
except ImportError as _missing:  # not built here: filkit.torch's accounting still works (docs/pytorch.md)
    _filkit = None
    _extension_error = _missing

    def __getattr__(name):
        raise AttributeError(f"filkit.{name}: filkit's compiled module filkit._filkit did not load ({_extension_error}); "
                             "install filkit with it (pip install . in a checkout, README.md). filkit.torch's "
                             "accounting and its RDP epsilon work without it.")


def keywords(function):
    """The keywords of a function that takes options as keywords, with their defaults (in order).

    ``function`` is a function's name ('measure', 'train_dpsgd', 'fit', ...) or 'run:<job>' for
    ``filkit.run(job)``'s options.
    """
    return [(name, default) for name, default, _ in _filkit._keywords(function)]


# ---------------------------------------------------------------------------------------------
# Signatures. pybind11's builtins have none that inspect can read: each public callable gets one,
# built from pybind11's own signature line (the explicit parameters, their types and defaults)
# and, for the options taken as keywords, from the library's declaration (filkit._keywords).

class _Default:
    """A default shown as pybind11 writes it (e.g. an empty NumPy array): its text."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _signature_line(builtin):
    """pybind11's signature line (its docstring's first), or None for overloaded functions."""
    doc = (builtin.__doc__ or "").lstrip()
    line, _, rest = doc.partition("\n")
    if "Overloaded function." in rest[:40] or "(" not in line:
        return None
    return line


def _parameters_of(builtin, drop_self=False):
    """(parameters, return annotation) parsed from pybind11's signature line, or None."""
    line = _signature_line(builtin)
    if line is None:
        return None
    head, _, returns = line.partition(" -> ")
    inner = head[head.index("(") + 1:head.rindex(")")]
    try:
        tree = _ast.parse("def f(" + inner + "): pass")
    except SyntaxError:
        return None
    args = tree.body[0].args
    parameters = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults):
        if drop_self and arg.arg == "self" and not parameters:
            continue
        parameters.append(_parameter(arg, default, _inspect.Parameter.POSITIONAL_OR_KEYWORD))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        parameters.append(_parameter(arg, default, _inspect.Parameter.KEYWORD_ONLY))
    has_kwargs = args.kwarg is not None
    return parameters, returns.strip() or None, has_kwargs


def _parameter(arg, default, kind):
    annotation = _ast.unparse(arg.annotation) if arg.annotation is not None else _inspect.Parameter.empty
    if default is None:
        value = _inspect.Parameter.empty
    else:
        text = _ast.unparse(default)
        try:
            value = _ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = _Default(text)
    return _inspect.Parameter(arg.arg, kind, default=value, annotation=annotation)


def _keyword_parameters(function, positional=()):
    """The declared keywords of `function` as parameters; those in `positional` may be positional."""
    parameters = []
    for name, default, annotation in _filkit._keywords(function):
        kind = (_inspect.Parameter.POSITIONAL_OR_KEYWORD if name in positional
                else _inspect.Parameter.KEYWORD_ONLY)
        parameters.append(_inspect.Parameter(name, kind, default=default, annotation=annotation))
    return parameters


def _signature(builtin, keyword_function=None, positional=(), drop_self=False):
    parsed = _parameters_of(builtin, drop_self=drop_self)
    if parsed is None:
        return None
    parameters, returns, has_kwargs = parsed
    if keyword_function is not None:
        # Positional keywords first (load_dataset's data), then the explicit ones, then the rest.
        declared = _keyword_parameters(keyword_function, positional)
        leading = [p for p in declared if p.kind is _inspect.Parameter.POSITIONAL_OR_KEYWORD]
        trailing = [p for p in declared if p.kind is _inspect.Parameter.KEYWORD_ONLY]
        parameters = leading + parameters + trailing
    elif has_kwargs:
        parameters.append(_inspect.Parameter("options", _inspect.Parameter.VAR_KEYWORD))
    return _inspect.Signature(parameters, return_annotation=returns or _inspect.Signature.empty)


# ---------------------------------------------------------------------------------------------
# Wrong types: pybind11 says "incompatible function arguments" without naming one; the wrappers
# find the argument whose value does not fit its annotation and name it.

def _fits(value, annotation):
    """Whether `value` can be what pybind11's annotation text says (a loose check: the C++ side
    converts; this only names the culprit of a conversion that failed)."""
    if not isinstance(annotation, str):
        return True
    text = annotation.replace("typing.", "")
    if text.startswith("Optional["):
        return value is None or _fits(value, text[len("Optional["):-1])
    if value is None:
        return False
    if text == "float":
        return isinstance(value, _numbers.Real) and not isinstance(value, bool)
    if text == "int":
        return isinstance(value, _numbers.Integral) and not isinstance(value, bool)
    if text == "bool":
        return isinstance(value, bool) or type(value).__name__ == "bool_"
    if text == "str":
        return isinstance(value, str)
    if text.startswith(("List[", "Tuple[", "Sequence[")):
        return not isinstance(value, (str, bytes)) and hasattr(value, "__iter__")
    if text.startswith("numpy.ndarray"):
        import numpy
        try:
            numpy.asarray(value, dtype=float)
            return True
        except (TypeError, ValueError):
            return False
    if text.startswith("filkit._filkit."):
        cls = getattr(_filkit, text[len("filkit._filkit."):].split("[")[0], None)
        return cls is None or isinstance(value, cls)
    return True


def _type_name(annotation):
    text = str(annotation).replace("filkit._filkit.", "filkit.")
    return {"float": "a number", "int": "an integer", "bool": "True or False", "str": "a string"}.get(text, text)


def _name_the_culprit(name, signature, bound, error):
    for parameter_name, value in bound.arguments.items():
        parameter = signature.parameters[parameter_name]
        if parameter.kind is _inspect.Parameter.VAR_KEYWORD:
            continue
        if not _fits(value, parameter.annotation):
            raise TypeError(f"{name}(): {parameter_name} = {value!r:.60}: expected {_type_name(parameter.annotation)}, "
                            f"not {type(value).__name__}") from None
    raise error


def _bind(name, signature, args, kwargs):
    """signature.bind, its TypeError naming the function and, for an unknown keyword, the nearest."""
    try:
        return signature.bind(*args, **kwargs)
    except TypeError as error:
        message = f"{name}(): {error}"
        unknown = [key for key in kwargs if key not in signature.parameters]
        if unknown and not any(p.kind is _inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
            import difflib
            near = difflib.get_close_matches(unknown[0], list(signature.parameters), n=3)
            message = f"{name}(): unknown option '{unknown[0]}'" + (f"; did you mean {' or '.join(near)}?" if near else "")
        raise TypeError(message) from None


def _translate_former_names(name, kwargs, signature):
    """A renamed option's former keyword (q=, scale=, pixel_scale=) as its name, where the function
    has the name and not the former one."""
    parameters = signature.parameters
    takes_any = any(p.kind is _inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    for former, new in _filkit._renamed_options().items():
        if former in kwargs and former not in parameters and (new in parameters or takes_any):
            if new in kwargs:
                raise TypeError(f"{name}(): {new} and {former} are the same option ({former} its former name): give one")
            _warnings.warn(f"{name}(): {former}= is now {new}=", DeprecationWarning, stacklevel=3)
            kwargs[new] = kwargs.pop(former)
    return kwargs


def _wrap_function(builtin, signature, name):
    @_functools.wraps(builtin)
    def wrapper(*args, **kwargs):
        kwargs = _translate_former_names(name, kwargs, signature)
        bound = _bind(name, signature, args, kwargs)
        # The library applies its own defaults: only what the caller gave is passed, by name.
        call_kwargs = {}
        for key, value in bound.arguments.items():
            if signature.parameters[key].kind is _inspect.Parameter.VAR_KEYWORD:
                call_kwargs.update(value)
            else:
                call_kwargs[key] = value
        try:
            return builtin(**call_kwargs)
        except TypeError as error:
            if "incompatible function arguments" not in str(error):
                raise
            _name_the_culprit(name, signature, bound, error)

    wrapper.__signature__ = signature
    wrapper.__wrapped__ = builtin
    return wrapper


def _wrap_constructor(cls, signature, name):
    original = cls.__init__

    def check_types(*args, **kwargs):
        return _bind(name, signature, args, kwargs)

    cls.__signature__ = signature

    def __init__(self, *args, **kwargs):
        kwargs = _translate_former_names(name, kwargs, signature)
        try:
            original(self, *args, **kwargs)
        except TypeError as error:
            if "incompatible constructor arguments" not in str(error) and "incompatible function arguments" not in str(error):
                raise
            _name_the_culprit(name, signature, check_types(*args, **kwargs), error)

    __init__.__signature__ = _inspect.Signature(
        [_inspect.Parameter("self", _inspect.Parameter.POSITIONAL_OR_KEYWORD)] + list(signature.parameters.values()),
        return_annotation=None)
    __init__.__doc__ = original.__doc__
    cls.__init__ = __init__


# Functions taking options as keywords: which declared keywords may also be given by position.
_KEYWORD_FUNCTIONS = {
    "load_dataset": ("data",),
    "preprocess": (),
    "fit": (),
    "measure": (),
    "train_dpsgd": (),
    "irfil": (),
    "attribute_inference": (),
}


def _install_signatures():
    namespace = globals()
    for name, value in list(vars(_filkit).items()):
        if name.startswith("_"):
            continue
        if type(value).__name__ == "builtin_function_or_method":
            keyword_function = name if name in _KEYWORD_FUNCTIONS else None
            signature = _signature(value, keyword_function, _KEYWORD_FUNCTIONS.get(name, ()))
            if signature is not None:
                namespace[name] = _wrap_function(value, signature, name)
        elif isinstance(value, type) and "__init__" in vars(value):
            keyword_function = name if name in _filkit._keyword_functions() else None
            signature = _signature(value.__init__, keyword_function, drop_self=True)
            if signature is not None:
                _wrap_constructor(value, signature, name)


if _filkit is not None:
    _install_signatures()
