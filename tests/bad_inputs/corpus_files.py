"""The files of a bad-input case (replay.py): written from the case's text, bytes, copies and
links, or made by a generator from its parameters (the `generator` of a file in cases.json, each
documented below: tables, NPY/NPZ, IDX, CIFAR-10, bombs, resume files in corpus_checkpoints.py,
devices). Standard library only."""

import gzip
import json
import os
import random
import shutil
import stat
import struct
import zipfile

from corpus_case import REPO, CaseError, run_setup_command, substitute
from corpus_checkpoints import gen_checkpoint


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


def gen_run(path, spec, ctx):
    """The output of a successful filkit command (args), e.g. a real summary JSON for report."""
    run_setup_command(spec, ctx, "the generating command")


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
