#!/usr/bin/env bash
# The GPU check of filkit.torch, for a machine with a CUDA device and PyTorch but no filkit build
# (docs/pytorch.md, "On a GPU"). Run from the repository root:
#   PYTHONPATH=python bash python/tests/gpu_check.sh
# It prints the versions, runs python/tests/test_torch_cuda.py (CUDA float64 traces equal the CPU's
# to 1e-10 on a small mlp and cnn, make_private on CUDA equal to a CPU replay, a float32 run, and
# accounting without filkit's compiled module), then one throughput line per device, dtype and
# batch size (bench/torch_device_throughput.py). Under 4 minutes on one GPU; exit status non-zero
# when a test fails. Without a CUDA device the CUDA tests say they are skipped.
set -uo pipefail
cd "$(dirname "$0")/../.."
python="${PYTHON:-python3}"
export PYTHONPATH="${PYTHONPATH:-python}"

"$python" - <<'EOF'
import sys, torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda})" if torch.cuda.is_available() else ""))
print("functional transforms from", "torch.func" if hasattr(torch, "func") else "functorch")
EOF

status=0
if "$python" -c "import pytest" 2> /dev/null; then
  timeout 120 "$python" -m pytest -q -rs -p no:cacheprovider python/tests/test_torch_cuda.py || status=$?
else
  echo "(pytest is not installed: running the tests as a script)"
  timeout 120 "$python" python/tests/test_torch_cuda.py || status=$?
fi

echo "--- throughput: examples/s of FilAccountant.step and step_and_clip (the MNIST ConvNet, one probe)"
timeout 100 "$python" bench/torch_device_throughput.py --batch-sizes 32,128,512 --seconds 1.5 || status=$((status ? status : $?))
exit "$status"
