#!/usr/bin/python3
"""Runs the shell commands of README.md and docs/*.md at a tiny size (docs/development.md,
"The documentation's commands").

Every ```sh block is one test. It runs verbatim under `bash -e -o pipefail` in a fresh temporary
directory (with links to the repository's folders of LINKED_FOLDERS, so that a block may name
`examples/...`) whose `build/filkit` is a wrapper around the real binary: the wrapper gives each
`filkit COMMAND` the tiny sizes of TINY_SIZES below for that command (and those of the block's
`doc-test:` comment), replacing the value of a flag the command already has and appending the
others, prints the command as written and as run to standard error, and runs it. Nothing else in
a block is changed. Markdown comments directly above a block's opening fence steer it:

    <!-- not run: REASON -->                  the block is not run (reported as skipped, with REASON)
    <!-- doc-test: --steps 4 --runs 2 -->     further flags for every filkit command of the block
    <!-- doc-test files: images.npz model.pt --> files the block reads, made first (FIXTURES below)

Standard library only (the model.pt fixture imports torch); run it with /usr/bin/python3:

    tests/docs/doc_commands.py --list                       # the blocks, as ctest names them
    tests/docs/doc_commands.py --filkit build/filkit --block README.md:3 [--keep]
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SKIPPED = 77  # ctest's SKIP_RETURN_CODE for a block marked "not run"

# The tiny size of each command: a few hundred examples, a few steps, trials or shadow models, so
# that every block runs in seconds. A command's own value of one of these flags is replaced.
TINY_SIZES = {
    "measure": ["--train-size", "400", "--test-size", "200"],
    "irfil": ["--train-size", "400", "--test-size", "200"],
    "attack": ["--train-size", "400", "--test-size", "200", "--trials", "20"],  # as irfil: its --weights fit
    "bound": ["--train-size", "300", "--test-size", "100"],
    "reconstruct": ["--train-size", "300", "--test-size", "100", "--trials", "64"],
    "dpsgd": ["--train-size", "256", "--test-size", "128", "--steps", "6", "--batch-size", "32",
              "--report-epochs", "0.5"],
    "public-training": ["--train-size", "400", "--test-size", "100", "--runs", "1", "--pretrain-steps", "2",
                        "--pretrain-batch-size", "16", "--steps", "2", "--batch-size", "32", "--gradient-unit",
                        "batches", "--gradient-steps", "1", "--gradient-min-steps", "1", "--gradient-batch-size", "8",
                        "--gradient-hidden", "16,16"],
    "learned-attack": ["--train-size", "400", "--test-size", "100", "--public-size", "50", "--fixed-size", "49",
                       "--batch-size", "50", "--gradient-batch-size", "50", "--steps", "2", "--train-shadow-models", "8",
                       "--target-shadow-models", "4", "--attacker-epochs", "2"],
}


def make_images_npz(path):
    """Grey 28 x 28 images in NHWC layout, (n, H, W, 1), uint8, labels 0..9, with a test split."""
    import numpy as np
    rng = np.random.default_rng(0)
    np.savez(path, X=rng.integers(0, 256, (300, 28, 28, 1), dtype=np.uint8), y=np.arange(300) % 10,
             X_test=rng.integers(0, 256, (100, 28, 28, 1), dtype=np.uint8), y_test=np.arange(100) % 10)


def make_model_pt(path):
    """A TorchScript chain of accepted layers for 1 x 28 x 28 images and 10 classes."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 8, stride=2), torch.nn.Tanh(), torch.nn.AvgPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 10))
    torch.jit.save(torch.jit.script(model), path)


FIXTURES = {"images.npz": make_images_npz, "model.pt": make_model_pt}

# Linked into a block's directory, which otherwise holds only build/filkit and the block's outputs.
LINKED_FOLDERS = ["bench", "docs", "examples", "experiments", "scripts", "tests"]


# --- the documents' blocks ---------------------------------------------------------------------

def documents():
    """README.md and docs/*.md, as paths relative to the repository."""
    docs = sorted(name for name in os.listdir(os.path.join(REPO, "docs")) if name.endswith(".md"))
    return ["README.md"] + ["docs/" + name for name in docs]


COMMENT = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")


def parse_directives(comments, where):
    """The steering comments above a block: {"skip": reason, "flags": [...], "files": [...]}."""
    block = {"skip": None, "flags": [], "files": []}
    for text in comments:
        if text.startswith("not run:"):
            block["skip"] = text[len("not run:"):].strip()
            if not block["skip"]:
                raise SystemExit(f"{where}: 'not run:' needs a reason")
        elif text.startswith("doc-test files:"):
            block["files"] += text[len("doc-test files:"):].split()
            unknown = [f for f in block["files"] if f not in FIXTURES]
            if unknown:
                raise SystemExit(f"{where}: no fixture for {unknown} (known: {', '.join(FIXTURES)})")
        elif text.startswith("doc-test:"):
            block["flags"] += shlex.split(text[len("doc-test:"):])
        elif text.startswith("doc-test") or text.startswith("not run"):
            raise SystemExit(f"{where}: unknown directive '{text}'")
    return block


