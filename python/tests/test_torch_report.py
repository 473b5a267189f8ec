"""filkit.torch's write_summary gives the page `filkit dpsgd --report` gives (issue 49): the most and
least exposed training images (never-sampled examples left out and counted), the settings table
with B, T, C, sigma, the clipping, the sampling and the accountant, and outputs checked first and
written as a set. The page is rendered in headless Chromium: every image loads, no text over text."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import filkit
from filkit.torch import FilAccountant

N, SIDE, SAMPLED = 40, 6, 30  # examples 30..39 are never sampled


def trained_accountant(epochs=3, seed=0):
    """A small ConvNet's accountant over `epochs` passes of examples 0..29 in batches of 10, a
    snapshot (record) after each; the images are (N, 1, 6, 6), labels id % 2."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Tanh(), nn.Flatten(), nn.Linear(2 * 4 * 4, 2)).double()
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(N, 1, SIDE, SIDE, generator=generator, dtype=torch.double)
    labels = torch.arange(N) % 2
    accountant = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.25,
                               num_examples=N)
    for epoch in range(epochs):
        for batch in torch.randperm(SAMPLED, generator=generator).split(10):
            accountant.step(images[batch], labels[batch], batch)
        accountant.record(test_accuracy=0.5 + 0.1 * epoch)
    return accountant, images, labels


@pytest.fixture(scope="module")
def trained():
    return trained_accountant()


def test_the_summary_carries_the_images_class_names_and_the_settings_of_the_table(trained, tmp_path):
    accountant, images, _ = trained
    accountant.write_summary(tmp_path / "fil.json", tmp_path / "fil.csv", images=images, class_names=["even", "odd"])
    summary = json.loads((tmp_path / "fil.json").read_text())
    assert summary["images"]["file"] == "fil.images.npy" and summary["images"]["shape"] == [1, SIDE, SIDE]
    stored = np.load(tmp_path / "fil.images.npy")
    assert stored.shape == (N, 1, SIDE, SIDE) and stored.dtype == np.float32
    np.testing.assert_array_equal(stored, images.numpy().astype(np.float32))
    assert summary["class_names"] == ["even", "odd"]
    settings = summary["settings"]
    assert settings["batch_size"] == 10.0 and settings["steps"] == 9  # B = q n expected, T
    assert (settings["clip_norm"], settings["noise_multiplier"]) == (1.0, 1.0)
    assert (settings["clipping"], settings["sampling"], settings["accountant"]) == ("smooth", "shuffle", "rdp")
    assert {3, 6, 9} <= {s["step"] for s in summary["snapshots"]}  # each record(): figures of several points
    # Without images, no file beside the summary and no "images".
    accountant.write_summary(tmp_path / "plain.json", tmp_path / "plain.csv")
    assert "images" not in json.loads((tmp_path / "plain.json").read_text())
    assert not (tmp_path / "plain.images.npy").exists()


def test_the_summary_follows_the_dpsgd_schema_by_an_independent_validator_and_departures_are_caught(trained, tmp_path):
    """The dpsgd summary schema (schemas/summary/dpsgd.schema.json) checked by python3-jsonschema, not by
    the valijson the writer uses; and the writer's own check refuses a departure under the test suite's
    FILKIT_STRICT_SUMMARY_SCHEMA."""
    jsonschema = pytest.importorskip("jsonschema")
    accountant, images, _ = trained
    accountant.write_summary(tmp_path / "fil.json", tmp_path / "fil.csv", images=images, class_names=["even", "odd"])
    summary = json.loads((tmp_path / "fil.json").read_text())
    schema = json.loads(filkit._filkit._summary_schema("dpsgd"))
    jsonschema.Draft7Validator(schema).validate(summary)
    summary["snapshots"][0]["epsilon"] = "large"  # a departure: wrong type
    assert not jsonschema.Draft7Validator(schema).is_valid(summary)
    os.environ["FILKIT_STRICT_SUMMARY_SCHEMA"], before = "1", os.environ.get("FILKIT_STRICT_SUMMARY_SCHEMA")
    try:
        with pytest.raises(RuntimeError, match="/snapshots/0/epsilon"):
            filkit._filkit._check_written_summary(json.dumps(summary))
    finally:
        if before is None:
            del os.environ["FILKIT_STRICT_SUMMARY_SCHEMA"]
        else:
            os.environ["FILKIT_STRICT_SUMMARY_SCHEMA"] = before


