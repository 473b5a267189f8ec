"""`filkit dpsgd --run K --run-dir DIR` trains run K of --runs R alone, and `filkit dpsgd --run-dir DIR`
(no --run) combines the R run files into the outputs of the one `--runs R` call: the same bytes in the
per-example and models CSVs and the same summary but for timings and the run directory, whatever the
order the runs were trained in. Combining refuses, naming the file, a run not trained, a run of other
settings and the same run twice (a file copied over another run's). A closed-form GLM and the ConvNet
(LibTorch), at a tiny size: seconds."""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(not os.environ.get("FILKIT_BINARY"), reason="FILKIT_BINARY not set")

# Three runs, a snapshot before the last step, at most a few hundred rows.
GLM = ["--train-size", "300", "--test-size", "100", "--steps", "20", "--batch-size", "50", "--runs", "3",
       "--report-epochs", "1", "--bootstrap-resamples", "200"]
CNN = ["--model", "cnn", "--train-size", "120", "--test-size", "60", "--steps", "4", "--batch-size", "40", "--runs",
       "3", "--report-epochs", "1", "--bootstrap-resamples", "200"]


def filkit(flags, check=True):
    done = subprocess.run([os.environ["FILKIT_BINARY"], "dpsgd", "--threads", "1", "--quiet"] + flags,
                          capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def without_timings(summary):
    """The summary without what may differ: every "seconds" (wall times), and the settings naming the run
    directory."""
    if isinstance(summary, dict):
        return {key: without_timings(value) for key, value in summary.items() if key != "seconds"}
    if isinstance(summary, list):
        return [without_timings(value) for value in summary]
    return summary


def outputs(tmp_path, name, flags):
    paths = [tmp_path / f"{name}.csv", tmp_path / f"{name}-models.csv", tmp_path / f"{name}.json"]
    filkit(flags + ["--out", str(paths[0]), "--models-out", str(paths[1]), "--json", str(paths[2])])
    summary = json.loads(paths[2].read_text())
    assert summary["settings"].pop("run_dir") == (flags[flags.index("--run-dir") + 1] if "--run-dir" in flags else "")
    return paths[0].read_bytes(), paths[1].read_bytes(), without_timings(summary)


@pytest.mark.parametrize("flags", [GLM, CNN], ids=["logistic", "cnn"])
def test_runs_trained_apart_combine_into_the_call_of_every_run(tmp_path, flags):
    whole = outputs(tmp_path, "whole", flags)
    runs = tmp_path / "runs"
    runs.mkdir()
    for run in (2, 0, 1):  # any order
        done = filkit(flags + ["--run", str(run), "--run-dir", str(runs)])
        assert done.stdout == ""  # --quiet
    assert sorted(os.listdir(runs)) == ["run0.fkrun", "run1.fkrun", "run2.fkrun"]
    combined = outputs(tmp_path, "combined", flags + ["--run-dir", str(runs)])
    assert combined[0] == whole[0]  # the per-example table, byte for byte
    assert combined[1] == whole[1]  # each run's final parameters
    assert combined[2] == whole[2]
    # The bootstrap summarises the runs: another level combines the same files without training again.
    level = flags + ["--confidence-level", "0.9", "--run-dir", str(runs)]
    assert outputs(tmp_path, "level", level)[2]["bootstrap"]["level"] == 0.9


def test_bad_combines_are_refused_naming_the_file(tmp_path):
    runs, other = tmp_path / "runs", tmp_path / "other"
    runs.mkdir()
    other.mkdir()
    for run in (0, 1):
        filkit(GLM + ["--run", str(run), "--run-dir", str(runs)])
    summary = str(tmp_path / "s.json")

    def refused(flags, *messages):
        done = filkit(flags, check=False)
        assert done.returncode != 0 and not os.path.exists(summary), done.stderr
        for message in messages:
            assert message in done.stderr, done.stderr

    missing = str(runs / "run2.fkrun")
    refused(GLM + ["--run-dir", str(runs), "--json", summary],
            f"run file {missing} does not exist: run 2 of --runs 3 is not trained yet (--run 2 writes it)")
    # Run 2 of other settings (sigma 2), in run 2's place.
    filkit(GLM + ["--noise-multiplier", "2", "--run", "2", "--run-dir", str(other)])
    shutil.copy(other / "run2.fkrun", missing)
    refused(GLM + ["--run-dir", str(runs), "--json", summary],
            f"run file {missing} belongs to a different job (setting 'noise_multiplier' was 2.0, now 1.0)")
    # Other data: a test subset of 101 rows.
    refused(GLM[:2] + ["--test-size", "101"] + GLM[4:] + ["--run-dir", str(runs), "--json", summary],
            f"run file {runs / 'run0.fkrun'} belongs to a different job (the data differ)")
    # The same run twice: run 1's file copied over run 2's.
    shutil.copy(runs / "run1.fkrun", missing)
    refused(GLM + ["--run-dir", str(runs), "--json", summary],
            f"run file {missing} belongs to a different job (it holds run 1, not run 2")
    # A damaged file.
    (runs / "run2.fkrun").write_bytes((runs / "run0.fkrun").read_bytes()[:-5])
    refused(GLM + ["--run-dir", str(runs), "--json", summary], f"run file {missing}: the header announces")
    # The options around: a run outside the call, --run without a directory, outputs beside a run, and
    # resuming a combination that trains nothing.
    refused(GLM + ["--run", "3", "--run-dir", str(runs)], "--run = 3: must be a run of the call: 0 .. --runs - 1 = 2")
    refused(GLM + ["--run", "0"], "--run = 0: writes its run file into --run-dir, not given")
    refused(GLM + ["--run", "0", "--run-dir", str(runs), "--json", summary], "writes only its run file into --run-dir")
    refused(GLM + ["--run-dir", str(runs), "--stop-after", "3"], "trains nothing")


def test_a_run_resumes_from_its_checkpoint_and_its_file_is_no_resume_file(tmp_path):
    whole = outputs(tmp_path, "whole", GLM)
    runs = tmp_path / "runs"
    runs.mkdir()
    checkpoint = str(tmp_path / "run1.state")
    filkit(GLM + ["--run", "1", "--run-dir", str(runs), "--checkpoint", checkpoint, "--stop-after", "7"])
    assert os.path.exists(checkpoint) and not os.path.exists(runs / "run1.fkrun")
    filkit(GLM + ["--run", "1", "--run-dir", str(runs), "--checkpoint", checkpoint])
    assert os.path.exists(runs / "run1.fkrun") and not os.path.exists(checkpoint)
    for run in (0, 2):
        filkit(GLM + ["--run", str(run), "--run-dir", str(runs)])
    assert outputs(tmp_path, "combined", GLM + ["--run-dir", str(runs)]) == whole
    done = filkit(GLM + ["--checkpoint", str(runs / "run1.fkrun"), "--json", str(tmp_path / "s.json")], check=False)
    assert done.returncode != 0
    assert "it is the run file of run 1 (filkit dpsgd --run), not a resume file" in done.stderr, done.stderr