def blocks_of(document):
    """The ```sh blocks of one document, in order: dicts with line, text and the directives."""
    with open(os.path.join(REPO, document), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, k = [], 0
    while k < len(lines):
        if lines[k].strip() == "```sh":
            start, comments, j = k + 1, [], k - 1
            while j >= 0 and COMMENT.match(lines[j]):
                comments.insert(0, COMMENT.match(lines[j]).group(1))
                j -= 1
            end = start
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            if end == len(lines):
                raise SystemExit(f"{document}:{start}: the block is never closed")
            block = parse_directives(comments, f"{document}:{start}")
            block.update(line=start, text="\n".join(lines[start:end]) + "\n")
            blocks.append(block)
            k = end
        k += 1
    return blocks


def block_names():
    return [f"{document}:{number}" for document in documents()
            for number in range(1, len(blocks_of(document)) + 1)]


# --- the wrapper that stands in for build/filkit -------------------------------------------------

def with_flags(args, flags):
    """args with each (flag, value) of `flags` set: an existing value replaced, else appended."""
    args = list(args)
    for k in range(0, len(flags), 2):
        flag, value = flags[k], flags[k + 1]
        for j, arg in enumerate(args):
            if arg == flag and j + 1 < len(args):
                args[j + 1] = value
                break
            if arg.startswith(flag + "="):
                args[j] = flag + "=" + value
                break
        else:
            args += [flag, value]
    return args


def wrap(args):
    """Runs the real filkit with the tiny sizes of its command and the block's flags."""
    binary = os.environ["FILKIT_DOC_TEST_BINARY"]
    block_flags = json.loads(os.environ.get("FILKIT_DOC_TEST_FLAGS", "[]"))
    command = next((a for a in args if not a.startswith("-")), None)
    run = list(args)
    if command in TINY_SIZES and not {"-h", "--help"} & set(args):
        run = with_flags(with_flags(args, TINY_SIZES[command]), block_flags)
    if run != args:
        print("doc test: build/filkit " + shlex.join(args) + "\n      ran: build/filkit " + shlex.join(run),
              file=sys.stderr, flush=True)
    os.execv(binary, [binary] + run)


# --- running one block ---------------------------------------------------------------------------

def run_block(name, filkit, keep):
    document, number = name.rsplit(":", 1)
    if document not in documents():
        raise SystemExit(f"--block {name}: no document {document} (the documents: {', '.join(documents())})")
    blocks = blocks_of(document)
    if not number.isdigit() or not 1 <= int(number) <= len(blocks):
        raise SystemExit(f"--block {name}: {document} has {len(blocks)} sh blocks (rerun cmake if it changed)")
    block = blocks[int(number) - 1]
    where = f"{document}:{block['line']} (sh block {number})"
    print(f"{where}:\n{block['text']}", flush=True)
    if block["skip"]:
        print(f"not run: {block['skip']}")
        return SKIPPED
    work = tempfile.mkdtemp(prefix="filkit-doc-")
    try:
        # The repository's folders a block may name as a reader in its checkout would (examples/..).
        for folder in LINKED_FOLDERS:
            os.symlink(os.path.join(REPO, folder), os.path.join(work, folder))
        os.mkdir(os.path.join(work, "build"))
        wrapper = os.path.join(work, "build", "filkit")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\nexec /usr/bin/python3 {shlex.quote(os.path.abspath(__file__))} --wrap \"$@\"\n")
        os.chmod(wrapper, 0o755)
        for fixture in block["files"]:
            FIXTURES[fixture](os.path.join(work, fixture))
        # `import filkit` is the build's under test (beside its binary), not a copy pip installed.
        python_path = os.pathsep.join(filter(None, [os.path.join(os.path.dirname(os.path.abspath(filkit)), "python"),
                                                    os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, FILKIT_DOC_TEST_BINARY=os.path.abspath(filkit), PYTHONPATH=python_path,
                   FILKIT_DOC_TEST_FLAGS=json.dumps(block["flags"]), TMPDIR=work,
                   # mpirun as root, and more ranks than cores (docs/distributed.md)
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        start = time.monotonic()
        status = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["text"]], cwd=work, env=env,
                                stdin=subprocess.DEVNULL).returncode
        print(f"{where}: exit status {status} after {time.monotonic() - start:.1f} s"
              + (f"; kept {work}" if keep else ""))
        return 0 if status == 0 else 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--wrap":
        wrap(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print the blocks' names as a CMake list")
    parser.add_argument("--filkit", default=os.environ.get("FILKIT_BINARY"), help="the filkit binary")
    parser.add_argument("--block", help="DOCUMENT:N, the N-th sh block of DOCUMENT")
    parser.add_argument("--keep", action="store_true", help="keep the block's directory")
    args = parser.parse_args()
    if args.list:
        print(";".join(block_names()))
        return 0
    if not args.filkit or not args.block:
        parser.error("--filkit and --block are required (or --list)")
    return run_block(args.block, args.filkit, args.keep)


if __name__ == "__main__":
    sys.exit(main())