def test_the_compiled_and_the_numpy_statistics_agree(trained):
    values = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0])
    compiled = filkit._filkit._summarize(values)
    assert compiled == {"count": 6, "mean": values.mean(), "std": pytest.approx(values.std(ddof=1), rel=1e-15),
                        "min": 1.0, "median": 3.5, "max": 9.0}


def as_float32(x):
    return x.numpy().astype(np.float32)


@pytest.mark.parametrize("given, stored_as", [
    (lambda x: x.reshape(N, SIDE * SIDE).numpy(), as_float32),  # flat rows of a square grey image
    (lambda x: x.reshape(N, SIDE, SIDE), as_float32),  # (n, H, W)
    (lambda x: x.repeat(1, 3, 1, 1).permute(0, 2, 3, 1).numpy(), lambda x: as_float32(x.repeat(1, 3, 1, 1))),  # NHWC
    (lambda x: (x * 255).to(torch.uint8), lambda x: (x * 255).to(torch.uint8).numpy()),  # uint8 stays uint8
])
def test_images_of_any_layout_are_stored_as_n_c_h_w(trained, tmp_path, given, stored_as):
    accountant, images, _ = trained
    accountant.write_summary(tmp_path / "fil.json", tmp_path / "fil.csv", images=given(images))
    expected = stored_as(images)
    assert json.loads((tmp_path / "fil.json").read_text())["images"]["shape"] == list(expected.shape[1:])
    stored = np.load(tmp_path / "fil.images.npy")
    assert stored.dtype == expected.dtype
    np.testing.assert_array_equal(stored, expected)


def test_images_that_are_not_the_n_examples_or_not_finite_are_refused_before_anything_is_written(trained, tmp_path):
    accountant, images, _ = trained
    json_path, csv_path = tmp_path / "fil.json", tmp_path / "fil.csv"
    with pytest.raises(ValueError, match="rows of 35 values are not a square grey image"):
        accountant.write_summary(json_path, csv_path, images=np.zeros((N, 35)))
    with pytest.raises(ValueError, match=f"expected the {N} training examples"):
        accountant.write_summary(json_path, csv_path, images=images[:-1])
    broken = images.clone()
    broken[7, 0, 2, 2] = float("nan")
    with pytest.raises(ValueError, match=r"example\(s\) \[7\] hold a value that is NaN"):
        accountant.write_summary(json_path, csv_path, images=broken)
    with pytest.raises(ValueError, match="must be a file"):
        accountant.write_summary("-", csv_path, images=images)
    assert os.listdir(tmp_path) == []


def test_outputs_are_checked_first_and_written_together_or_not_at_all(tmp_path):
    accountant, images, _ = trained_accountant(epochs=1)
    json_path, csv_path = tmp_path / "fil.json", tmp_path / "fil.csv"
    json_path.write_text("old\n")
    # One file named twice, or the images' file named as the table.
    with pytest.raises(ValueError, match="the same file"):
        accountant.write_summary(json_path, json_path)
    with pytest.raises(ValueError, match="the same file"):
        accountant.write_summary(json_path, tmp_path / "fil.images.npy", images=images)
    with pytest.raises(ValueError, match="is a directory"):
        accountant.write_summary(json_path, tmp_path)
    # A table that cannot be written (a device that is full) leaves the summary as it was.
    if os.path.exists("/dev/full"):
        with pytest.raises(OSError, match="/dev/full"):
            accountant.write_summary(json_path, "/dev/full", images=images)
    # Labels outside the class names, and a trace that is not finite, are refused naming the examples.
    with pytest.raises(ValueError, match=r"2 names, but example\(s\) \[3\] have labels \[5.0\]"):
        accountant.write_summary(json_path, csv_path, labels=[5.0 if i == 3 else i % 2 for i in range(N)],
                                 class_names=["even", "odd"])
    last = accountant.snapshots[-1]
    saved = last["trace"].clone()
    try:
        last["trace"][[4, 11]] = float("nan")
        with pytest.raises(ArithmeticError, match=r"example\(s\) 4, 11 at step 3 is not a finite number"):
            accountant.write_summary(json_path, csv_path)
    finally:
        last["trace"] = saved
    assert json_path.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["fil.json"]
    accountant.write_summary(json_path, csv_path, images=images)
    assert sorted(os.listdir(tmp_path)) == ["fil.csv", "fil.images.npy", "fil.json"]


