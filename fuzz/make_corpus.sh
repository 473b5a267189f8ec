#!/usr/bin/env bash
# Writes the seed corpora fuzz/corpus/<target>/: a few small valid (and a few nearly valid) inputs
# per fuzz target, in the input layout each target's comment describes. Deterministic (gzip and zip
# timestamps fixed), so rerunning it changes nothing; needs only /usr/bin/python3.
#   bash fuzz/make_corpus.sh
set -euo pipefail
cd "$(dirname "$0")"
exec /usr/bin/python3 - <<'EOF'
import gzip, io, json, os, shutil, struct, zipfile, zlib

def target(name):
    path = os.path.join("corpus", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    def put(file, data):
        with open(os.path.join(path, file), "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
    return put

def gz(data):
    return gzip.compress(data, mtime=0)

# ---- IDX: big-endian magic (0x0801 labels, 0x0803 images), dimensions, unsigned bytes.
labels = struct.pack(">II", 0x801, 3) + bytes([0, 1, 9])
images = struct.pack(">IIII", 0x803, 2, 2, 3) + bytes(range(0, 240, 20))
no_images = struct.pack(">IIII", 0x803, 0, 28, 28)
put = target("idx")
put("labels", labels)
put("images", images)
put("no-images", no_images)
put("labels.gz", gz(labels))
put("images.gz", gz(images))
put("images-two-members.gz", gz(images[:9]) + gz(images[9:]))
put = target("idx_gzip")  # a mode byte, then the content the target compresses
put("labels", b"\x00" + labels)
put("images", b"\x00" + images)
put("images-two-members", b"\x81" + images)
put("images-trailing", b"\x02" + images)
put("images-truncated", b"\x04" + images)
put("images-wrong-size", b"\x08" + images)

# ---- CSV and ARFF: 4 option bytes (fuzz/tabular_loader.hpp), then the file.
put = target("csv")
put("classification", b"\x02\x00\x00\x00" + b"a,b,y\n1,x,0\n2,y,1\n3,x,0\n4,y,1\n5,x,1\n")
put("regression", b"\x01\x11\x00\x00" + b"x1,x2,target\n0.5,1e3,1.5\n-2,+4,2.5\n3,5,-1\n7,8,0\n")
put("quoted-missing-level", b"\x02\x26\x01\x00" +
    b'\xef\xbb\xbfage,"na,me",cls\r\n30,"a ""q""",yes\r\n,b,no\r\n40,NA,yes\r\n\r\n50,"multi\nline",no\r\n')
put("classes", b"\x01\x40\x00\x00" + b"f,label\n1,a\n2,b\n3,c\n4,a\n5,b\n6,c\n")
put("drop-categorical", b"\x00\x0c\x01\x02" + b"t,c,d\nu,1,9\nv,2,8\nu,3,7\nv,1,6\n")
put = target("arff")
put("typed", b"\x03\x00\x00\x00" + b"""% a comment
@relation demo
@attribute a numeric
@attribute 'c c' {x,'y z'}
@attribute s string
@attribute t {p,q}
@data
1,x,'hi',p
2,'y z',"ho",q
?,x,a,p % trailing comment
3,x,b,q
4,'y z',\\'e,p
""")
put("regression", b"\x01\x01\x00\x00" + b"@RELATION r\n@ATTRIBUTE x REAL\n@ATTRIBUTE y INTEGER\n@DATA\n1.5,2\n2.5,3\n3,4\n")
put("missing-level", b"\x01\x82\x00\x00" + b"@relation m\n@attribute g {a,b,c}\n@attribute k {n,y}\n@data\na,n\n?,y\nc,n\nb,y\n")

# ---- NPY: \x93NUMPY, version, header length, the header dict, C-order little-endian data.
def npy(descr, shape, data, version=(1, 0), fortran=False):
    shape_text = "(%d,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(map(str, shape))
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_text)
    length_bytes = 2 if version[0] == 1 else 4
    total = 6 + 2 + length_bytes + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    length = struct.pack("<H" if length_bytes == 2 else "<I", len(header))
    return b"\x93NUMPY" + bytes(version) + length + header.encode() + data

f8 = npy("<f8", (2, 3), struct.pack("<6d", 0, 1.5, -2, 3e10, 4, 5))
y8 = npy("<f8", (2,), struct.pack("<2d", 0, 1))
put = target("npy")
put("f8-2d", f8)
put("f4-1d", npy("<f4", (3,), struct.pack("<3f", 1, 2, 3)))
put("u1-2d", npy("|u1", (2, 2), bytes([0, 255, 7, 8])))
put("i8-1d", npy("<i8", (2,), struct.pack("<2q", -1, 2**40)))
put("i4-v2", npy("<i4", (1, 2), struct.pack("<2i", 5, -6), version=(2, 0)))
put("f8-v3-empty", npy("<f8", (0, 4), b"", version=(3, 0)))

# ---- NPZ: a zip of .npy members, stored or deflated, with fixed timestamps.
def npz(members, compressed):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
            archive.writestr(info, data)
    return buffer.getvalue()

X = npy("<f8", (4, 2), struct.pack("<8d", 0, 1, 1, 0, 2, 2, 3, 1))
y = npy("<i8", (4,), struct.pack("<4q", 0, 1, 0, 1))
put = target("npz")
put("stored", npz([("X", X), ("y", y)], False))
put("deflated", npz([("X", X), ("y", y)], True))
put("test-split", npz([("X", X), ("y", y), ("X_test", npy("<f4", (1, 2), struct.pack("<2f", 1, 1))),
                       ("y_test", npy("|u1", (1,), b"\x01"))], True))

# ---- CIFAR-10 binary batches: a class-selection byte, then 3073-byte records (label, 3 x 1024 pixels).
def cifar_record(label, seed):
    return bytes([label]) + bytes((seed * 37 + k * 11) % 256 for k in range(3072))
put = target("cifar")
put("three-records-every-class", b"\x00" + cifar_record(0, 1) + cifar_record(9, 2) + cifar_record(3, 3))
put("classes-1-and-3", b"\x05" + cifar_record(1, 4) + cifar_record(3, 5) + cifar_record(2, 6))
put("label-10", b"\x00" + cifar_record(10, 7))
put("cifar-100-record", b"\x00" + b"\x01" + cifar_record(2, 8))
put("short", b"\x00" + cifar_record(4, 9)[:1000])

# ---- The DP-SGD resume file: CBOR (RFC 8949) of what save_state writes, for the fingerprint of
# fuzz/dpsgd_state_fuzz.cpp.
def cbor(value):
    def head(major, n):
        if n < 24: return bytes([major << 5 | n])
        for code, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)): return bytes([major << 5 | code]) + struct.pack(fmt, n)
    if value is None: return b"\xf6"
    if value is True: return b"\xf5"
    if value is False: return b"\xf4"
    if isinstance(value, int): return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, float): return b"\xfb" + struct.pack(">d", value)
    if isinstance(value, str): return head(3, len(value.encode())) + value.encode()
    if isinstance(value, list): return head(4, len(value)) + b"".join(cbor(v) for v in value)
    if isinstance(value, dict): return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(value)

