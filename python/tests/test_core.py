"""filkit's Python bindings: data in and out as NumPy, FIL against an independent NumPy
computation, errors as Python exceptions, and the same numbers as the command line."""
import csv
import os
import subprocess
import tempfile

import numpy as np
import pytest

import filkit


def synthetic(n=120, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / (1.5 * np.sqrt(d))
    y = (X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0).astype(float)
    return filkit.Dataset(X, y)


def test_dataset_round_trips_numpy_arrays():
    data = synthetic()
    assert data.n == 120 and data.d == 4
    assert isinstance(data.X, np.ndarray) and data.X.shape == (120, 4)
    assert data.X.flags["C_CONTIGUOUS"]


def test_fil_matches_a_numpy_dense_computation():
    data = synthetic()
    model = filkit.fit(data, model="logistic", l2=1e-2, intercept=True, tolerance=1e-12)
    fil = filkit.FisherInformationLoss(model, data, sigma=0.5, label="private")
    per_example = fil.per_example()
    # Independent NumPy computation of J_i = -H^{-1} B_i for logistic regression with intercept.
    X = np.hstack([np.ones((data.n, 1)), data.X])
    w = model.weights[:, 0]
    s = 1 / (1 + np.exp(-X @ w))
    H = (X * (s * (1 - s))[:, None]).T @ X + data.n * 1e-2 * np.eye(5)
    for i in [0, 17, 119]:
        c, r = s[i] * (1 - s[i]), s[i] - data.y[i]
        B = np.zeros((5, 5))
        for j in range(4):
            B[:, j] = c * w[j + 1] * X[i]
            B[j + 1, j] += r
        B[:, 4] = -X[i]
        J = -np.linalg.solve(H, B)
        assert per_example.eta[i] == pytest.approx(np.linalg.norm(J, 2) / 0.5, rel=1e-9)
        assert per_example.dfil[i] == pytest.approx(np.linalg.norm(J) / np.sqrt(5) / 0.5, rel=1e-9)
        np.testing.assert_allclose(fil.jacobian(i), J, rtol=1e-9, atol=1e-12)
    whole = fil.subset()
    assert whole.examples == data.n and whole.eta > per_example.eta.max()


def test_file_errors_are_data_and_resource_errors(tmp_path):
    # A malformed file raises filkit.DataError (a ValueError) naming the file and line; one that
    # cannot be opened filkit.ResourceError (an OSError); each a filkit.Error.
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("f0,y\n0.5,0\n0.25,1,7\n")
    with pytest.raises(filkit.DataError, match="ragged.csv' line 3") as raised:
        filkit.load_dataset(str(ragged), target="y")
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, filkit.Error)
    with pytest.raises(filkit.ResourceError, match="cannot open") as raised:
        filkit.load_dataset(str(tmp_path / "missing.npz"))
    assert isinstance(raised.value, OSError)


def test_library_errors_become_python_exceptions():
    data = synthetic()
    # Bad data raise filkit.DataError (a ValueError), a failed computation filkit.NumericalError.
    with pytest.raises(filkit.DataError, match="outside the domain"):
        filkit.fit(filkit.Dataset(data.X, data.y + 2))
    with pytest.raises(filkit.DataError, match="rows"):
        filkit.Dataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(filkit.DataError, match="not finite"):
        filkit.Dataset(np.full((2, 2), np.nan), np.zeros(2))
    collinear = np.hstack([data.X[:, :1], data.X[:, :1]])
    with pytest.raises(filkit.NumericalError, match="option l2"):
        filkit.fit(filkit.Dataset(collinear, data.y), model="least-squares", l2=0.0)
    with pytest.raises(TypeError, match="unknown option 'sigm'"):
        filkit.measure(sigm=1.0)


def test_npz_images_load_channel_major_and_standardize_per_channel(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, size=(30, 4, 5, 3)).astype(np.float64)  # (n, H, W, C), as TensorFlow stores images
    path = str(tmp_path / "images.npz")
    np.savez(path, X=X, y=np.arange(30) % 2)
    split = filkit.load_dataset(path, test_fraction=0.0)
    assert split.train.image == (3, 4, 5)
    np.testing.assert_array_equal(split.train.X.reshape(30, 3, 4, 5), X.transpose(0, 3, 1, 2))
    out, record = filkit.preprocess(split, standardize="channel")
    channels = out.train.X.reshape(30, 3, 20)
    np.testing.assert_allclose(channels.mean(axis=(0, 2)), 0.0, atol=1e-12)
    np.testing.assert_allclose(channels.std(axis=(0, 2)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(record["channel_means"], X.mean(axis=(0, 1, 2)), rtol=1e-12)
    assert record["input_image"] == [3, 4, 5] and out.train.image == (3, 4, 5)
    with pytest.raises(ValueError, match="image_layout"):
        np.savez(path, X=X[:, :3, :3, :], y=np.arange(30) % 2)  # (n, 3, 3, 3): either layout
        filkit.load_dataset(path)
    assert filkit.load_dataset(path, image_layout="nchw").train.image == (3, 3, 3)
    assert synthetic().image is None


def test_output_perturbation_is_seeded():
    model = filkit.fit(synthetic(), l2=1e-2)
    a, b = filkit.perturb_output(model, 0.1, 7), filkit.perturb_output(model, 0.1, 7)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert not np.array_equal(a.weights, filkit.perturb_output(model, 0.1, 8).weights)


def builtin_available(name):
    try:
        filkit.load_dataset(name, classes=[0, 1])
        return True
    except (ValueError, RuntimeError):
        return False


@pytest.mark.skipif(not os.environ.get("FILKIT_BINARY"), reason="FILKIT_BINARY not set")
def test_python_and_cli_give_identical_numbers_for_the_default_job():
    if not builtin_available("fashion-mnist"):
        pytest.skip("Fashion-MNIST not installed")
    result, summary = filkit.measure()
    with tempfile.TemporaryDirectory() as directory:
        table = os.path.join(directory, "fil.csv")
        subprocess.run([os.environ["FILKIT_BINARY"], "measure", "--quiet", "--out", table], check=True)
        with open(table) as handle:
            rows = list(csv.DictReader(handle))
    assert len(rows) == result.data.train.n == summary["n"] == 12000
    cli_eta = np.array([float(row["eta"]) for row in rows])
    cli_dfil = np.array([float(row["dfil"]) for row in rows])
    np.testing.assert_array_equal(cli_eta, result.fil.eta)  # 17 significant digits round-trip exactly
    np.testing.assert_array_equal(cli_dfil, result.fil.dfil)
    assert summary["settings"]["model"] == "logistic" and summary["d"] == 20
