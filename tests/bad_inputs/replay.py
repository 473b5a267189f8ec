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

Standard library only; run it with /usr/bin/python3. See README.md in this directory.
"""

import argparse
import atexit
import concurrent.futures
import fnmatch
import gzip
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
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


class CaseError(Exception):
    """A case that cannot be materialised or whose setup fails (classified as other)."""


# --------------------------------------------------------------------------------------------
# Substitution and command lines


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
# File generators. Each writes `path` from its spec; `ctx` holds the directory, the binary, ...


def rng_for(spec):
    return random.Random(spec.get("seed", 1))


def format_cell(value):
    if isinstance(value, float):
        return repr(value)
    return str(value)


def gen_csv(path, spec, ctx):
    """A classification (or regression) table: features f0.. (or named), a target column.
    spec: rows, features (count or list of names), classes (2), target ("y"), seed, scale
    {column: factor}, offset {column: value}, cells [[row, column, text]] (row 0-based: file
    line row + 2), categorical {column: [levels]}, regression, separator, header (false to omit),
    exact (write every value unrounded; scaled columns always are).
    """
    rnd = rng_for(spec)
    rows = spec.get("rows", 40)
    features = spec.get("features", 3)
    names = features if isinstance(features, list) else ["f%d" % j for j in range(features)]
    target = spec.get("target", "y")
    classes = spec.get("classes", 2)
    scale = spec.get("scale", {})
    offset = spec.get("offset", {})
    categorical = spec.get("categorical", {})
    header = names + [target]
    table = []
    for i in range(rows):
        label = i % classes
        row = []
        for j, name in enumerate(names):
            if name in categorical:
                levels = categorical[name]
                row.append(levels[(i * 7 + j) % len(levels)])
                continue
            value = rnd.gauss(0.5 * label * (1 if j % 2 == 0 else -1), 1.0)
            value = value * scale.get(name, 1.0) + offset.get(name, 0.0)
            row.append(format_cell(value if spec.get("exact") or name in scale else round(value, 6)))
        row.append(format_cell(rnd.gauss(label, 0.3) if spec.get("regression") else label))
        table.append(row)
    for r, column, text in spec.get("cells", []):
        table[r][header.index(column)] = text
    sep = spec.get("separator", ",")
    with open(path, "w", newline="") as f:
        if spec.get("header", True):
            f.write(sep.join(header) + "\n")
        for row in table:
            f.write(sep.join(row) + "\n")


def gen_wide_csv(path, spec, ctx):
    """A CSV with many columns: spec columns, rows, target ("y"); cell values small integers."""
    columns, rows = spec["columns"], spec.get("rows", 4)
    with open(path, "w") as f:
        f.write(",".join("c%d" % j for j in range(columns)) + ",y\n")
        for i in range(rows):
            f.write(",".join(str((i + j) % 3) for j in range(columns)) + ",%d\n" % (i % 2))


def gen_arff(path, spec, ctx):
    """A small valid ARFF file: numeric attributes a0.., a nominal class {0,1}."""
    rnd = rng_for(spec)
    rows, features = spec.get("rows", 30), spec.get("features", 3)
    lines = ["@relation generated", ""]
    lines += ["@attribute a%d numeric" % j for j in range(features)]
    lines += ["@attribute class {0,1}", "", "@data"]
    for i in range(rows):
        label = i % 2
        lines.append(",".join("%.4f" % rnd.gauss(label, 1) for _ in range(features)) + ",%d" % label)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


NPY_FORMATS = {"<f8": "<d", "<f4": "<f", "|u1": "B", "<i8": "<q", "<i4": "<i", "<i2": "<h",
               "<u2": "<H", ">f8": ">d", "|b1": "?", "<c16": None, "|O": None, "<U3": None}


def npy_values(spec, count):
    """The values of an array spec: values (a list, repeated to count), or labels (i % classes),
    or random gauss (seeded); scale multiplies; cells {flat_index: value} override."""
    rnd = rng_for(spec)
    if "values" in spec:
        vals = spec["values"]
        out = [vals[i % len(vals)] for i in range(count)] if vals else []
    elif spec.get("fill") == "labels":
        out = [i % spec.get("classes", 2) for i in range(count)]
    elif spec.get("fill") == "zeros":
        out = [0] * count
    else:
        out = [rnd.gauss(0, 1) for _ in range(count)]
    factor = spec.get("scale")
    if factor is not None:
        out = [v * factor for v in out]
    for k, v in spec.get("cells", {}).items():
        out[int(k)] = float(v) if isinstance(v, str) else v
    return out


def npy_bytes(spec):
    """A .npy file: dtype ("<f8"), shape, declared_shape (header; default shape), fortran_order,
    version (1), header_text (verbatim dict), data_hex (replacing the data), itemsize (a dtype
    this script cannot pack, e.g. "<c16": zero bytes of this size per value), truncate."""
    dtype = spec.get("dtype", "<f8")
    shape = spec.get("shape", [])
    declared = spec.get("declared_shape", shape)
    count = 1
    for dim in shape:
        count *= dim
    shape_text = "(" + "".join("%d, " % d for d in declared)[:-2] + ("," if len(declared) == 1 else "") + ")"
    if not declared:
        shape_text = "()"
    header = spec.get("header_text") or "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        dtype, "True" if spec.get("fortran_order") else "False", shape_text)
    version = spec.get("version", 1)
    prefix_len = 10 if version == 1 else 12
    pad = (64 - (prefix_len + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    out += header.encode("latin-1")
    if "data_hex" in spec:
        out += bytes.fromhex(spec["data_hex"])
    elif "itemsize" in spec:
        out += bytes(count * spec["itemsize"])
    else:
        fmt = NPY_FORMATS.get(dtype) or "<d"
        values = npy_values(spec, count)
        if fmt in ("B", "<q", "<i", "<h", "<H", "?"):
            values = [int(v) for v in values]
        out += struct.pack(("<" if fmt[0] not in "<>" else fmt[0]) + "%d%s" % (count, fmt.lstrip("<>")),
                           *values) if count else b""
    if "truncate" in spec:
        out = out[:spec["truncate"]]
    return out


def gen_npy(path, spec, ctx):
    with open(path, "wb") as f:
        f.write(npy_bytes(spec))


def gen_npz(path, spec, ctx):
    """A .npz: arrays {name: npy spec}; compression "stored" (default) or "deflate"."""
    method = zipfile.ZIP_DEFLATED if spec.get("compression") == "deflate" else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        for name, array in spec["arrays"].items():
            z.writestr(name if name.endswith(".npy") or "." in name else name + ".npy", npy_bytes(array))
    if "truncate" in spec:
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:spec["truncate"]])


def gen_npz_bomb(path, spec, ctx):
    """A deflated .npz whose X.npy member is a valid header declaring megabytes MB of zeros
    (rows x 1024 float64) followed by those zeros: a zip bomb of ~1/1000 its size. With
    lie_size, the zip records only the first lie_size bytes (the member inflates to more).
    y is a small valid label array unless omitted."""
    megabytes = spec.get("megabytes", 256)
    rows = megabytes * 1024 // 8
    header_spec = {"dtype": "<f8", "shape": [rows, 1024], "data_hex": ""}
    head = npy_bytes(header_spec)
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        if spec.get("with_y", True):
            z.writestr("y.npy", npy_bytes({"dtype": "|u1", "shape": [rows], "fill": "labels"}))
        with z.open("X.npy", "w", force_zip64=False) as member:
            member.write(head)
            for _ in range(megabytes):
                member.write(chunk)


def gen_idx_dataset(path, spec, ctx):
    """A built-in-style IDX dataset directory (for FILKIT_DATA_DIR=<parent>, --data <name>):
    {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. spec: train (n), test (n), rows, cols,
    gzip (false), classes (10)."""
    os.makedirs(path, exist_ok=True)
    rnd = rng_for(spec)
    side_r, side_c = spec.get("rows", 4), spec.get("cols", 4)
    for part, n in (("train", spec.get("train", 40)), ("t10k", spec.get("test", 20))):
        labels = bytes(i % spec.get("classes", 10) for i in range(n))
        images = bytes(rnd.randrange(256) for _ in range(n * side_r * side_c))
        files = {
            "%s-labels-idx1-ubyte" % part: struct.pack(">II", 0x801, n) + labels,
            "%s-images-idx3-ubyte" % part: struct.pack(">IIII", 0x803, n, side_r, side_c) + images,
        }
        for name, content in files.items():
            if spec.get("gzip"):
                with gzip.open(os.path.join(path, name + ".gz"), "wb") as f:
                    f.write(content)
            else:
                with open(os.path.join(path, name), "wb") as f:
                    f.write(content)


def gen_idx(path, spec, ctx):
    """One IDX file: kind images|labels, dims, fill (zeros; labels: i % 10), first (the first data
    byte), data_bytes (how many data bytes to write instead of the declared count), gzip."""
    kind = spec.get("kind", "images")
    dims = spec["dims"]
    magic = 0x803 if kind == "images" else 0x801
    head = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims)
    count = spec.get("data_bytes")
    if count is None:
        count = 1
        for d in dims:
            count *= d
    if spec.get("fill") == "labels":
        data = bytearray(i % 10 for i in range(count))
    else:
        data = bytearray(count)
    if "first" in spec and count:
        data[0] = spec["first"]
    content = head + data
    if spec.get("gzip"):
        with gzip.open(path, "wb") as f:
            f.write(content)
    else:
        with open(path, "wb") as f:
            f.write(content)


def cifar_records(spec):
    """CIFAR-10 records (record_bytes 3073: a label byte, then 3072 seeded random pixel bytes, the
    red, green and blue planes row by row): `records` of them labelled i % 10, `labels`
    {index: label} overriding some, `extra_bytes` appended after the last."""
    rnd = rng_for(spec)
    pixels = spec.get("record_bytes", 3073) - 1
    overrides = {int(k): v for k, v in spec.get("labels", {}).items()}
    out = bytearray()
    for i in range(spec.get("records", 10)):
        out.append(overrides.get(i, i % 10))
        out += rnd.randbytes(pixels)
    return bytes(out) + bytes(spec.get("extra_bytes", 0))


def gen_cifar_batch(path, spec, ctx):
    """One CIFAR-10 binary batch file: see cifar_records."""
    with open(path, "wb") as f:
        f.write(cifar_records(spec))


def gen_cifar_dataset(path, spec, ctx):
    """A CIFAR-10 binary directory (for --data cifar10:{dir}/..., or FILKIT_DATA_DIR=<parent> and
    --data cifar10 when named cifar10): data_batch_1.bin .. data_batch_5.bin of `train` records
    each and test_batch.bin of `test` (10 each), labels i % 10."""
    os.makedirs(path, exist_ok=True)
    for b in range(1, 6):
        gen_cifar_batch(os.path.join(path, "data_batch_%d.bin" % b),
                        {"records": spec.get("train", 10), "seed": 10 * spec.get("seed", 1) + b}, ctx)
    gen_cifar_batch(os.path.join(path, "test_batch.bin"), {"records": spec.get("test", 10), "seed": spec.get("seed", 1)}, ctx)


def gen_gzip_bomb_idx(path, spec, ctx):
    """A gzipped IDX image file: the header declares dims, the stream inflates to header +
    megabytes MB of zeros, built from concatenated gzip members of 1 MB (fast to make)."""
    dims = spec["dims"]
    head = struct.pack(">I", 0x803) + b"".join(struct.pack(">I", d) for d in dims)
    member = gzip.compress(bytes(1 << 20), compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, compresslevel=9))
        for _ in range(spec.get("megabytes", 256)):
            f.write(member)


def gen_truncated_gzip(path, spec, ctx):
    """Gzip of `source` (a file already in the directory) cut to `keep` bytes (or a fraction)."""
    with open(os.path.join(ctx["dir"], spec["source"]), "rb") as f:
        data = gzip.compress(f.read())
    keep = spec.get("keep")
    if keep is None:
        keep = int(len(data) * spec.get("fraction", 0.5))
    with open(path, "wb") as f:
        f.write(data[:keep])


# A minimal CBOR codec (RFC 8949: the subset nlohmann::json writes) for checkpoint payloads.

def cbor_decode(data, pos=0):
    initial = data[pos]
    major, info = initial >> 5, initial & 31
    pos += 1
    if major == 7:
        if info == 20:
            return False, pos
        if info == 21:
            return True, pos
        if info in (22, 23):
            return None, pos
        if info == 25:
            return struct.unpack(">e", data[pos:pos + 2])[0], pos + 2
        if info == 26:
            return struct.unpack(">f", data[pos:pos + 4])[0], pos + 4
        if info == 27:
            return struct.unpack(">d", data[pos:pos + 8])[0], pos + 8
        raise CaseError("CBOR: simple value %d" % info)
    if info < 24:
        arg = info
    elif info in (24, 25, 26, 27):
        width = 1 << (info - 24)
        arg = int.from_bytes(data[pos:pos + width], "big")
        pos += width
    else:
        raise CaseError("CBOR: indefinite lengths are not handled")
    if major == 0:
        return arg, pos
    if major == 1:
        return -1 - arg, pos
    if major == 2:
        return bytes(data[pos:pos + arg]), pos + arg
    if major == 3:
        return data[pos:pos + arg].decode("utf-8"), pos + arg
    if major == 4:
        items = []
        for _ in range(arg):
            item, pos = cbor_decode(data, pos)
            items.append(item)
        return items, pos
    if major == 5:
        obj = {}
        for _ in range(arg):
            key, pos = cbor_decode(data, pos)
            obj[key], pos = cbor_decode(data, pos)
        return obj, pos
    if major == 6:
        return cbor_decode(data, pos)
    raise CaseError("CBOR: major type %d" % major)


def cbor_head(major, arg):
    if arg < 24:
        return bytes([major << 5 | arg])
    for info, width in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if arg < 1 << (8 * width):
            return bytes([major << 5 | info]) + arg.to_bytes(width, "big")
    raise CaseError("CBOR: integer too large")


def cbor_encode(value):
    if value is None:
        return b"\xf6"
    if value is True:
        return b"\xf5"
    if value is False:
        return b"\xf4"
    if isinstance(value, int):
        return cbor_head(0, value) if value >= 0 else cbor_head(1, -1 - value)
    if isinstance(value, float):
        return b"\xfb" + struct.pack(">d", value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return cbor_head(3, len(raw)) + raw
    if isinstance(value, bytes):
        return cbor_head(2, len(value)) + value
    if isinstance(value, list):
        return cbor_head(4, len(value)) + b"".join(cbor_encode(v) for v in value)
    if isinstance(value, dict):
        return cbor_head(5, len(value)) + b"".join(cbor_encode(k) + cbor_encode(v) for k, v in value.items())
    raise CaseError("CBOR: cannot encode %r" % (value,))


CHECKPOINT_MAGIC = b"\x89FKDPSGD"
CHECKPOINT_HEADER = 24


def checkpoint_frame(payload, version):
    return CHECKPOINT_MAGIC + struct.pack("<IQI", version, len(payload), zlib.crc32(payload)) + payload


def edit_payload(document, edit):
    """Applies one edit {path: "a.b.0", set | truncate | append | delete | nest | scale} to a
    decoded payload: set a value ("nan", "inf" for those floats), keep the first truncate entries of
    a list, append a value, delete a key, nest a 0 inside this many lists, multiply every entry."""
    keys = [int(k) if k.lstrip("-").isdigit() else k for k in edit["path"].split(".")]
    parent = document
    for key in keys[:-1]:
        parent = parent[key]
    last = keys[-1]
    if "set" in edit:
        value = edit["set"]
        if isinstance(value, str) and value in ("nan", "inf", "-inf"):
            value = float(value)
        parent[last] = value
    elif "truncate" in edit:
        parent[last] = parent[last][:edit["truncate"]]
    elif "append" in edit:
        parent[last].append(edit["append"])
    elif "delete" in edit:
        del parent[last]
    elif "nest" in edit:
        value = 0
        for _ in range(edit["nest"]):
            value = [value]
        parent[last] = value
    elif "scale" in edit:
        parent[last] = [v * edit["scale"] for v in parent[last]]
    else:
        raise CaseError("unknown checkpoint edit %r" % (edit,))


def gen_checkpoint(path, spec, ctx):
    """A real checkpoint: runs filkit with `args` (which must write `path`, e.g. dpsgd
    --checkpoint ... --stop-after ...), then applies `mutate`: flip_bit [byte, bit] (byte < 0
    counts from the end), truncate (bytes to keep), edits (payload edits, then re-framed with a
    correct header and CRC, and the version filkit wrote), version (re-framed with this version
    number), bare_cbor (only the payload, as format version 1 wrote it)."""
    argv = substitute(spec["args"], ctx["dir"])
    result = subprocess.run([ctx["filkit"]] + argv, cwd=ctx["dir"], capture_output=True, timeout=120,
                            env=ctx["base_env"])
    if result.returncode != 0 or not os.path.exists(path):
        raise CaseError("the checkpoint command failed (exit %d): %s" % (
            result.returncode, result.stderr.decode("utf-8", "replace").strip()[-400:]))
    mutate = spec.get("mutate", {})
    with open(path, "rb") as f:
        data = bytearray(f.read())
    written_version = struct.unpack_from("<I", data, len(CHECKPOINT_MAGIC))[0]
    if "flip_bit" in mutate:
        byte, bit = mutate["flip_bit"]
        data[byte] ^= 1 << bit
    if "truncate" in mutate:
        keep = mutate["truncate"]
        data = data[:keep] if keep >= 0 else data[:len(data) + keep]
    payload = bytes(data[CHECKPOINT_HEADER:])
    if "edits" in mutate or "version" in mutate or mutate.get("bare_cbor"):
        if "edits" in mutate:
            document, end = cbor_decode(payload)
            if end != len(payload):
                raise CaseError("the checkpoint payload has trailing bytes")
            for edit in mutate["edits"]:
                edit_payload(document, edit)
            payload = cbor_encode(document)
        if mutate.get("bare_cbor"):
            data = bytearray(payload)
        else:
            data = bytearray(checkpoint_frame(payload, mutate.get("version", written_version)))
    with open(path, "wb") as f:
        f.write(data)


def gen_run(path, spec, ctx):
    """The output of a successful filkit command (args), e.g. a real summary JSON for report."""
    argv = substitute(spec["args"], ctx["dir"])
    result = subprocess.run([ctx["filkit"]] + argv, cwd=ctx["dir"], capture_output=True, timeout=120,
                            env=ctx["base_env"])
    if result.returncode != 0:
        raise CaseError("the generating command failed (exit %d): %s" % (
            result.returncode, result.stderr.decode("utf-8", "replace").strip()[-400:]))


def gen_char_device(path, spec, ctx):
    """A character device like /dev/null (major 1, minor 3) made here, so that a run that
    replaced it would replace only this copy. Needs root; otherwise a symbolic link to
    /dev/null stands in (an unprivileged filkit could not replace /dev/null anyway)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(path, 0o666)
    except PermissionError:
        ctx["notes"].append("not root: %s is a symbolic link to /dev/null" % os.path.basename(path))
        os.symlink("/dev/null", path)


def gen_random_bytes(path, spec, ctx):
    """size seeded pseudo-random bytes."""
    rnd = rng_for(spec)
    with open(path, "wb") as f:
        f.write(bytes(rnd.randrange(256) for _ in range(spec["size"])))


def gen_nested_json(path, spec, ctx):
    """A summary {"command": command, field: [[[...]]]} nesting depth levels in all (the object
    is one), written without recursion."""
    depth = spec["depth"]
    with open(path, "w") as f:
        f.write('{"command": %s, %s: %s%s}' % (json.dumps(spec.get("command", "measure")),
                                                json.dumps(spec.get("field", "a")),
                                                "[" * (depth - 1), "]" * (depth - 1)))


GENERATORS = {
    "random_bytes": gen_random_bytes, "nested_json": gen_nested_json,
    "csv": gen_csv, "wide_csv": gen_wide_csv, "arff": gen_arff, "npy": gen_npy, "npz": gen_npz,
    "npz_bomb": gen_npz_bomb, "idx_dataset": gen_idx_dataset, "idx": gen_idx,
    "cifar_dataset": gen_cifar_dataset, "cifar_batch": gen_cifar_batch,
    "gzip_bomb_idx": gen_gzip_bomb_idx, "truncated_gzip": gen_truncated_gzip,
    "checkpoint": gen_checkpoint, "run": gen_run, "char_device": gen_char_device,
}


def materialise(files, ctx):
    directory = ctx["dir"]
    for spec in files:
        spec = substitute(spec, directory)
        rel = spec["path"]
        path = rel if isinstance(rel, bytes) else os.path.join(directory, rel)
        if isinstance(rel, bytes):
            path = os.path.join(directory.encode(), rel)
        parent = os.path.dirname(path)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent)
        if "text" in spec or "lines" in spec:
            text = spec["text"] if "text" in spec else "".join(line + "\n" for line in spec["lines"])
            with open(path, "wb") as f:
                f.write(text.encode(spec.get("encoding", "utf-8")))
        elif spec.get("remove"):
            os.remove(path)
        elif "hex" in spec:
            with open(path, "wb") as f:
                f.write(bytes.fromhex(spec["hex"]))
        elif "copy" in spec:
            shutil.copyfile(os.path.join(REPO, spec["copy"]), path)
        elif "copy_from" in spec:
            shutil.copyfile(os.path.join(directory, spec["copy_from"]), path)
        elif "symlink" in spec:
            os.symlink(spec["symlink"], path)
        elif spec.get("dir"):
            os.makedirs(path, exist_ok=True)
        elif spec.get("fifo"):
            os.mkfifo(path)
        elif "generator" in spec:
            if spec["generator"] not in GENERATORS:
                raise CaseError("unknown generator %r" % spec["generator"])
            GENERATORS[spec["generator"]](path, spec, ctx)
        else:
            raise CaseError("file %r: no content" % rel)
        if "mode" in spec:
            os.chmod(path, int(spec["mode"], 8))


# --------------------------------------------------------------------------------------------
# Snapshots: what an error must not touch


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
