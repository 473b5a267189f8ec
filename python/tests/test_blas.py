"""The OpenBLAS kernel choice (filkit/_blas.py): from the CPU's flags, never over the user's."""
import os

import filkit._blas as blas


def write_cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel\t\t: 207\nflags\t\t: {' '.join(flags)}\n\nprocessor\t: 1\n")
    return str(path)


def test_kernels_follow_the_instruction_sets(tmp_path, monkeypatch):
    avx512 = ["sse2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd"]
    for flags, core in [(avx512, "SkylakeX"), (["sse2", "avx", "avx2", "fma"], "Haswell"),
                        (["sse2", "avx"], "Sandybridge"), (["sse2", "avx", "avx512f", "avx2"], "Sandybridge")]:
        monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
        assert blas.choose_openblas_kernels(write_cpuinfo(tmp_path, flags)) == core
        assert os.environ["OPENBLAS_CORETYPE"] == core
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    assert blas.choose_openblas_kernels(write_cpuinfo(tmp_path, ["sse2"])) is None
    assert "OPENBLAS_CORETYPE" not in os.environ
    assert blas.choose_openblas_kernels(str(tmp_path / "missing")) is None


def test_the_users_choice_stands(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert blas.choose_openblas_kernels(write_cpuinfo(tmp_path, ["avx512f", "avx512dq", "avx512bw", "avx512vl",
                                                                 "avx512cd"])) == "Haswell"
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell"
