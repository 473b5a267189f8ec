#!/usr/bin/python3
"""Replays the bad-input corpus (cases.json, next to this file) against a filkit binary.

Every case is materialised in a fresh temporary directory (its files written or generated), its
command run, and the case classified as

  clean error     the command exits with the case's status (64 a bad option, 65 a bad file, 70 a
                  failed computation, 71 the machine's resources) by an ordinary exit (not a signal,
                  not a timeout), its standard error starts with filkit's error prefix and holds every expected
                  fragment, no sanitizer report or uncaught exception shows, and nothing in the
                  directory was created, changed or removed;
  correct result  the command exits as expected (0 unless told) and every check of the case holds;
  skipped         a case marked "needs": "torch" whose command (or setup) found no LibTorch
                  plugin: the build has none (the sanitizer build); its other failures stay "other";
  other           anything else (the reason is printed).

Each case's files are made by corpus_files.py (its generators; resume files by corpus_checkpoints.py),
a correct result is checked by corpus_checks.py, and corpus_case.py holds what they share.
Standard library only; run it with /usr/bin/python3. See README.md in this directory.
"""

import argparse
import atexit
import concurrent.futures
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from corpus_case import HERE, CaseError, substitute
from corpus_checks import check_result, describe_changes, snapshot
from corpus_files import materialise

ERROR_PREFIX = "filkit: error:"
# The exit status of an error by its kind (cli/main.cpp): 64 an option, 65 an input file, 70 a
# computation, 71 the machine's resources (memory budget, files, devices), 1 anything else; 100 and
# above CLI11's own (109 an unknown flag, ...).
ERROR_EXITS = {1, 64, 65, 70, 71} | set(range(100, 120))
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RSS_MB = 2000.0  # resident memory a case may take before it is killed (and fails)

# Signs of a crash or an unclean end in standard error, whatever the exit status.
CRASH_SIGNS = [
    "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "ERROR: UndefinedBehaviorSanitizer",
    "runtime error:", "WARNING: ThreadSanitizer", "terminate called", "Segmentation fault",
    "malloc(): ", "free(): ", "double free or corruption", "corrupted size", "corrupted double-linked",
    "stack smashing detected",
]
# Fragments that mean a message is a bare library exception rather than filkit's own words.
POOR_MESSAGE_SIGNS = [
    "std::bad_alloc", "bad_alloc", "stoll", "stoi", "stod", "stoul", "basic_string",
    "vector::_M", "vector::reserve", "not in range 0.000000", "1797693134862315",
    "out_of_range", "bad_array_new_length",
]


# --------------------------------------------------------------------------------------------
# Command lines


def shell_word(word):
    """A shell-quoted word; bytes that are not UTF-8 are written as $'...\\xNN...'."""
    if isinstance(word, bytes):
        try:
            word = word.decode("utf-8")
        except UnicodeDecodeError:
            out = []
            for b in word:
                c = chr(b)
                if 32 <= b < 127 and c not in "'\\":
                    out.append(c)
                else:
                    out.append("\\x%02x" % b)
            return "$'" + "".join(out) + "'"
    return shlex.quote(word)


def command_line(argv, env, unprivileged=False):
    words = ["%s=%s" % (k, shell_word(v)) for k, v in sorted(env.items())]
    if unprivileged and os.geteuid() == 0:
        words += ["setpriv", "--reuid=%d" % UNPRIVILEGED_ID, "--regid=%d" % UNPRIVILEGED_ID, "--clear-groups"]
    return " ".join(words + [shell_word(w) for w in argv])


# --------------------------------------------------------------------------------------------
# Running


