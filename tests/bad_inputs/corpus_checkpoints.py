"""The bad-input corpus' resume files (replay.py): a real one written by filkit, then a bit
flipped, cut, or its CBOR payload edited and framed again with a correct header and CRC. Standard
library only."""

import os
import struct
import zlib

from corpus_case import CaseError, run_setup_command


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
    run_setup_command(spec, ctx, "the checkpoint command")
    if not os.path.exists(path):
        raise CaseError("the checkpoint command wrote no %s" % os.path.basename(path))
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
