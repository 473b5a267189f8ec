"""Every command from the CLI and from Python: the same options, the same defaults, the same JSON.

Each job runs once as `filkit <job>` and once as filkit.run(<job>) with the same (few) options;
every option left out takes its default, so equal "settings" in the two summaries mean the two
front ends share every default. The options given only keep the runs short or supply what a job
cannot do without (the accountant's mechanism, the report's input)."""
import json
import os
import re
import subprocess

import pytest

import filkit

BINARY = os.environ.get("FILKIT_BINARY")


def cli_flags(options):
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            flags += [flag, ",".join(str(v) for v in value)]
        else:
            flags += [flag, str(value)]
    return flags


def without_timings(value):
    """The summary without wall-clock times (the only numbers that differ between two runs)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "seconds" and not k.endswith("_seconds")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def run_cli(job, options, tmp_path):
    out = tmp_path / f"{job}-cli.json"
    completed = subprocess.run([BINARY, job, "--quiet", "--json", str(out)] + cli_flags(options),
                               capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    return json.loads(out.read_text())


CASES = {
    "measure": {},
    "irfil": {"iterations": 1},
    "bound": {"train_size": 2001},  # the default is the whole of MNIST 0 vs 1: same code, 10 s a run
    "reconstruct": {"trials": 2, "rows": [0, 7], "train_size": 2001},
    "dpsgd": {"steps": 10},
    "public-training": {"classes": [0, 1], "train_size": 400, "test_size": 100, "pretrain_steps": 20,
                        "batch_size": 50, "steps": 2, "gradient_steps": 2, "gradient_decay": 0,
                        "gradient_min_steps": 1, "gradient_batch_size": 50, "gradient_hidden": [8, 6]},
    "accountant": {"sample_rate": 0.01, "noise_multiplier": 1.1, "steps": 100},
    "learned-attack": {"methods": ["sgd"], "train_shadow_models": 20, "target_shadow_models": 5,
                       "attacker_hidden": [8], "attacker_epochs": 1},
}


LIBTORCH_JOBS = {"public-training", "learned-attack"}


def assert_close(a, b, where, rel=1e-9):
    """Equal structures, numbers equal to `rel` relative (exactly equal for everything else)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_close(a[key], b[key], f"{where}.{key}", rel)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{k}]", rel)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=rel, abs=1e-300), where
    else:
        assert a == b, where


@pytest.mark.skipif(BINARY is None, reason="FILKIT_BINARY not set")
@pytest.mark.parametrize("job", sorted(CASES))
def test_cli_and_python_record_identical_settings(job, tmp_path):
    options = CASES[job]
    try:
        from_cli = run_cli(job, options, tmp_path)
    except AssertionError as error:
        if "not found" in str(error) or "setup.sh" in str(error):
            pytest.skip(f"dataset not installed: {error}")
        raise
    from_python = filkit.run(job, **options)["summary"]
    assert from_python["settings"] == from_cli["settings"]
    assert from_python["command"] == from_cli["command"] == job
    # The numbers agree too (timings aside): bit for bit, but for the jobs whose numbers come from
    # LibTorch's parallel kernels, whose last bits may differ from run to run.
    if job in LIBTORCH_JOBS:
        assert_close(without_timings(from_python), without_timings(from_cli), job)
    else:
        assert without_timings(from_python) == without_timings(from_cli)


@pytest.mark.skipif(BINARY is None, reason="FILKIT_BINARY not set")
def test_attack_and_report_from_both_front_ends(tmp_path):
    measure = tmp_path / "measure.json"
    table = tmp_path / "measure.csv"
    filkit.run("measure", json=str(measure), out=str(table), pca=5)
    report = {"input": [str(measure)], "table": [str(table)], "report": str(tmp_path / "r"), "images": False}
    assert run_cli("report", report, tmp_path)["settings"] == filkit.run("report", **report)["summary"]["settings"]
    try:
        attack = {"data": "income-regression", "intercept": True, "sigmas": [1e-2], "trials": 1, "examples": 50}
        from_cli = run_cli("attack", attack, tmp_path)
    except AssertionError as error:
        pytest.skip(f"income data not exported: {error}")
    assert filkit.run("attack", **attack)["summary"]["settings"] == from_cli["settings"]


@pytest.mark.skipif(BINARY is None, reason="FILKIT_BINARY not set")
def test_every_cli_command_is_a_python_job():
    # Both read the job registry (include/filkit/jobs/registry.hpp); the command line names its
    # commands when given none it knows.
    completed = subprocess.run([BINARY, "no-such-command"], capture_output=True, text=True)
    listed = re.search(r"the commands: (.*); filkit --help", completed.stderr)
    assert listed, completed.stderr
    assert sorted(filkit.jobs()) == sorted(listed.group(1).split(", "))