class FifoReader(threading.Thread):
    """Reads a FIFO to its end (its open blocks until a writer opens it)."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.data, self.error = path, b"", None

    def run(self):
        try:
            with open(self.path, "rb") as f:
                self.data = f.read()
        except OSError as e:
            self.error = str(e)

    def release(self):
        """Unblocks the reader if nothing ever opened the FIFO for writing."""
        if self.is_alive():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
        self.join(5)


class MemoryWatcher(threading.Thread):
    """Polls a process's peak resident memory (VmHWM) and kills it beyond limit_mb, so that a
    case that reads without bound (a device, a bomb the budget misses) cannot exhaust the machine."""

    def __init__(self, process, limit_mb):
        super().__init__(daemon=True)
        self.process, self.limit_mb, self.peak_mb, self.killed = process, limit_mb, 0.0, False

    def run(self):
        path = "/proc/%d/status" % self.process.pid
        while self.process.poll() is None:
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024.0)
            except (OSError, ValueError, IndexError):
                pass
            if self.peak_mb > self.limit_mb and not self.killed:
                self.killed = True
                try:
                    os.killpg(self.process.pid, 9)
                except OSError:
                    pass
            time.sleep(0.02)


# Cases marked unprivileged run as this user and group when the replay runs as root: a read-only
# directory or an unreadable file means nothing to root.
UNPRIVILEGED_ID = 65534  # nobody, nogroup
# Their copy of the binary, in a directory anyone may enter: the build directory may sit inside one
# only root can (a clone in `mktemp -d`, mode 0700). Set by main when running as root.
UNPRIVILEGED_FILKIT = None


def copy_for_unprivileged(filkit):
    directory = tempfile.mkdtemp(prefix="filkit-bad-input-bin-")
    atexit.register(shutil.rmtree, directory, True)
    os.chmod(directory, 0o755)
    copy = os.path.join(directory, "filkit")
    shutil.copy2(filkit, copy)
    os.chmod(copy, 0o755)
    return copy


def run_command(argv, ctx, case, timeout, unprivileged=False):
    env = dict(ctx["base_env"])
    env.update(substitute(case.get("env", {}), ctx["dir"]))
    identity = {}
    if unprivileged and os.geteuid() == 0:
        identity = {"user": UNPRIVILEGED_ID, "group": UNPRIVILEGED_ID, "extra_groups": []}
    binary = UNPRIVILEGED_FILKIT if identity and UNPRIVILEGED_FILKIT else ctx["filkit"]
    start = time.monotonic()
    process = subprocess.Popen([binary] + argv, cwd=ctx["dir"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               **identity)
    watcher = MemoryWatcher(process, case.get("max_rss_mb", DEFAULT_MAX_RSS_MB))
    watcher.start()
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        timed_out = True
    watcher.join()
    return {"exit": process.returncode, "stdout": stdout, "stderr": stderr, "timed_out": timed_out,
            "seconds": time.monotonic() - start, "peak_rss_mb": watcher.peak_mb, "killed_for_memory": watcher.killed}


# A progress report: "label [####....]  42% ..." on a terminal, "label: 42% (42/100) ..." in a log.
PROGRESS = re.compile(r"^.*?(: \d{1,3}% \(\d+/\d+\) | \[[#. -]*\] +\d{1,3}%)")


def message_lines(stderr_text):
    """Standard error without the progress bars (segments after a carriage return)."""
    lines = []
    for line in stderr_text.split("\n"):
        if "\r" in line:
            line = line.split("\r")[-1]
            if PROGRESS.match(line) or not line.strip():
                continue
        if PROGRESS.match(line):
            continue
        lines.append(line)
    return lines


def classify(case, ctx):
    """('clean error' | 'correct result' | 'other', reason, outcome)."""
    expect = case["expect"]
    directory = ctx["dir"]
    for k, before_args in enumerate(case.get("before", [])):
        outcome = run_command(substitute(before_args, directory), ctx, case, case.get("timeout", DEFAULT_TIMEOUT))
        if outcome["exit"] != 0:
            raise CaseError("setup command %d failed (exit %s): %s" % (
                k + 1, outcome["exit"], outcome["stderr"].decode("utf-8", "replace").strip()[-300:]))
    ctx["fifos"] = {}
    for rel in case.get("fifo_readers", []):
        reader = FifoReader(os.path.join(directory, rel))
        reader.start()
        ctx["fifos"][rel] = reader
    before = snapshot(directory)
    argv = substitute(case["args"], directory)
    ctx["argv"] = argv
    outcome = run_command(argv, ctx, case, case.get("timeout", DEFAULT_TIMEOUT), case.get("unprivileged", False))
    for reader in ctx["fifos"].values():
        reader.release()
    stderr = outcome["stderr"].decode("utf-8", "replace")
    after = snapshot(directory)

    if outcome["killed_for_memory"]:
        return "other", "killed after taking over %.0f MB of resident memory (max_rss_mb)" % outcome["peak_rss_mb"], outcome
    if outcome["timed_out"]:
        return "other", "timed out after %.0f s" % outcome["seconds"], outcome
    if outcome["exit"] < 0:
        return "other", "killed by signal %d" % -outcome["exit"], outcome
    for sign in CRASH_SIGNS:
        if sign in stderr:
            return "other", "standard error shows %r" % sign, outcome
    leftovers = [rel for rel in after if re.search(r"\.tmp\.\d+", rel)]
    if leftovers:
        return "other", "temporary files left: " + ", ".join(leftovers), outcome

    if "error" in expect:
        if outcome["exit"] == 0:
            return "other", "exit 0, expected an error", outcome
        lines = [l for l in message_lines(stderr) if l.strip()]
        while lines and re.match(r"^filkit( \w+)?: warning:", lines[0]):
            lines.pop(0)
        if not lines or not lines[0].startswith(ERROR_PREFIX):
            return "other", "standard error does not start with %r: %r" % (
                ERROR_PREFIX, (lines[0] if lines else "")[:200]), outcome
        # Fragments are matched with the directory written {dir}, so that the directory's own name
        # (which holds the case's name) cannot supply a fragment the message lacks.
        message = "\n".join(lines).replace(directory, "{dir}")
        missing = [f for f in expect["error"] if f not in message]
        if missing:
            return "other", "the message lacks %s" % ", ".join(repr(m) for m in missing), outcome
        for sign in POOR_MESSAGE_SIGNS + expect.get("not", []):
            if sign in message:
                return "other", "the message holds %r" % sign, outcome
        if outcome["exit"] != expect["exit"]:
            return "other", "exit %d, expected %d" % (outcome["exit"], expect["exit"]), outcome
        changes = describe_changes(before, after)
        if changes:
            return "other", "the failed run changed the directory: " + ", ".join(changes), outcome
        return "clean error", "", outcome

    wanted_exit = expect.get("exit", 0)
    if outcome["exit"] != wanted_exit:
        lines = [l for l in message_lines(stderr) if l.strip()]
        return "other", "exit %d, expected %d: %s" % (outcome["exit"], wanted_exit,
                                                      (lines[-1] if lines else "")[:300]), outcome
    for check in expect["result"]:
        reason = check_result(substitute(check, directory), ctx, outcome, before)
        if reason:
            return "other", reason, outcome
    return "correct result", "", outcome


# The networks' plugin (src/networks/network_plugin.cpp); a build without LibTorch names it when it fails to load.
PLUGIN_FILE = "libfilkit_torch.so"


def run_case(case, filkit, keep, base_env):
    directory = tempfile.mkdtemp(prefix="filkit-bad-input-%s-" % case["name"])
    os.chmod(directory, 0o755)  # cases run as an unprivileged user must reach their files
    ctx = {"dir": directory, "filkit": filkit, "base_env": base_env, "notes": []}
    start = time.monotonic()
    outcome = None
    try:
        materialise(case.get("files", []), ctx)
        ctx["chardev_fallback"] = any("symbolic link to /dev/null" in n for n in ctx["notes"])
        kind, reason, outcome = classify(case, ctx)
    except CaseError as e:
        kind, reason = "other", str(e)
    except Exception as e:  # a bug of the case or of this script: still reported, never hidden
        kind, reason = "other", "replay failed: %s: %s" % (type(e).__name__, e)
    seconds = time.monotonic() - start
    if kind == "other" and case.get("needs") == "torch" and PLUGIN_FILE in reason + (
            outcome["stderr"].decode("utf-8", "replace") if outcome is not None else ""):
        kind, reason = "skipped", "this build has no LibTorch plugin"
    report = {"name": case["name"], "kind": kind, "reason": reason, "seconds": seconds, "dir": directory,
              "notes": ctx["notes"]}
    if outcome is not None:
        report["stderr"] = outcome["stderr"].decode("utf-8", "replace")
        report["exit"] = outcome["exit"]
    argv = ctx.get("argv") or substitute(case["args"], directory)
    report["command"] = command_line([filkit] + argv, substitute(case.get("env", {}), directory),
                                     case.get("unprivileged", False))
    if not keep:
        remove_tree(directory)
    return report


def remove_tree(directory):
    """Removes a case's directory, read-only subdirectories included."""
    for root, dirs, _ in os.walk(directory):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                try:
                    os.chmod(path, 0o755)
                except OSError:
                    pass
    shutil.rmtree(directory, ignore_errors=True)


