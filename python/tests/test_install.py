"""`pip install .` (pyproject.toml, setup.py) into a fresh venv that sees Debian's numpy and torch
(--system-site-packages), offline (--no-build-isolation --no-index), reusing the build folder of
the module under test (FILKIT_BUILD_DIR: nothing is compiled again); then a small make_private loop
with the venv's interpreter from a folder outside the checkout, so that only the installed package
can be imported."""
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import filkit

REPOSITORY = Path(__file__).resolve().parents[2]
BUILD = Path(filkit.__file__).resolve().parents[2]  # <build>/python/filkit/__init__.py

LOOP = """
import json, os, torch, filkit
from filkit.torch import make_private
torch.manual_seed(0)
x, y = torch.rand(40, 5, dtype=torch.double), torch.arange(40) % 3
model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)).double()
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
model, optimizer, loader = make_private(model, torch.optim.SGD(model.parameters(), lr=0.5), loader,
                                        noise_multiplier=1.0, max_grad_norm=1.0, seed=1)
for inputs, labels in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(inputs), labels).backward()
    optimizer.step()
accountant = optimizer.accountant
accountant.write_summary("fil.json", "fil.csv")
print(json.dumps({"package": os.path.dirname(filkit.__file__), "version": filkit.__version__,
                  "steps": accountant.steps, "epsilon": accountant.epsilon(1e-5),
                  "dfil_max": float(accountant.dfil().max()),
                  "files": sorted(os.listdir(os.path.dirname(filkit.__file__)))}))
"""


@pytest.mark.skipif(not (BUILD / "CMakeCache.txt").is_file(), reason="filkit under test is not a CMake build folder")
def test_pip_installs_filkit_into_a_fresh_venv_where_make_private_runs(tmp_path):
    pytest.importorskip("torch")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "--no-cache-dir",
         "--quiet", "--root-user-action=ignore", str(REPOSITORY)],
        capture_output=True, text=True, env={**env, "FILKIT_BUILD_DIR": str(BUILD)})
    assert installed.returncode == 0, installed.stdout + installed.stderr
    run = tmp_path / "elsewhere"
    run.mkdir()
    out = subprocess.run([str(python), "-c", LOOP], capture_output=True, text=True, cwd=str(run), env=env)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(result["package"]).resolve().is_relative_to(venv.resolve()), result["package"]
    assert result["version"] == filkit.__version__
    assert result["steps"] == 5 and result["epsilon"] > 0 and result["dfil_max"] > 0
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name in (f"_filkit{suffix}", "libfilkit_torch.so", "py.typed", "__init__.pyi", "_rdp.py", "_version.py"):
        assert name in result["files"], name
    assert json.loads((run / "fil.json").read_text())["snapshots"][-1]["epsilon"] > 0
