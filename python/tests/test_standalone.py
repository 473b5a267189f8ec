"""filkit.torch without the compiled module (filkit/_standalone.py): the NumPy RDP accountant
(filkit/_rdp.py) against the C++ one, the reference, over a grid of sampling rates (q = 1 and tiny q
included), noise multipliers, steps and deltas; the stand-in's wording against the library's; and a
FilAccountant run whose epsilon and write_summary outputs, with the compiled module hidden, are the
compiled module's."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import filkit
from filkit import _rdp, _standalone

RATES = (1.0, 0.3, 0.1, 0.01, 0.004, 1e-4, 1e-6)
NOISE_MULTIPLIERS = (0.5, 0.8, 1.1, 2.0, 4.0, 10.0)
DELTAS = (0.1, 1e-5, 1e-10)
# One step's curve is a sum of terms near 1 whose logarithm is small (1e-4 at q = 0.01, sigma = 0.8,
# order 1.1), so the two sums' rounding shows in it: 5e-12 apart there, each within 6e-12 of a
# 40-digit quadrature of A_alpha (mpmath). At tiny q the curve is tiny (1e-16 at q = 1e-6,
# sigma = 10) and the rounding an absolute 1e-19 or so, a millionth of what eps can resolve. eps,
# what the accountant reports, agrees to 1e-12.
RDP_RELATIVE, RDP_ABSOLUTE = 1e-11, 1e-18


def relative(a, b):
    return abs(a - b) / abs(a) if a != b else 0.0


@pytest.mark.parametrize("sampling", ["poisson", "uniform"])
@pytest.mark.parametrize("orders", [None, "tf-privacy"])
def test_the_numpy_rdp_accountant_is_the_cpp_one_to_1e12(sampling, orders):
    worst = 0.0
    for q in RATES:
        for sigma in NOISE_MULTIPLIERS:
            ours, reference = _rdp.RdpAccountant(orders, sampling), filkit.RdpAccountant(orders, sampling)
            assert ours.orders == reference.orders
            for steps in (1, 999, 99000):  # 1, 1000 and 100000 steps in all
                ours.step(sigma, q, steps)
                reference.step(sigma, q, steps)
                np.testing.assert_allclose(ours.rdp, reference.rdp, rtol=RDP_RELATIVE, atol=RDP_ABSOLUTE,
                                           err_msg=f"q = {q}, sigma = {sigma}")
                for delta in DELTAS:
                    eps, spent = ours.epsilon(delta), ours.get_privacy_spent(delta)
                    expected = reference.get_privacy_spent(delta)
                    worst = max(worst, relative(reference.epsilon(delta), eps))
                    assert relative(reference.epsilon(delta), eps) <= 1e-12, (q, sigma, steps, delta)
                    assert (spent.optimal_order, spent.status, spent.warning) == \
                        (expected.optimal_order, expected.status, expected.warning), (q, sigma, steps, delta)
                    # log delta(eps) = min (alpha - 1) (T r(alpha) - eps + ...) - log alpha: 1e-12 of that term.
                    scale = max(1.0, (spent.optimal_order - 1) * eps)
                    assert abs(math.log(reference.delta(eps)) - math.log(ours.delta(eps))) <= 1e-12 * scale, \
                        (q, sigma, steps, delta)
    assert worst > 0 or sampling == "uniform"  # compared, not skipped


def test_the_numpy_accountant_takes_what_the_cpp_one_takes_and_refuses_the_same():
    assert _rdp.rdp_orders("tf") == filkit.rdp_orders("tf-privacy")
    assert _rdp.RdpAccountant().epsilon(1e-5) == 0.0 == filkit.RdpAccountant().epsilon(1e-5)
    accountant = _rdp.RdpAccountant([2.0, 5.5])
    accountant.step(1.0, 0.5, 3)
    reference = filkit.RdpAccountant([2.0, 5.5])
    reference.step(1.0, 0.5, 3)
    np.testing.assert_allclose(accountant.rdp, reference.rdp, rtol=1e-13)
    for make in (_rdp.RdpAccountant, filkit.RdpAccountant):
        for bad, name in (((0.0, 0.1), "noise_multiplier"), ((1.0, 1.5), "sample_rate"), ((math.nan, 0.1), "noise_multiplier")):
            with pytest.raises(ValueError, match=name):
                make().step(*bad)
        with pytest.raises(ValueError, match="delta"):
            make().epsilon(1.0)
        with pytest.raises(ValueError, match="orders"):
            make([1.0])


def test_the_stand_in_says_what_the_library_says():
    for sampling in ("poisson", "uniform"):
        assert _standalone.neighbouring_relation(sampling) == filkit.neighbouring_relation(sampling)
    for sampler in ("uniform", "poisson", "shuffle"):
        assert _standalone.sampling_note(sampler) == filkit.sampling_note(sampler)
    assert _standalone.EFFECTIVE_NOISE_MULTIPLIER_REASON == filkit.EFFECTIVE_NOISE_MULTIPLIER_REASON
    assert _standalone.__version__ == filkit.__version__
    for eps in (0.0, 1e-3, 0.7, 30.0):
        assert _standalone.rdp_mse_bound(eps) == pytest.approx(filkit.rdp_mse_bound(eps), rel=1e-15)
    with pytest.raises(ImportError, match="PLD accountant.*compiled module"):
        _standalone.PldAccountant("poisson")


RUN = """
import json, sys
import numpy as np, torch
import filkit
from filkit.torch import FilAccountant
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2)).double()
x, y = torch.rand(20, 4, dtype=torch.double), torch.arange(20) % 2
results = {"compiled": filkit._filkit is not None}
for sampling in ("poisson", "uniform"):
    accountant = FilAccountant(model, loss_fn=torch.nn.functional.cross_entropy, clip_norm=1.0,
                               noise_multiplier=1.1, sample_rate=0.25, seed=3, sampling=sampling)
    for step in range(4):
        ids = torch.arange(5 * step, 5 * step + 5)
        accountant.step(x[ids], y[ids], ids)
    accountant.write_summary(f"{sys.argv[1]}-{sampling}.json", f"{sys.argv[1]}-{sampling}.csv", test_accuracy=0.5)
    results[sampling] = {"epsilon": accountant.epsilon(1e-5), "rdp": accountant.rdp()}