def stderr_excerpt(text, count=6):
    """The lines of standard error worth showing: the first that names an error or a crash, then
    the last few (a sanitizer's report ends with its stack and summary)."""
    lines = [line.split("\r")[-1] for line in text.strip().split("\n")]
    lines = [line for line in lines if line.strip() and not PROGRESS.match(line)]
    first = [line for line in lines if ERROR_PREFIX in line or any(sign in line for sign in CRASH_SIGNS)][:1]
    tail = lines[-(count - len(first)):] if lines else []
    return first + [line for line in tail if line not in first]


def load_cases():
    with open(os.path.join(HERE, "cases.json")) as f:
        cases = json.load(f)["cases"]
    names = [c["name"] for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        sys.exit("replay.py: cases.json names these cases twice: " + ", ".join(duplicates))
    for case in cases:
        for key in ("name", "origin", "args", "expect"):
            if key not in case:
                sys.exit("replay.py: case %s has no %r" % (case.get("name", "?"), key))
        if case.get("needs", "torch") != "torch":
            sys.exit("replay.py: case %s: needs must be \"torch\"" % case["name"])
        if ("error" in case["expect"]) == ("result" in case["expect"]):
            sys.exit("replay.py: case %s: expect needs exactly one of 'error' and 'result'" % case["name"])
        if "error" in case["expect"] and case["expect"].get("exit") not in ERROR_EXITS:
            sys.exit("replay.py: case %s: an error case needs its exit status, one of %s (expect.exit)" % (
                case["name"], ", ".join(map(str, sorted(ERROR_EXITS)))))
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filkit", default=os.environ.get("FILKIT_BINARY"),
                        help="the filkit binary (default: $FILKIT_BINARY)")
    parser.add_argument("--case", action="append", default=[],
                        help="run only the cases this name or shell pattern matches (repeatable), e.g. 'checkpoint-*'")
    parser.add_argument("--keep", action="store_true",
                        help="keep each case's temporary directory and print its command line")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="cases run in parallel (default 2)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print standard error of every case")
    args = parser.parse_args()

    cases = load_cases()
    if args.list:
        for case in cases:
            print("%-40s %s" % (case["name"], case["origin"]))
        return 0
    if args.case:
        unknown = [p for p in args.case if not any(fnmatch.fnmatchcase(c["name"], p) for c in cases)]
        if unknown:
            sys.exit("replay.py: no case matches " + ", ".join(unknown) + " (--list shows them)")
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c["name"], p) for p in args.case)]
    if not args.filkit:
        sys.exit("replay.py: give the filkit binary with --filkit or FILKIT_BINARY")
    filkit = os.path.abspath(args.filkit)
    if not os.access(filkit, os.X_OK):
        sys.exit("replay.py: %s is not an executable" % filkit)
    if os.geteuid() == 0:
        global UNPRIVILEGED_FILKIT
        UNPRIVILEGED_FILKIT = copy_for_unprivileged(filkit)

    base_env = dict(os.environ)
    base_env.pop("FILKIT_DATA_DIR", None)  # cases set their own
    base_env["LC_ALL"] = "C"

    counts = {"clean error": 0, "correct result": 0, "skipped": 0, "other": 0}
    others = []
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = pool.map(lambda c: run_case(c, filkit, args.keep, base_env), cases)
        for report in reports:
            counts[report["kind"]] += 1
            line = "%-15s %-42s %5.1fs" % (report["kind"], report["name"], report["seconds"])
            if "exit" in report:
                line += "  exit %d" % report["exit"]
            if report["reason"]:
                line += "  " + report["reason"]
            print(line, flush=True)
            for note in report["notes"]:
                print("    note: " + note)
            if report["kind"] == "other":
                others.append(report)
            if args.verbose or (report["kind"] == "other" and report.get("stderr")):
                for text in stderr_excerpt(report.get("stderr", "")):
                    print("    stderr: " + text[:300])
            if args.keep or report["kind"] == "other":
                print("    command: cd %s && %s" % (shlex.quote(report["dir"]), report["command"]))
            if args.keep:
                print("    kept: " + report["dir"])
    print("replay.py: %.0f s" % (time.monotonic() - start))
    print("bad-input corpus: %d cases: %d clean errors, %d correct results, %d skipped, %d other" % (
        len(cases), counts["clean error"], counts["correct result"], counts["skipped"], counts["other"]))
    return 1 if counts["other"] else 0


if __name__ == "__main__":
    sys.exit(main())
