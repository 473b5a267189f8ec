"""The build step of the Python package (pyproject.toml; docs/development.md, "The Python package").

setuptools' build_py is replaced by a CMake build of the module target `_filkit` alone (not the test
suite): it compiles filkit._filkit, the LibTorch plugin it opens, and copies python/filkit beside them
into <build>/python/filkit (python/CMakeLists.txt); that folder, with the plugin, is the package.

    FILKIT_BUILD_DIR  a CMake build folder to build in: reused as it is when configured (scripts/setup.sh
                      passes its own, so nothing is compiled twice), configured by scripts/configure.sh
                      when not. Default: build-pip/<the interpreter's extension suffix>, configured
                      without the tests.

The version is the CMake project's (CMakeLists.txt's project(filkit VERSION ...)), read here.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
MODULE_TARGET = "_filkit"
PLUGIN = "libfilkit_torch.so"  # the LibTorch plugin, beside the module once installed (network_plugin.cpp)


def cmake_version():
    match = re.search(r"^project\(filkit VERSION ([0-9][0-9.]*)", (ROOT / "CMakeLists.txt").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError("CMakeLists.txt: no 'project(filkit VERSION x.y.z' line to take the version from")
    return match.group(1)


def cached_python(build):
    """The interpreter a configured build folder's module is for (its CMakeCache.txt), or None."""
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        return None
    match = re.search(r"^Python_EXECUTABLE:[A-Z]+=(.*)$", cache.read_text(errors="replace"), re.MULTILINE)
    return match.group(1) if match else ""


class BinaryDistribution(Distribution):
    """A wheel for one platform and interpreter: it holds compiled code."""

    def has_ext_modules(self):
        return True


class BuildWithCMake(build_py):
    def run(self):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        chosen = os.environ.get("FILKIT_BUILD_DIR")
        build = (ROOT / chosen) if chosen else ROOT / "build-pip" / suffix.strip(".").removesuffix(".so")
        python = cached_python(build)
        if python is None:
            extra = [] if chosen else ["-DFILKIT_BUILD_TESTS=OFF", "-DFILKIT_BUILD_BENCH=OFF"]
            self.announce(f"filkit: configuring {build} for {sys.executable}", level=2)
            subprocess.check_call(["bash", str(ROOT / "scripts" / "configure.sh"), str(build), sys.executable] + extra)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(build), "-j", jobs, "--target", MODULE_TARGET])
        package = build / "python" / "filkit"
        module = package / f"_filkit{suffix}"
        if not module.is_file():
            raise RuntimeError(f"{build} holds no {module.name} for this interpreter ({sys.executable}): it was "
                               f"configured for {python or 'another Python'}; unset FILKIT_BUILD_DIR (a build folder "
                               "of its own is made) or name one configured for this interpreter")
        target = Path(self.build_lib) / "filkit"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_filkit.*.so"))
        shutil.copy2(module, target / module.name)  # this interpreter's module only
        if (build / PLUGIN).is_file():
            shutil.copy2(build / PLUGIN, target / PLUGIN)


(ROOT / "build-pip").mkdir(exist_ok=True)  # setuptools' own files (egg-info, build/lib) go there
setup(
    version=cmake_version(),
    packages=["filkit", "filkit.torch"],
    package_dir={"": "python"},
    package_data={"filkit": ["py.typed", "*.pyi"]},
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildWithCMake},
    options={"build": {"build_base": "build-pip/setuptools"}, "egg_info": {"egg_base": "build-pip"}},
)