print(json.dumps(results))
"""


def package_without_the_module(folder):
    """A copy of the built package (links to its files) without filkit._filkit."""
    built = os.path.dirname(filkit.__file__)
    os.makedirs(folder / "filkit")
    for name in os.listdir(built):
        if not name.startswith("_filkit") and name != "__pycache__":
            os.symlink(os.path.join(built, name), folder / "filkit" / name)
    return str(folder)


def numbers_agree(a, b, path=""):
    """JSON values equal, numbers to 1e-12 relative (the two accountants' last bits differ)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), path
        for key in a:
            numbers_agree(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for k, (u, v) in enumerate(zip(a, b)):
            numbers_agree(u, v, f"{path}[{k}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300), path
    else:
        assert a == b, path


def test_without_the_compiled_module_epsilon_and_the_summary_are_the_compiled_ones(tmp_path):
    pytest.importorskip("torch")
    results = {}
    for name, path in (("compiled", os.path.dirname(os.path.dirname(filkit.__file__))),
                       ("standalone", package_without_the_module(tmp_path / "package"))):
        out = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / name)], capture_output=True,
                             text=True, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": path})
        assert out.returncode == 0, out.stderr
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["compiled"]["compiled"] and not results["standalone"]["compiled"]
    for sampling in ("poisson", "uniform"):
        ours, reference = results["standalone"][sampling], results["compiled"][sampling]
        assert ours["epsilon"] == pytest.approx(reference["epsilon"], rel=1e-12)
        np.testing.assert_allclose(ours["rdp"], reference["rdp"], rtol=1e-12)
        summaries = [json.loads((tmp_path / f"{name}-{sampling}.json").read_text())
                     for name in ("compiled", "standalone")]
        for summary in summaries:
            summary["seconds"] = None  # the time the accounting took
        numbers_agree(*summaries)
        assert summaries[0]["snapshots"][-1]["epsilon"] > 0
        assert (tmp_path / f"compiled-{sampling}.csv").read_text() == \
            (tmp_path / f"standalone-{sampling}.csv").read_text()
