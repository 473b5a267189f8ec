"""The experiments' grids shared among K processes (experiments/grid_ranks.py): with --dry-run each
process lists its units; for K = 1, 2, 3 the lists of ranks 0..K-1 together are the grid's units,
each once, in every grid script, whether the rank comes from --rank/--ranks, Open MPI's environment
or a Slurm array's. Nothing is trained, but in the tests of grids written by one process and by
several (FILKIT_BINARY: tiny grids, seconds)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

EXPERIMENTS = os.path.join(os.path.dirname(__file__), "..", "..", "experiments")
# (script and its arguments): the GLM grid, the ConvNet grid (one run a setting, and three), the thesis'
# figure 3.1 and 3.2 runs.
GRIDS = [
    ["dpsgd_grid.py", "--quick"],
    ["dpsgd_grid.py", "--steps", "100,300", "--sigma", "1,2,5", "--step-size", "0.1", "--clip", "1,4"],
    ["dpsgd_networks_grid.py", "--settings", "1:1:0.1,2:1:0.1,5:8:0.1,0.5:8:0.03,1:4:0.01"],
    ["dpsgd_networks_grid.py", "--settings", "1:1:0.1,2:1:0.1", "--runs", "3"],  # (setting, run) units
    ["fim_tables.py", "fig31"],
    ["fim_tables.py", "fig32"],
]


def units(arguments, env=None, rank_flags=()):
    done = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, arguments[0])] + arguments[1:] +
                          ["--dry-run"] + list(rank_flags), capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), cwd=EXPERIMENTS, check=True)
    return [line for line in done.stdout.splitlines() if line]


@pytest.mark.parametrize("arguments", GRIDS, ids=lambda a: " ".join(a))
def test_ranks_together_take_every_unit_once(arguments):
    whole = units(arguments)
    assert len(whole) == len(set(whole)) > 3
    for ranks in (1, 2, 3):
        shares = [units(arguments, rank_flags=("--rank", str(rank), "--ranks", str(ranks))) for rank in range(ranks)]
        taken = [unit for share in shares for unit in share]
        assert sorted(taken) == sorted(whole), f"{ranks} ranks"
        assert max(map(len, shares)) - min(map(len, shares)) <= 1  # round robin


def test_rank_from_open_mpi_or_slurm():
    arguments = GRIDS[1]
    flags = units(arguments, rank_flags=("--rank", "1", "--ranks", "3"))
    assert units(arguments, env={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"}) == flags
    assert units(arguments, env={"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4",
                                 "SLURM_ARRAY_TASK_COUNT": "3"}) == flags


def test_a_rank_outside_the_count_is_refused():
    done = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "dpsgd_grid.py"), "--quick", "--dry-run",
                           "--rank", "3", "--ranks", "3"], capture_output=True, text=True)
    assert done.returncode != 0 and "--rank 3 --ranks 3" in done.stderr


@pytest.mark.skipif(not os.environ.get("FILKIT_BINARY"), reason="FILKIT_BINARY not set")
def test_two_ranks_write_the_grid_one_process_writes(tmp_path):
    """dpsgd_grid.py's 4-setting grid on MNIST 0 vs 1, run by one process and by ranks 0 and 1 of 2
    (one after the other, each skipping the other's settings): the same settings' summaries and the
    same grid.csv but for the seconds each run took."""
    def grid(out, rank_flags):
        for flags in rank_flags:
            subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "dpsgd_grid.py"), "--quick", "--classes", "0,1",
                            "--runs", "1", "--binary", os.environ["FILKIT_BINARY"]] + flags,
                           env=dict(os.environ, FILKIT_OUT=str(out)), capture_output=True, text=True, check=True)
        folder = out / "dpsgd_grid" / "mnist_01"
        with open(folder / "grid.csv") as f:
            rows = [line.split(",") for line in f.read().splitlines()]
        seconds = rows[0].index("seconds")
        return [row[:seconds] + row[seconds + 1:] for row in rows], sorted(os.listdir(folder))

    alone = grid(tmp_path / "one", [[]])
    shared = grid(tmp_path / "two", [["--rank", "0", "--ranks", "2"], ["--rank", "1", "--ranks", "2"]])
    assert alone == shared
    assert len(alone[0]) == 5  # the header and the 4 settings


def without_wall_times(text, root):
    """A grid's results.json or a setting's summary as data, without the wall times (every "seconds" and
    "wall_seconds") and with the output folder's path (in the recorded commands) made relative."""
    def strip(value):
        if isinstance(value, dict):
            return {key: strip(item) for key, item in value.items() if key not in ("seconds", "wall_seconds")}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value
    return strip(json.loads(text.replace(str(root), "ROOT")))


@pytest.mark.skipif(not os.environ.get("FILKIT_BINARY") or shutil.which("gnuplot") is None,
                    reason="FILKIT_BINARY not set, or no gnuplot")
def test_ranks_share_the_runs_of_the_networks_grid(tmp_path):
    """dpsgd_networks_grid.py's tiny grid of 2 settings x 2 runs on the ConvNet, its (setting, run) units
    run by K = 1, 2 and 3 processes (one after the other, each training its share of the runs and
    combining the settings whose runs are all there): the same tables (results.csv but for the wall
    times, every setting's per-example table), summaries and crossings, and each setting's table and
    summary those of the setting's own `filkit dpsgd --runs 2` call."""
    import filkit
    flags = ["--datasets", "mnist", "--settings", "1:8:0.1,5:8:0.1", "--train-size", "120", "--test-size", "60",
             "--batch-size", "40", "--steps", "3", "--epochs", "", "--runs", "2", "--bootstrap-resamples", "50",
             "--jobs", "1", "--binary", os.environ["FILKIT_BINARY"],
             "--python-path", os.path.dirname(os.path.dirname(os.path.abspath(filkit.__file__)))]

    def grid(ranks):
        root = tmp_path / f"ranks{ranks}"
        for rank in range(ranks):
            done = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "dpsgd_networks_grid.py")] + flags +
                                  ["--rank", str(rank), "--ranks", str(ranks)], env=dict(os.environ, FILKIT_OUT=str(root)),
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            assert ("no tables yet" in done.stderr) == (rank < ranks - 1), done.stderr  # the last makes them
        folder = root / "dpsgd_networks_grid" / "mnist_n120_B40_T3_seed0"
        with open(folder / "results.csv") as f:
            rows = [line.split(",") for line in f.read().splitlines()]
        wall = rows[0].index("wall_seconds")
        outputs = {"results.csv": [row[:wall] + row[wall + 1:] for row in rows],
                   "results.json": without_wall_times((folder / "results.json").read_text(), root)}
        for name in ("sigma1_C8_rho0.1", "sigma5_C8_rho0.1"):
            outputs[name + ".csv"] = (folder / (name + ".csv")).read_bytes()
            outputs[name + ".json"] = without_wall_times((folder / (name + ".json")).read_text(), root)
            runs = sorted(f for f in os.listdir(folder / (name + ".runs")) if f.endswith(".fkrun"))
            assert runs == ["run0.fkrun", "run1.fkrun"]
        return outputs, folder

    one, folder = grid(1)
    assert len(one["results.csv"]) == 3  # the header and a row a setting (the final step)
    assert grid(2)[0] == one
    assert grid(3)[0] == one
    # A setting's outputs are those of its own call of every run.
    command = json.loads((folder / "results.json").read_text())["runs"][0]["command"]
    run_dir = command.index("--run-dir")
    whole = [argument.replace("sigma1_C8_rho0.1.", "whole.") for argument in command[:run_dir] + command[run_dir + 2:]]
    subprocess.run(whole, check=True, capture_output=True)
    assert (folder / "whole.csv").read_bytes() == one["sigma1_C8_rho0.1.csv"]
    summary = without_wall_times((folder / "whole.json").read_text(), folder.parent.parent.parent)
    summary["settings"]["run_dir"] = one["sigma1_C8_rho0.1.json"]["settings"]["run_dir"]
    assert summary == one["sigma1_C8_rho0.1.json"]
