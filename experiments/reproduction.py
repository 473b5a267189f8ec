"""What the papers' reproduction scripts (experiments/<paper>/reproduce.py) share: their command line
(`run` or `draw`, then artefacts), the filkit binary, atomic writes and the gnuplot terminal and call
that draws their PNGs. Standard library only."""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILKIT = os.environ.get("FILKIT_BINARY", os.path.join(ROOT, "build", "filkit"))
TERMINAL = "set terminal pngcairo enhanced font 'DejaVu Sans,10' size {w},{h}\n"


def write_atomically(path, text):
    write_together({path: text})


def write_together(files):
    """Writes every {path: text} of `files` to a temporary file beside it, then renames them all:
    the outputs of one computation appear together or not at all (none, if any write fails)."""
    temporaries = {}
    try:
        for path, text in files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), delete=False, encoding="utf-8",
                                             suffix=".tmp", newline="") as f:
                temporaries[path] = f.name
                f.write(text)
            os.chmod(f.name, 0o644)
    except BaseException:
        for name in temporaries.values():
            os.unlink(name)
        raise
    for path, name in temporaries.items():
        os.replace(name, path)


def rel(path):
    return os.path.relpath(path, ROOT)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def gnuplot(script, png, folder):
    """Runs a gnuplot script (its `set output` added) in `folder` and moves the PNG to `png` atomically."""
    path = os.path.join(folder, os.path.basename(png) + ".gp")
    tmp_png = os.path.join(folder, os.path.basename(png))
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"set output '{tmp_png}'\n" + script)
    subprocess.run(["gnuplot", path], check=True)
    shutil.copyfile(tmp_png, png + ".tmp")
    os.replace(png + ".tmp", png)
    print(f"  wrote {rel(png)} ({os.path.getsize(png) // 1024} kB)")


def command_line(doc, artefacts):
    """The action (`run` or `draw`) and the artefacts asked for (all by default); `run` needs the binary."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    parser.add_argument("action", choices=("run", "draw"))
    parser.add_argument("artefacts", nargs="*", metavar="ARTEFACT", help=f"one of {', '.join(artefacts)} (default: all)")
    args = parser.parse_args()
    for artefact in args.artefacts:
        if artefact not in artefacts:
            parser.error(f"ARTEFACT '{artefact}': one of {', '.join(artefacts)}")
    if args.action == "run" and not os.access(FILKIT, os.X_OK):
        raise SystemExit(f"reproduce.py: no filkit binary at {FILKIT} (build it, or set FILKIT_BINARY)")
    return args.action, args.artefacts or list(artefacts)
