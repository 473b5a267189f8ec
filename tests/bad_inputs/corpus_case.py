"""What every part of a bad-input case's setup shares (replay.py runs the cases): the error of a
case that cannot be set up, the {dir} substitution, and the run of a filkit command that makes an
input (gen_run, gen_checkpoint). Standard library only."""

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


class CaseError(Exception):
    """A case that cannot be materialised or whose setup fails (classified as other)."""


def substitute(value, directory):
    """{dir} in strings (recursively in lists and dicts); {"latin1": s} becomes bytes."""
    if isinstance(value, str):
        return value.replace("{dir}", directory)
    if isinstance(value, list):
        return [substitute(v, directory) for v in value]
    if isinstance(value, dict):
        if set(value) == {"latin1"}:
            return value["latin1"].replace("{dir}", directory).encode("latin-1")
        return {k: substitute(v, directory) for k, v in value.items()}
    return value


def run_setup_command(spec, ctx, what):
    """Runs filkit with spec's `args` in the case's directory, which must succeed (else CaseError
    naming `what` and the end of its standard error)."""
    argv = substitute(spec["args"], ctx["dir"])
    result = subprocess.run([ctx["filkit"]] + argv, cwd=ctx["dir"], capture_output=True, timeout=120,
                            env=ctx["base_env"])
    if result.returncode != 0:
        raise CaseError("%s failed (exit %d): %s" % (
            what, result.returncode, result.stderr.decode("utf-8", "replace").strip()[-400:]))
