"""The Python surface (issue 30): one vocabulary with the command line, signatures inspect can
read, defaults from the library's one declaration (and the type stubs agreeing with them), every
job taking threads and quiet and showing progress, dfil an array, results that pickle, wrong types
named, and tables whose integer columns stay integer."""
import ast
import copy
import inspect
import os
import pickle

import numpy as np
import pytest

import filkit

STUBS = os.path.join(os.path.dirname(filkit.__file__), "__init__.pyi")


from test_core import synthetic  # noqa: E402  (pytest puts this directory on the path)


def split():
    return filkit.DatasetSplit(synthetic(seed=1), synthetic(n=30, seed=2))


# ---------------------------------------------------------------------------------------------
# Signatures and defaults.

PUBLIC_FUNCTIONS = ["load_dataset", "preprocess", "fit", "measure", "train_dpsgd", "irfil", "attribute_inference",
                    "reconstruction_bounds", "glm_reconstruction_attack", "run", "defaults", "predict", "accuracy"]


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_every_function_has_a_signature(name):
    signature = inspect.signature(getattr(filkit, name))
    assert signature.parameters, name


def test_classes_have_signatures():
    assert list(inspect.signature(filkit.Dataset).parameters)[:2] == ["X", "y"]
    parameters = inspect.signature(filkit.FisherInformationLoss).parameters
    assert parameters["sigma"].default == 1.0 and parameters["label"].default == "private"


@pytest.mark.parametrize("function, job", [("measure", "measure")])
def test_keyword_defaults_are_the_jobs_defaults(function, job):
    """The signature's defaults are the library's Options{} (filkit.defaults reads settings_json of
    a default-constructed options struct; the signature is built from visit_fields)."""
    parameters = inspect.signature(getattr(filkit, function)).parameters
    for name, default in filkit.defaults(job).items():
        assert parameters[name].default == default, name
    assert parameters["threads"].default == 0 and parameters["quiet"].default is False


def test_train_dpsgd_defaults_are_dpsgds_without_the_data_options():
    parameters = inspect.signature(filkit.train_dpsgd).parameters
    dpsgd = filkit.defaults("dpsgd")
    # dpsgd's seed is its own (training), the loader's is the split's: the rest of the data options
    # are for the datasets train_dpsgd is given.
    data_options = ({name for name, _ in filkit.keywords("load_dataset")} - {"seed"}) | {
        "pca", "row_scaling", "scale_pixels", "standardize"}
    # The job's run files (one run trained alone, or the runs' files combined) are the job's files, as
    # its outputs are: train_dpsgd returns its result.
    run_files = {"run", "run_dir"}
    for name, default in dpsgd.items():
        if name in data_options | run_files:
            assert name not in parameters, name
        else:
            assert parameters[name].default == default, name


def test_one_vocabulary_with_the_command_line():
    # preprocess and the jobs name the same options alike (the CLI's --row-scaling, --scale-pixels).
    preprocess = inspect.signature(filkit.preprocess).parameters
    measure = inspect.signature(filkit.measure).parameters
    for name in ("row_scaling", "scale_pixels", "standardize", "pca"):
        assert name in preprocess and name in measure, name
    assert "save_reconstructions" in inspect.signature(filkit.glm_reconstruction_attack).parameters
    assert "arch" in inspect.signature(filkit.Network).parameters
    # The accountant's rate is sample_rate, as PrivacyAccountant.step's; q= still works.
    assert "sample_rate" in filkit.defaults("accountant") and "q" not in filkit.defaults("accountant")


def stub_defaults():
    """{function: {parameter: default}} of the type stubs' top-level functions."""
    tree = ast.parse(open(STUBS).read())
    stubs = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            values = {}
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                values[arg.arg] = default
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                if default is not None:
                    values[arg.arg] = default
            stubs[node.name] = values
    return stubs


def test_the_type_stubs_defaults_are_the_librarys():
    """Where the stubs spell a default, it is the one the running module has (issue 29)."""
    checked = 0
    for function, defaults in stub_defaults().items():
        if not hasattr(filkit, function):
            continue
        try:
            parameters = inspect.signature(getattr(filkit, function)).parameters
        except (TypeError, ValueError):
            continue
        for name, node in defaults.items():
            if isinstance(node, ast.Constant) and node.value is Ellipsis:
                continue  # the stub leaves it unspelled
            assert name in parameters, f"{function}: the stub's {name} is no parameter"
            value = ast.literal_eval(node)
            actual = parameters[name].default
            if isinstance(actual, float) or isinstance(value, float):
                assert actual == pytest.approx(value, rel=1e-15), f"{function}({name}=...)"
            else:
                assert actual == value, f"{function}({name}=...)"
            checked += 1
    assert checked > 20


