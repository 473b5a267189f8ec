"""Figure 3.2's dFIL decomposition (experiments/fim_dfil_decomposition.py): the unclipped norm it
recovers from a released norm inverts the smooth clip on both sides of the clipped norm's peak, and
a run whose released vectors are built from known norms decomposes into the clip factor and
gradient norm it was built from (closed forms of section 7.2 of docs/mathematics.md)."""
import json
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))
import fim_dfil_decomposition as decomposition  # noqa: E402
from filkit.torch.functional import soft_clip_factor  # noqa: E402

C = 10.0


@pytest.mark.parametrize("u", [0.3 * C, 0.9 * C, 1.2 * C, 2.0 * C, 5.0 * C])
def test_unclipped_norm_inverts_the_clip_on_its_side_of_the_peak(u):
    released = u * soft_clip_factor(u, C)
    assert decomposition.unclipped_norm(released, u, C) == pytest.approx(u, rel=1e-12)


@pytest.mark.parametrize("u", [1.2 * C, 2.0 * C])
def test_a_released_norm_above_c_has_a_root_on_each_side(u):
    released = u * soft_clip_factor(u, C)
    other = decomposition.unclipped_norm(released, 3 * C if u < 1.5489 * C else 0.5 * C, C)
    assert other * soft_clip_factor(other, C) == pytest.approx(released, rel=1e-10)
    assert abs(other - u) > 0.1 * C


def test_a_released_norm_below_c_has_none_beyond_the_peak():
    # u f(u) falls from its peak towards C and never below: no norm beyond the peak releases 0.9 C.
    with pytest.raises(ValueError, match="no unclipped norm on the side of 30"):
        decomposition.unclipped_norm(0.9 * C, 3 * C, C)


def test_a_run_decomposes_into_the_norms_it_was_built_from(tmp_path):
    # Three steps: g and c orthogonal, so ||g + c|| = hypot(||g||, ||c||) exactly.
    base, perturbation = [1.0, 1.5, 2.0], [0.0, 4.0, 30.0]
    unclipped = [math.hypot(b, p) for b, p in zip(base, perturbation)]
    released = [u * soft_clip_factor(u, C) for u in unclipped]
    run = {"seed": 7, "settings": {"clip_norm": C},
           "methods": [{"method": "fim", "mean_dfil": {"mean": 0.05}, "median_dfil": {"mean": 0.01},
                        "test_accuracy": {"mean": 0.9},
                        "vector_norms_per_step": [{"base": base, "perturbation": perturbation,
                                                   "released": released}]}]}
    path = tmp_path / "seed7-fim.json"
    path.write_text(json.dumps(run))
    row = decomposition.decompose(str(path))
    factors = [soft_clip_factor(u, C) for u in unclipped]
    proxy = math.sqrt(sum((f * b) ** 2 for f, b in zip(factors, base)) / 3)
    assert row["clip_factor"] == pytest.approx(sum(factors) / 3, rel=1e-12)
    assert row["gradient_norm_rms"] == pytest.approx(math.sqrt(sum(b * b for b in base) / 3), rel=1e-15)
    assert row["proxy"] == pytest.approx(proxy, rel=1e-12)
    assert row["mean_dfil_over_proxy"] == pytest.approx(0.05 / proxy, rel=1e-12)
    assert row["seed"] == 7