def chromium_dom(html, profile):
    """The page after load, as headless Chromium leaves it (the page's check script records on
    <body> how many images it has, how many failed to decode, the overlapping text boxes)."""
    command = ["timeout", "120", "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--window-size=1280,900", "--virtual-time-budget=5000", "--dump-dom",
               f"file://{html}"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_attribute(dom, name):
    found = re.search(name + r'="([^"]*)"', dom)
    assert found, f"no {name} on <body>: the page's check script did not run"
    return found.group(1)


def test_the_report_of_write_summary_shows_the_cli_pages_figures_and_renders_whole(trained, tmp_path):
    accountant, images, _ = trained
    json_path, csv_path, report = tmp_path / "fil.json", tmp_path / "fil.csv", tmp_path / "report"
    accountant.write_summary(json_path, csv_path, images=images, class_names=["even", "odd"])
    filkit.run("report", input=[str(json_path)], table=[str(csv_path)], report=str(report), quiet=True)
    html = (report / "report.html").read_text()
    figures = sorted(f for f in os.listdir(report) if f.endswith(".png"))
    for figure in ("1-dpsgd-highest-dfil-images.png", "1-dpsgd-lowest-dfil-images.png", "1-dpsgd-dfil-epsilon.png",
                   "1-dpsgd-mse-bounds.png", "1-dpsgd-dfil-histogram.png", "1-dpsgd-accuracy-vs-bound.png"):
        assert figure in figures, (figure, figures, re.findall(r'<p class="note">(.*?)</p>', html))
    assert "unknown dataset" not in html and "skipped" not in html, re.findall(r'<p class="note">(.*?)</p>', html)
    assert f"{N - SAMPLED} training example(s) never sampled (times_sampled 0, dFIL 0) left out" in html
    for cell in ("<th>batch size B</th><td>10</td>", "<th>steps T</th><td>9</td>", "<th>clip norm C</th><td>1</td>",
                 "<th>clipping</th><td>smooth</td>", "<th>noise multiplier sigma</th><td>1</td>",
                 "<th>sampling</th><td>shuffle</td>", "<th>accountant</th><td>rdp ("):
        assert cell in html, cell
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it)")
    dom = chromium_dom(report / "report.html", tmp_path / "chromium-profile")
    assert int(body_attribute(dom, "data-images")) == len(figures) == html.count("<img ")
    assert int(body_attribute(dom, "data-broken-images")) == 0  # every image decoded: naturalWidth > 0
    assert int(body_attribute(dom, "data-script-errors")) == 0
    assert int(body_attribute(dom, "data-overlaps")) == 0, body_attribute(dom, "data-overlap-examples")


def test_the_accuracy_given_to_write_summary_completes_an_automatic_snapshot_at_the_last_step(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).double()
    acc = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5,
                        num_examples=4)  # an automatic snapshot every 2 steps
    X, Y = torch.rand(4, 4, dtype=torch.float64), torch.tensor([0, 1, 0, 1])
    for step in range(2):
        acc.step(X[2 * step:2 * step + 2], Y[2 * step:2 * step + 2], [2 * step, 2 * step + 1])
    assert [s["step"] for s in acc.snapshots] == [2]
    acc.write_summary(str(tmp_path / "fil.json"), str(tmp_path / "fil.csv"), test_accuracy=0.75)
    snapshots = json.loads((tmp_path / "fil.json").read_text())["snapshots"]
    assert [s["step"] for s in snapshots] == [2] and snapshots[0]["test_accuracy"] == 0.75
    assert acc.snapshots[0]["test_accuracy"] is None  # the accountant's own record is left as it was