def test_the_type_stubs_keywords_are_generated_from_the_declaration():
    """scripts/write-stubs.py --check: every keyword function's stub lists the declared keywords
    with their types and defaults (issue 29: no hand-written field list)."""
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "scripts", "write-stubs.py")
    result = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_keyword_annotations_come_from_the_declaration():
    parameters = inspect.signature(filkit.measure).parameters
    assert parameters["l2"].annotation == "float" and parameters["intercept"].annotation == "bool"
    assert parameters["model"].annotation == 'Literal["least-squares", "logistic", "softmax", "auto"] | None'
    assert inspect.signature(filkit.fit).parameters["model"].annotation == 'Literal["least-squares", "logistic", "softmax"]'
    assert parameters["pca"].annotation == 'int | Literal["auto"] | None'
    assert parameters["subset"].annotation == "Sequence[str]"
    assert parameters["max_memory"].annotation == "int | str"
    assert parameters["out"].annotation == "str | os.PathLike[str] | None"
    assert parameters["threads"].annotation == "int"


# ---------------------------------------------------------------------------------------------
# Wrong types name the keyword.

def test_wrong_types_raise_type_error_naming_the_keyword():
    data = synthetic()
    with pytest.raises(TypeError, match="sigma"):
        filkit.reconstruction_bounds(filkit.fit(data, intercept=True), data, sigma="big")
    with pytest.raises(TypeError, match="quiet"):
        filkit.measure(quiet=[True])
    with pytest.raises(TypeError, match="threads"):
        filkit.fit(data, threads=1.5)
    with pytest.raises(TypeError, match="out"):
        filkit.run("accountant", sample_rate=0.01, noise_multiplier=1.0, steps=10, out=5)
    with pytest.raises(TypeError, match="hidden"):
        filkit.Network("mlp", 4, 2, hidden="wide")
    with pytest.raises(TypeError, match="l2"):
        filkit.fit(data, l2=[1])
    with pytest.raises(TypeError, match="unknown option 'nosie_multiplier'"):
        filkit.run("dpsgd", nosie_multiplier=1.0)


def test_former_names_still_work():
    with pytest.warns(DeprecationWarning, match="q= is now sample_rate="):
        a = filkit.run("accountant", q=0.01, noise_multiplier=1.1, steps=100, quiet=True)
    b = filkit.run("accountant", sample_rate=0.01, noise_multiplier=1.1, steps=100, quiet=True)
    assert a["summary"]["eps"] == b["summary"]["eps"]


# ---------------------------------------------------------------------------------------------
# threads, quiet, progress.

def test_every_job_takes_threads_and_quiet_and_shows_progress(capfd):
    s = split()
    data = s.train
    model = filkit.fit(data, intercept=True, threads=1, quiet=True)
    calls = [
        lambda quiet: filkit.train_dpsgd(s.train, s.test, steps=20, batch_size=10, threads=1, quiet=quiet),
        lambda quiet: filkit.irfil(s.train, s.test, iterations=1, threads=1, quiet=quiet),
        lambda quiet: filkit.glm_reconstruction_attack(model, data, trials=3, threads=1, quiet=quiet),
        lambda quiet: filkit.run("accountant", sample_rate=0.01, noise_multiplier=1.0, steps=10, threads=1, quiet=quiet),
    ]
    for call in calls:
        call(True)
        assert capfd.readouterr().err == ""
        call(False)
        err = capfd.readouterr().err
        # Not a terminal: whole lines, no carriage returns, with the elapsed time.
        if err:
            assert "\r" not in err and "done in" in err, err
    filkit.train_dpsgd(s.train, s.test, steps=20, batch_size=10, threads=1)  # quiet defaults to False
    assert "done in" in capfd.readouterr().err


def test_threads_apply_to_the_call_only():
    import filkit._filkit as core  # noqa: F401
    data = synthetic()
    a = filkit.fit(data, threads=1)
    b = filkit.fit(data, threads=3)
    np.testing.assert_array_equal(a.weights, b.weights)


# ---------------------------------------------------------------------------------------------
# dfil arrays, pickling, tables.