def test_every_job_runs_here_from_both_front_ends():
    # A newly registered job is compared between the command line and Python: here, or in
    # test_attack_and_report_from_both_front_ends.
    assert set(filkit.jobs()) == set(CASES) | {"attack", "report"}


def test_every_job_has_its_keywords_and_defaults():
    for job in filkit.jobs():
        keywords = [name for name, _ in filkit.keywords("run:" + job)]
        assert set(filkit.defaults(job)) <= set(keywords), job
        assert {"out", "json", "threads", "quiet"} <= set(keywords), job


def test_defaults_are_the_libraries():
    defaults = filkit.defaults("measure")
    assert defaults["l2"] == 8e-4 and defaults["classes"] == "auto" and defaults["sigma"] == 1.0
    assert filkit.defaults("dpsgd")["momentum"] == 0.5
    public_training = filkit.defaults("public-training")
    assert public_training["public_fraction"] == 0.5 and public_training["lambda"] == 1e3
    assert filkit.defaults("fim") == filkit.defaults("public-training")  # its former name, still accepted
    assert filkit.defaults("learned-attack")["train_shadow_models"] == 9500
    assert filkit.defaults("learned-attack")["attacker_hidden"] == [512, 256]
    with pytest.raises(TypeError, match="unknown option 'sigm'"):
        filkit.run("measure", sigm=1.0)
    with pytest.raises(ValueError, match="unknown job"):
        filkit.run("measures")


def test_numbers_out_of_range_are_refused_with_the_option_and_range():
    with pytest.raises(ValueError, match=r"threads = 100000: expected 0\.\."):
        filkit.run("measure", threads=100000)
    with pytest.raises(ValueError, match=r"classes = '4294967296': expected an integer in -2147483648"):
        filkit.run("measure", classes=[4294967296, 4294967297])
    with pytest.raises(ValueError, match="groups = '100000000000000000000'"):
        filkit.run("attack", groups=10**20)
    with pytest.raises(TypeError, match="steps: expected an integer, not a float"):
        filkit.run("dpsgd", steps=1e300)
    with pytest.raises(ValueError, match="max_memory = '2X'"):
        filkit.run("measure", max_memory="2X")


def test_max_memory_is_an_option_of_every_data_job_recorded_as_spelled():
    for job in ["measure", "irfil", "attack", "bound", "reconstruct", "dpsgd"]:
        assert filkit.defaults(job)["max_memory"].endswith(("M", "G"))
    with pytest.raises(MemoryError, match="more than max_memory = 1K"):
        filkit.run("measure", max_memory="1K")
    with pytest.raises(filkit.MemoryLimitError, match="more than max_memory = 1000"):
        filkit.load_dataset("fashion-mnist", max_memory=1000)


def test_library_errors_name_the_keyword_and_have_their_kind():
    """Option checks raise filkit.OptionError (a ValueError) naming the keyword as typed, never a
    struct field (FilOptions.sigma); the other kinds are OSError, MemoryError, ArithmeticError."""
    cases = [("measure", dict(sigma=-1.0), "sigma", "sigma = -1: must be > 0"),
             ("dpsgd", dict(clip_norm=0.0), "clip_norm", "clip_norm = 0: must be > 0"),
             ("dpsgd", dict(momentum=1.0), "momentum", r"momentum = 1: must lie in \[0, 1\)"),
             ("dpsgd", dict(stop_after=3), "stop_after", r"stop_after = 3: needs checkpoint \("),
             ("bound", dict(norm_bound=0.0), "norm_bound", "norm_bound = 0: must be > 0"),
             ("public-training", dict(gradient_hidden=[0]), "gradient_hidden", "gradient_hidden = 0: must be >= 1"),
             ("learned-attack", dict(fixed_size=0), "fixed_size", "fixed_size = 0: must be >= 1"),
             ("report", dict(input=["x.json"], report="r", reload_timeout=0.0), "reload_timeout",
              "reload_timeout = 0: must be > 0")]
    for job, options, keyword, message in cases:
        with pytest.raises(filkit.OptionError, match="^" + message) as error:
            filkit.run(job, **options)
        assert error.value.option == keyword and isinstance(error.value, ValueError)
        assert "Options." not in str(error.value) and "--" not in str(error.value)
    assert issubclass(filkit.DataError, ValueError) and issubclass(filkit.ResourceError, OSError)
    assert issubclass(filkit.MemoryLimitError, MemoryError) and issubclass(filkit.NumericalError, ArithmeticError)
    assert all(issubclass(kind, filkit.Error) for kind in (filkit.OptionError, filkit.DataError, filkit.ResourceError,
                                                           filkit.MemoryLimitError, filkit.NumericalError))
