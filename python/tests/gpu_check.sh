#!/usr/bin/env bash
# The GPU check of filkit.torch, for a machine with a CUDA device and PyTorch but no filkit build
# (docs/pytorch.md, "On a GPU"). Run from the repository root:
#   PYTHONPATH=python bash python/tests/gpu_check.sh
# It prints the versions, runs python/tests/test_torch_cuda.py (CUDA float64 traces equal the CPU's
# to 1e-10 on a small mlp and cnn, make_private on CUDA equal to a CPU replay and, in a loop with an
# augmentation and a smoothed loss, to the CPU in lockstep, a float32 run, and accounting without
# filkit's compiled module) and python/tests/test_torch_loop.py (the loop's own gradient, on the
# PyTorch there), then one throughput line per device, dtype and batch size
# (bench/torch_device_throughput.py) and, with a GPU, a whole iteration of the user's loop beside
# hand-written DP-SGD on the MNIST ConvNet, a ReLU LeNet and a CIFAR ResNet-18 with GroupNorm (batch
# 256, float32; bench/torch_loop_bench.py, its JSON into GPU_CHECK_OUT). Under 8 minutes on one GPU;
# exit status non-zero when a test fails. Without a CUDA device the CUDA tests say they are skipped.
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
  timeout 180 "$python" -m pytest -q -rs -p no:cacheprovider python/tests/test_torch_cuda.py \
    python/tests/test_torch_loop.py || status=$?
else
  echo "(pytest is not installed: running the CUDA tests as a script)"
  timeout 120 "$python" python/tests/test_torch_cuda.py || status=$?
fi

echo "--- throughput: examples/s of FilAccountant.step and step_and_clip (the MNIST ConvNet, one probe)"
timeout 100 "$python" bench/torch_device_throughput.py --batch-sizes 32,128,512 --seconds 1.5 || status=$((status ? status : $?))

if "$python" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  echo "--- a whole iteration of the user's loop on the GPU (bench/torch_loop_bench.py; ms, peak memory)"
  json="${GPU_CHECK_OUT:-.}/torch_loop_bench_cuda.json"
  timeout 300 "$python" bench/torch_loop_bench.py --device cuda --models convnet,lenet,resnet18 --batch-sizes 256 \
    --dtypes float32 --steps 3 --repeats 3 --json "$json" || status=$((status ? status : $?))
fi
exit "$status"
