"""The crossing accuracies of experiments/dpsgd_networks_grid.py and their bootstrap over runs, on tiny
synthetic inputs computed by hand (no training: the script's functions only)."""
import importlib.util
import math
import os

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "dpsgd_networks_grid.py")
spec = importlib.util.spec_from_file_location("dpsgd_networks_grid", SCRIPT)
grid = importlib.util.module_from_spec(spec)
spec.loader.exec_module(grid)


def test_crossing_is_the_highest_accuracy_whose_bound_is_still_at_or_above_the_line():
    assert grid.crossing_accuracy([0.5, 0.7, 0.9], [3.0, 1.2, 0.4]) == 0.7
    assert grid.crossing_accuracy([0.5, 0.7, 0.9], [3.0, 1.0, 0.4]) == 0.7  # on the line counts
    assert grid.crossing_accuracy([0.9, 0.5], [2.0, 5.0]) == 0.9  # not the largest bound
    assert math.isnan(grid.crossing_accuracy([0.5, 0.7], [0.9, 0.2]))


def test_dfil_bounds_of_a_resample_use_the_mean_trace_of_its_runs():
    # Two runs of four examples, d_z = 2: resample (1, 1) has mean traces 2 2 4 5, dFIL sqrt(t / 2).
    traces = np.array([[1.0, 4.0, 2.0, 8.0], [3.0, 0.0, 6.0, 2.0]])
    max_bound, median_bound = grid.dfil_bounds(traces, 2, np.array([[1.0, 1.0], [2.0, 0.0]]))
    assert max_bound[0] == pytest.approx(2.0 / 5.0)  # 1 / (5 / 2)
    assert median_bound[0] == pytest.approx(1.0 / ((1.0 + math.sqrt(2.0)) / 2.0) ** 2)  # dFIL 1, 1, sqrt 2, sqrt 2.5
    assert max_bound[1] == pytest.approx(2.0 / 8.0)  # run 0 twice


def synthetic_points():
    """Two settings of two runs, one example each, d_z = 1 (bound = 1 / mean trace); RDP bound 0.5 and 2.
    A: accuracies 0.80, 0.90; traces 0.5, 0.5 -> dFIL bound 2 in every resample.
    B: accuracies 0.95, 0.95; traces 0.5, 2.0 -> bound 2 (run 0 twice), 0.5 (run 1 twice), 0.8 (both)."""
    return [{"accuracy_per_run": [0.80, 0.90], "traces": np.array([[0.5], [0.5]]), "private_dims": 1,
             "rdp_bound": 2.0},
            {"accuracy_per_run": [0.95, 0.95], "traces": np.array([[0.5], [2.0]]), "private_dims": 1,
             "rdp_bound": 0.5}]


def test_crossing_replicates_follow_each_resample_of_the_runs():
    counts = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    crossings = grid.crossing_replicates(synthetic_points(), counts)
    # (2, 0): B's bound 2 >= 1 -> B's 0.95. (0, 2): only A -> A's run 1, 0.90. (1, 1): only A -> mean 0.85.
    np.testing.assert_allclose(crossings["max_dfil_bound"], [0.95, 0.90, 0.85])
    np.testing.assert_allclose(crossings["median_dfil_bound"], [0.95, 0.90, 0.85])
    # RDP: only A is at or above the line, whatever the runs: A's accuracy in each resample.
    np.testing.assert_allclose(crossings["rdp_bound"], [0.80, 0.90, 0.85])
    np.testing.assert_allclose(crossings["gap_max_dfil_minus_rdp"], [0.15, 0.0, 0.0], atol=1e-15)


def test_crossings_with_uncertainty_give_the_estimate_and_a_percentile_interval():
    result = grid.crossings_with_uncertainty(synthetic_points(), 4000, 0.9, 3)
    # The run average: B's bound 0.8 < 1, so the max-dFIL crossing is A's mean accuracy.
    assert result["max_dfil_bound"]["accuracy"] == pytest.approx(0.85)
    assert result["rdp_bound"]["accuracy"] == pytest.approx(0.85)
    assert result["gap_max_dfil_minus_rdp"]["accuracy"] == pytest.approx(0.0)
    # Resamples (2, 0), (0, 2), (1, 1) have probabilities 1/4, 1/4, 1/2: crossings 0.95, 0.90, 0.85, so
    # the 5% and 95% quantiles are 0.85 and 0.95.
    assert result["max_dfil_bound"]["interval"] == pytest.approx([0.85, 0.95])
    assert result["max_dfil_bound"]["replicates_without_crossing"] == 0
    low, high = result["gap_max_dfil_minus_rdp"]["interval"]
    assert low == pytest.approx(0.0) and high == pytest.approx(0.15)


def test_identical_runs_give_zero_width_intervals_and_one_run_none():
    points = [{"accuracy_per_run": [0.7, 0.7, 0.7], "traces": np.array([[0.2, 0.4]] * 3), "private_dims": 1,
               "rdp_bound": 0.3},
              {"accuracy_per_run": [0.9, 0.9, 0.9], "traces": np.array([[4.0, 0.1]] * 3), "private_dims": 1,
               "rdp_bound": 0.1}]
    result = grid.crossings_with_uncertainty(points, 200, 0.95, 0)
    assert result["max_dfil_bound"]["accuracy"] == pytest.approx(0.7)  # B's max trace 4: bound 0.25
    assert result["max_dfil_bound"]["interval"] == pytest.approx([0.7, 0.7])
    assert result["median_dfil_bound"]["accuracy"] == pytest.approx(0.7)  # B's median dFIL (2 + sqrt 0.1) / 2: bound 0.75
    assert result["rdp_bound"]["accuracy"] is None  # no point reaches the line
    assert result["rdp_bound"]["interval"] is None
    assert result["rdp_bound"]["replicates_without_crossing"] == 200
    one_run = [dict(p, accuracy_per_run=p["accuracy_per_run"][:1], traces=p["traces"][:1]) for p in points]
    single = grid.crossings_with_uncertainty(one_run, 200, 0.95, 0)
    assert single["max_dfil_bound"]["accuracy"] == pytest.approx(0.7)
    assert single["max_dfil_bound"]["interval"] is None


def test_per_run_traces_are_read_from_the_table_by_step_in_example_order(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("step,epoch,index,label,fisher_trace,fisher_trace_run0,fisher_trace_run1\n"
                     "5,1,1,0,2,1,3\n5,1,0,1,5,4,6\n9,2,0,1,7,7,7\n9,2,1,0,1,0.5,1.5\n")
    traces = grid.load_per_run_traces(str(table), 2)
    np.testing.assert_array_equal(traces[5], [[4, 1], [6, 3]])
    np.testing.assert_array_equal(traces[9], [[7, 0.5], [7, 1.5]])
    np.testing.assert_array_equal(grid.load_per_run_traces(str(table), 1)[9], [[7, 1]])
    with pytest.raises(SystemExit, match="fisher_trace_run2"):
        grid.load_per_run_traces(str(table), 3)