def framed(payload, version=5):  # the file's header: magic, version, payload length, CRC32 (little-endian)
    return b"\x89FKDPSGD" + struct.pack("<IQI", version, len(payload), zlib.crc32(payload)) + payload

# The job of fuzz/dpsgd_state_fuzz.cpp: 2 runs of 10 steps, 4 examples, 2 parameters, snapshots
# after steps 5 and 10, no Adam.
fingerprint = {"settings": {"model": "logistic", "steps": 10, "noise_multiplier": 1.0},
               "train": [4, 2], "test": [2, 2], "data_hash": "12345"}
generator = " ".join(str((k * 2654435761 + 12345) % 2**64) for k in range(312)) + " 312"
def trainer(step):
    return {"parameters": [0.25, -0.5], "first_moment": [0.0, 0.125], "second_moment": [], "adam_steps": 0,
            "generator": generator, "order": [2, 0, 3, 1], "trace": [1.0, 2.0, 0.5, 0.0],
            "spectral": [0.5, 1.0, 0.25, 0.0], "sampled": [min(step, 2), 1, step, 0]}
def sums(sampled, runs):  # per snapshot: the most times an example was sampled, the runs through it
    return [{"trace_per_run": [[1.0, 2.0, 0.5, 0.25], [0.5, 0.0, 1.5, 0.25]][:r],
             "spectral": [0.5, 1.0, 0.25, 0.125], "sampled": [s, s // 2, 0, s]} for s, r in zip(sampled, runs)]
# Run 1, step 6: run 0 finished, the first snapshot reached twice and the second once.
state = {"job": fingerprint, "run": 1, "step": 6, "trainer": trainer(6), "sums": sums([10, 10], [2, 1]),
         "train_accuracy": [[0.75, 1.0], [0.5]], "test_accuracy": [[0.5, 0.5], [1.0]],
         "run_seeds": [42, 2**63 + 5], "parameters": [[0.1, 0.2]], "model_states": [None, None],
         "training_seconds": 1.5, "evaluation_seconds": 0.25}
fresh = dict(state, run=0, step=0, trainer=None, sums=sums([0, 0], [0, 0]), train_accuracy=[[], []],
             test_accuracy=[[], []], run_seeds=[], parameters=[], model_states=[])
put = target("dpsgd_state")  # a mode byte (even: the payload, framed by the target; odd: the file)
put("state", b"\x00" + cbor(state))
put("run-0-step-3", b"\x00" + cbor(dict(state, run=0, step=3, trainer=trainer(3), sums=sums([0, 0], [0, 0]),
                                      train_accuracy=[[], []], test_accuracy=[[], []], run_seeds=[42],
                                      parameters=[], model_states=[{"cosine": [0.5]}])))
put("fresh", b"\x00" + cbor(fresh))
put("other-job", b"\x00" + cbor(dict(state, job=dict(fingerprint, settings=dict(fingerprint["settings"], steps=20)))))
put("file", b"\x01" + framed(cbor(state)))
put("file-version-1", b"\x01" + cbor(state))
put("file-version-2", b"\x01" + framed(cbor(state), version=2))

# ---- Report inputs: summary JSON \0 per-example CSV \0 ... (fuzz/report_fuzz.cpp).
def summary(command, **fields):
    return json.dumps(dict(command=command, filkit_version="0.1.0", seed=1, **fields)).encode()

def table(header, rows):
    return (",".join(header) + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows)).encode()

measure_table = table(["index", "label", "eta", "dfil", "loss", "gradient_norm"],
                      [[0, 0, 0.5, 0.2, 0.1, 1.0], [1, 1, 2.5, 1.1, 0.3, 0.5], [2, 1, 0.01, 0.05, 1e-3, 2.0],
                       [3, 0, "nan", "inf", 0, 0]])
bound_table = table(["index", "dfil_bound", "fil_bound", "attack_mse"],
                    [[0, 0.5, 0.25, 0.7], [1, 3.0, 2.0, 2.5], [2, 0.01, 0.005, 0.02]])
put = target("report")
put("measure", summary("measure", settings={"data": "fashion-mnist", "classes": [0, 1], "model": "logistic",
                                            "sigma": 1.0, "l2": 0.01},
                       eta={"mean": 1.0, "median": 0.5}, dfil={"median": 0.3}, n=4, d=2) + b"\0" + measure_table)
put("bound", summary("bound", rdp={"mse_bound": 0.3}, perfect_privacy_mse=1.0) + b"\0" + bound_table)
put("reconstruct", summary("reconstruct", rdp={"mse_bound": 0.3}, perfect_privacy_mse=1.0,
                           attack={"above_dfil_bound": {"share": 0.9}}) + b"\0" + bound_table)
put("dpsgd-two-runs", summary("dpsgd", snapshots=[
        {"test_accuracy": 0.8, "dfil": {"mse_bound_at_max": 0.1, "mse_bound_at_median": 0.5}},
        {"test_accuracy": 0.9, "dfil": {"mse_bound_at_max": 0.05, "mse_bound_at_median": 0.2}}]) + b"\0\0" +
    summary("dpsgd", snapshots=[{"test_accuracy": 0.85, "dfil": {"mse_bound_at_max": 0.2}}]) + b"\0")
attack = {"prior_accuracy": 0.5, "prior_by_group": [0.5, 0.5],
          "by_sigma": [{"sigma": 0.1, "eta_mean": 2.0, "white_box": 0.9, "black_box": 0.8, "release_test_mse": 0.1,
                        "white_box_by_group": [0.7, 0.95], "black_box_by_group": [0.6, 0.9]},
                       {"sigma": 1.0, "eta_mean": 0.2, "white_box": 0.6, "black_box": 0.55, "release_test_mse": 0.3,
                        "white_box_by_group": [0.5, 0.7], "black_box_by_group": [0.5, 0.6]}]}
put("attack", summary("attack", **attack))
put("irfil", summary("irfil", iterations=[{"iteration": 0, "eta": {"std": 1.0, "mean": 2.0}},
                                          {"iteration": 1, "eta": {"std": 0.5, "mean": 1.8}}],
                     eta_before=[0.5, 1.0, 4.0], eta_after=[1.0, 1.1, 1.2], attack_before=attack))
put("unknown-command", summary("something") + b"\0" + table(["a"], [[1]]))
# Hostile strings (issue 27): method names, method codes and attack keys that would run a command,
# break out of a gnuplot string or leave the report directory if pasted into a script or a path.
hostile = ["x` touch PWNED `y", "it's '.system('touch PWNED').'", 'q"`touch PWNED`"', "back\\slash\\",
           "$(touch PWNED);", "line\nbreak", "@x ^{a}_{b}", "../../escape", "\u00e9\u0001\u007f"]
scores = {"mse": {"mean": 0.02, "std": 0.01}, "ssim": {"mean": 0.5, "std": 0.1},
          "perfect_privacy": {"mse": {"mean": 0.04}, "ssim": {"mean": 0.45}}}
put("learned-attack-hostile-names", summary(
    "learned-attack", counts={"fixed": 9}, methods={name: scores for name in hostile},
    method_codes={name: k for k, name in enumerate(hostile)},
    reconstructions={"image": [1, 2, 2], "rows": [{"method": kind, "pixels": [0.1, 0.2, 0.3, 0.4]}
                                                  for kind in range(-2, len(hostile))]}))
put("fim-hostile-names", summary("fim", methods=[
    {"method": name, "test_accuracy": {"mean": 0.9, "std": 0.01}, "max_dfil": {"mean": 2.0},
     "mean_dfil": {"mean": 0.5}, "median_dfil": {"mean": 0.4}} for name in hostile] + [{"method": 3}, 7]))
put("irfil-hostile-keys", summary("irfil", **{name: attack for name in hostile}))
# Nesting: at the limit of the JSON readers (64 levels, the object one), beyond it, and far beyond.
def nested(command, field, depth):
    return ('{"command": "%s", "%s": %s%s}' % (command, field, "[" * (depth - 1), "]" * (depth - 1))).encode()
put("nested-64", nested("measure", "a", 64))
put("nested-65", nested("measure", "a", 65))
put("learned-attack-counts-nested-2000", nested("learned-attack", "counts", 2000))

# ---- Option parsers: a selector byte (fuzz/options_fuzz.cpp), then the text.
put = target("options")
for name, selector, text in [("int", 0, "42"), ("index", 1, "-7"), ("ull", 2, "18446744073709551615"),
                             ("double", 4, "1.5e-3"), ("float", 5, "inf"), ("bool", 6, "off"), ("string", 7, "a b"),
                             ("enum", 8, "least-squares"), ("ints", 10, "0,1,2"), ("indices", 11, "all"),
                             ("doubles", 12, "0.5,1e-6,-2"), ("strings", 13, "SEX,,AGE"), ("optional", 14, "auto"),
                             ("optional-double", 15, "0.25"), ("optional-ints", 16, "3,5"),
                             ("optional-enum", 17, "softmax"), ("optional-bool", 18, "true"),
                             ("index-list", 19, "0, 5 ,17")]:
    put(name, bytes([selector]) + text.encode())

# ---- The command line: one argument a line, after "filkit" (fuzz/cli_fuzz.cpp).
put = target("cli")
for name, args in [("measure", ["measure", "--data", "data.csv", "--target", "y", "--classes", "0,1", "--model",
                                "logistic", "--sigma", "0.5", "--subset", "class=1", "--no-intercept", "--quiet"]),
                   ("measure-auto", ["measure", "--pca", "auto", "--row-scaling", "unit-ball", "--threads=2", "--l2", "1e-3"]),
                   ("dpsgd", ["dpsgd", "--steps", "10", "--noise-multiplier", "1", "--batch-size", "5",
                              "--sampling", "poisson", "--report-epochs", "1,5", "--hidden", "8", "--hidden", "4"]),
                   ("accountant", ["accountant", "--q", "0.01", "--noise-multiplier", "1.1", "--steps", "100",
                                   "--orders", "2,4.5,8", "--mechanism", "0.1,1,10"]),
                   ("report", ["report", "--input", "a.json", "--table", "a.csv", "--report", "out", "--no-images"]),
                   ("bound", ["bound", "--data", "mnist", "--sigma", "1"]),
                   ("reconstruct", ["reconstruct", "--json", "r.json"]),
                   ("irfil", ["irfil", "--iterations", "3"]),
                   ("attack", ["attack", "--attribute", "SEX"]),
                   ("version", ["--version"]),
                   ("help", ["measure", "--help"])]:
    put(name, "\n".join(args).encode())
# ---- The PLD accountant: a mode byte, then "h truncation_mass (sigma q steps)... delta eps", a NUL,
# a state dict (fuzz/pld_fuzz.cpp).
put = target("pld")
for name, mode, text in [("default", 0, "1e-2 1e-15 1.0 0.01 1000 1e-5 1.0"),
                         ("two-events", 0, "1e-2 1e-15 1.1 0.01 500 0.8 0.1 20 1e-6 2.0"),
                         ("without-replacement", 1, "5e-2 1e-12 2.0 0.25 100 1e-5 0.5"),
                         ("huge-steps", 0, "1e-2 1e-15 1.0 0.01 2e15 1e-5 1.0"),
                         ("tiny-q", 0, "1e-2 1e-15 1.0 1e-300 1000 1e-5 1.0"),
                         ("coarse-grid", 0, "1 1e-15 0.5 1 10 1e-5 1.0"),
                         ("fine-grid-small-noise", 0, "1e-4 1e-15 0.01 1 1 1e-5 1.0")]:
    put(name, bytes([mode]) + text.encode())
state = {"accountant": "pld", "sampling": "poisson", "discretization": 1e-2, "truncation_mass": 1e-15,
         "history": [{"noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 1000}]}
put("state", bytes([2]) + b"1e-2 1e-15 1e-5 1.0\0" + json.dumps(state).encode())
put("state-nan-rate", bytes([2]) + b"1e-2 1e-15\0" + json.dumps(state).replace("0.01", "NaN").encode())

# ---- The shadow-model store: a mode byte (bits: fix the .npy's SHA-256, the row hashes, the model
# hashes), the JSON, a NUL, the .npy (fuzz/shadow_store_fuzz.cpp).
def npy(rows):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"".join(
        struct.pack("<%dd" % len(row), *row) for row in rows)
put = target("shadow_store")
store = {"format": "filkit shadow models 2", "fingerprint": {"seed": 5}, "parameters": 2, "candidates": [0, 2],
         "row_hashes": ["", ""], "model_sha256": ["", ""], "npy_sha256": ""}
models = npy([[0.5, -1.0], [2.0, 0.25]])
put("store", bytes([7]) + json.dumps(store).encode() + b"\0" + models)
put("store-unfixed", bytes([0]) + json.dumps(store).encode() + b"\0" + models)
put("store-beyond-candidates", bytes([7]) + json.dumps(dict(store, candidates=[1, 9])).encode() + b"\0" + models)
put("store-format-1", bytes([7]) + json.dumps(dict(store, format="filkit shadow models 1")).encode() + b"\0" + models)
put("store-wrong-shape", bytes([7]) + json.dumps(dict(store, parameters=3)).encode() + b"\0" + models)
put("store-other-seed", bytes([7]) + json.dumps(dict(store, fingerprint={"seed": 6})).encode() + b"\0" + models)

# Every recorded finding (findings/<target>/, described in README.md) is a seed too, so that each
# short run in the test suite replays them all.
for name in sorted(os.listdir("findings")):
    for finding in sorted(os.listdir(os.path.join("findings", name))):
        shutil.copyfile(os.path.join("findings", name, finding), os.path.join("corpus", name, "finding-" + finding))

print("fuzz/make_corpus.sh: wrote", sum(len(files) for _, _, files in os.walk("corpus")), "seeds under fuzz/corpus/")
EOF