def test_dfil_is_an_array_everywhere():
    s = split()
    result, _ = filkit.train_dpsgd(s.train, s.test, steps=20, batch_size=10, quiet=True)
    snapshot = result.final_snapshot
    assert isinstance(snapshot.dfil, np.ndarray) and snapshot.dfil.shape == (s.train.n,)
    np.testing.assert_allclose(snapshot.dfil, np.sqrt(snapshot.fisher_trace / result.private_dims), rtol=1e-15)
    np.testing.assert_array_equal(result.dfil, snapshot.dfil)
    assert isinstance(snapshot.eta, np.ndarray)
    fil = filkit.FisherInformationLoss(filkit.fit(s.train), s.train).per_example()
    assert isinstance(fil.dfil, np.ndarray)


def equal_values(x, y, name, depth):
    if isinstance(x, np.ndarray):
        np.testing.assert_array_equal(x, y, err_msg=name)
    elif type(x).__module__.startswith("filkit") and depth < 4:
        equal_attributes(x, y, depth + 1)
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), name
        for u, v in zip(x, y):
            equal_values(u, v, name, depth)
    elif isinstance(x, float) and np.isnan(x):
        assert np.isnan(y), name
    else:
        assert x == y, name


def equal_attributes(a, b, depth=0):
    """Every public attribute of a and b equal (arrays by value, bound objects recursively)."""
    for name in dir(a):
        if name.startswith("_"):
            continue
        x, y = getattr(a, name), getattr(b, name)
        if not callable(x):
            equal_values(x, y, name, depth)


def test_results_pickle():
    s = split()
    model = filkit.fit(s.train, intercept=True)
    measured, _ = filkit.measure(data=filkit_npz(), quiet=True, pca=0)
    trained, _ = filkit.train_dpsgd(s.train, s.test, steps=20, batch_size=10, runs=2, quiet=True)
    irfil = filkit.irfil(s.train, s.test, iterations=1, quiet=True)
    bounds = filkit.reconstruction_bounds(model, s.train)
    attack = filkit.glm_reconstruction_attack(model, s.train, trials=3, save_reconstructions=[0], quiet=True)
    for result in (s, model, measured, trained, irfil, bounds, attack, filkit.FisherInformationLoss(model, s.train).per_example()):
        again = pickle.loads(pickle.dumps(result))
        assert type(again) is type(result)
        equal_attributes(result, again)
        equal_attributes(result, copy.deepcopy(result))
    assert pickle.loads(pickle.dumps(irfil)).summary == irfil.summary
    attack = filkit.attribute_inference(*categorical_split(), "colour", model="least-squares", regression=True,
                                        intercept=True, trials=2, sigmas=[0.1], quiet=True)
    again = pickle.loads(pickle.dumps(attack))
    equal_attributes(attack, again)
    assert again.summary == attack.summary
    # An unpickled model predicts as the original.
    np.testing.assert_array_equal(filkit.predict(pickle.loads(pickle.dumps(model)), s.test.X),
                                  filkit.predict(model, s.test.X))


def categorical_split():
    """A table with a categorical attribute (colour), as load_dataset reads a CSV."""
    import tempfile
    rng = np.random.default_rng(5)
    path = os.path.join(tempfile.mkdtemp(), "colours.csv")
    with open(path, "w") as f:
        f.write("x1,x2,colour,y\n")
        for i in range(90):
            a, b = rng.normal(size=2)
            f.write(f"{a},{b},{['red', 'green', 'blue'][i % 3]},{a + 0.5 * b + 0.1 * rng.normal()}\n")
    split = filkit.load_dataset(path, target="y", regression=True, seed=1)
    return split.train, split.test


_NPZ = {}


def filkit_npz():
    if "path" not in _NPZ:
        import tempfile
        data = synthetic(n=100, d=6, seed=4)
        path = os.path.join(tempfile.mkdtemp(), "small.npz")
        np.savez(path, X=data.X, y=data.y)
        _NPZ["path"] = path
    return _NPZ["path"]


def test_tables_keep_integer_columns_integer():
    out = filkit.run("dpsgd", data=filkit_npz(), steps=10, batch_size=10, quiet=True)
    columns = out["table"]["columns"]
    for name in ("step", "index", "label"):
        assert columns[name].dtype == np.int64, name
    assert columns["dfil"].dtype == np.float64
    assert list(columns) == out["table"]["header"]
    np.testing.assert_array_equal(columns["index"], out["table"]["rows"][:, out["table"]["header"].index("index")])
