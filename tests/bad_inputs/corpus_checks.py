"""The checks of a bad-input case's outcome (replay.py): the snapshot of its directory (what a
failed run must leave as it was) and the checks of a correct result (files, tables, JSON values,
standard output and error, FIFOs). Standard library only."""

import hashlib
import json
import os
import stat


def snapshot(directory):
    """{relative path: (kind, size, mtime, digest)} of everything under `directory`."""
    state = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            st = os.lstat(path)
            digest = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha1(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(path)
            kind = stat.S_IFMT(st.st_mode)
            state[rel] = (kind, st.st_size if stat.S_ISREG(st.st_mode) else 0,
                          st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0, digest)
    return state


def describe_changes(before, after):
    changes = []
    for rel in sorted(set(before) | set(after)):
        if rel not in before:
            changes.append("created " + rel)
        elif rel not in after:
            changes.append("removed " + rel)
        elif before[rel] != after[rel]:
            changes.append("modified " + rel)
    return changes


def lookup(document, dotted):
    value = document
    for key in dotted.split("."):
        if isinstance(value, list):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise KeyError(dotted)
    return value


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def check_result(check, ctx, outcome, before):
    """None if `check` holds, else the reason."""
    directory = ctx["dir"]
    stdout = outcome["stdout"].decode("utf-8", "replace")
    stderr = outcome["stderr"].decode("utf-8", "replace")
    if "file" in check:
        rel = check["file"]  # bytes when given as {"latin1": ...}
        path = os.path.join(directory.encode(), rel) if isinstance(rel, bytes) else os.path.join(directory, rel)
        check = dict(check, file=rel.decode("utf-8", "surrogateescape") if isinstance(rel, bytes) else rel)
        exists = os.path.lexists(path)
        if "exists" in check and exists != check["exists"]:
            return "%s %s" % (check["file"], "is missing" if check["exists"] else "exists")
        if check.get("exists") is False:
            return None
        if not exists:
            return check["file"] + " is missing"
        st = os.lstat(path)
        kinds = {"regular": stat.S_ISREG, "symlink": stat.S_ISLNK, "chardev": stat.S_ISCHR,
                 "fifo": stat.S_ISFIFO, "dir": stat.S_ISDIR}
        if "type" in check:
            if check["type"] == "chardev" and ctx.get("chardev_fallback") and stat.S_ISLNK(st.st_mode):
                pass
            elif not kinds[check["type"]](st.st_mode):
                return "%s is no longer a %s (mode %o)" % (check["file"], check["type"], st.st_mode)
        if "mode" in check and stat.S_IMODE(st.st_mode) != int(check["mode"], 8):
            return "%s has mode %o, expected %s" % (check["file"], stat.S_IMODE(st.st_mode), check["mode"])
        if "link_target" in check and (not stat.S_ISLNK(st.st_mode) or os.readlink(path) != check["link_target"]):
            return "%s does not link to %s" % (check["file"], check["link_target"])
        if check.get("unchanged"):
            rel = check["file"]
            now = snapshot(directory).get(rel)
            if before.get(rel) is None or now is None or before[rel][3] != now[3]:
                return "%s changed" % rel
        if any(k in check for k in ("first_line", "content", "lines", "json", "contains", "not_contains")):
            text = read_text(path)
            if "first_line" in check and text.split("\n", 1)[0] != check["first_line"]:
                return "%s: first line %r, expected %r" % (check["file"], text.split("\n", 1)[0][:200],
                                                            check["first_line"])
            if "content" in check and text != check["content"]:
                return "%s: content %r, expected %r" % (check["file"], text[:200], check["content"])
            if "lines" in check and len(text.splitlines()) != check["lines"]:
                return "%s: %d lines, expected %d" % (check["file"], len(text.splitlines()), check["lines"])
            for fragment in check.get("contains", []):
                if fragment not in text:
                    return "%s lacks %r" % (check["file"], fragment)
            for fragment in check.get("not_contains", []):
                if fragment in text:
                    return "%s holds %r" % (check["file"], fragment)
            if "json" in check:
                try:
                    document = json.loads(text)
                except ValueError as e:
                    return "%s is not JSON: %s" % (check["file"], e)
                reason = check_json(document, check["json"], check["file"])
                if reason:
                    return reason
        return None
    if "same" in check:
        contents = []
        for rel in check["same"]:
            with open(os.path.join(directory, rel), "rb") as f:
                contents.append(f.read())
        if any(c != contents[0] for c in contents):
            return "%s differ" % " and ".join(check["same"])
        return None
    if "close" in check:
        return compare_tables([os.path.join(directory, rel) for rel in check["close"]], check.get("rtol", 1e-9))
    if "differ" in check:
        contents = []
        for rel in check["differ"]:
            with open(os.path.join(directory, rel), "rb") as f:
                contents.append(f.read())
        if contents[0] == contents[1]:
            return "%s are identical" % " and ".join(check["differ"])
        return None
    if "stdout_json" in check:
        try:
            document = json.loads(stdout)
        except ValueError as e:
            return "standard output is not one JSON document (%s): %r" % (e, stdout[:200])
        return check_json(document, check["stdout_json"], "standard output")
    if "stdout_contains" in check:
        return None if check["stdout_contains"] in stdout else "standard output lacks %r" % check["stdout_contains"]
    if "stdout_first_line" in check:
        first = stdout.split("\n", 1)[0]
        return None if first == check["stdout_first_line"] else "standard output begins %r" % first[:200]
    if "stderr_contains" in check:
        return None if check["stderr_contains"] in stderr else "standard error lacks %r" % check["stderr_contains"]
    if "stderr_not_contains" in check:
        return None if check["stderr_not_contains"] not in stderr else "standard error holds %r" % check["stderr_not_contains"]
    if "fifo" in check:
        reader = ctx["fifos"].get(check["fifo"])
        if reader is None:
            return "no reader on FIFO " + check["fifo"]
        text = reader.data.decode("utf-8", "replace")
        if "first_line" in check and text.split("\n", 1)[0] != check["first_line"]:
            return "FIFO %s: first line %r" % (check["fifo"], text.split("\n", 1)[0][:200])
        if check.get("nonempty") and not text:
            return "FIFO %s: nothing written" % check["fifo"]
        return None
    if "seconds_below" in check:
        return None if outcome["seconds"] < check["seconds_below"] else "took %.1f s" % outcome["seconds"]
    return "unknown check %r" % (check,)


def compare_tables(paths, rtol):
    """None if two CSV tables have the same header and cells, numbers equal within rtol."""
    tables = []
    for path in paths:
        with open(path) as f:
            tables.append([line.split(",") for line in f.read().splitlines()])
    a, b = tables
    if len(a) != len(b) or a[:1] != b[:1]:
        return "%s and %s differ in shape or header" % tuple(os.path.basename(p) for p in paths)
    for r, (row_a, row_b) in enumerate(zip(a[1:], b[1:]), start=2):
        if len(row_a) != len(row_b):
            return "line %d: %d cells against %d" % (r, len(row_a), len(row_b))
        for c, (x, y) in enumerate(zip(row_a, row_b)):
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                if x != y:
                    return "line %d column %d: %r against %r" % (r, c + 1, x, y)
                continue
            if not (abs(fx - fy) <= rtol * max(abs(fx), abs(fy)) or fx == fy):
                return "line %d column %d: %r against %r (rtol %g)" % (r, c + 1, x, y, rtol)
    return None


def check_json(document, expected, where):
    for key, value in expected.items():
        try:
            found = lookup(document, key)
        except (KeyError, IndexError, ValueError, TypeError):
            return "%s has no %s" % (where, key)
        if value == "*":
            continue
        if isinstance(value, dict) and set(value) <= {"min", "max", "finite"}:
            if not isinstance(found, (int, float)) or isinstance(found, bool):
                return "%s: %s = %r is not a number" % (where, key, found)
            if "min" in value and not found >= value["min"]:
                return "%s: %s = %r < %r" % (where, key, found, value["min"])
            if "max" in value and not found <= value["max"]:
                return "%s: %s = %r > %r" % (where, key, found, value["max"])
            continue
        if found != value:
            return "%s: %s = %r, expected %r" % (where, key, found, value)
    return None
