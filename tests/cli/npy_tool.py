#!/usr/bin/env python3
"""Small helpers of the CLI tests, standard library only (no numpy):

  set FILE INDEX VALUE       overwrite float element INDEX (flat) of a .npy file
                             (VALUE: a number, nan, inf or -inf)
  same-rows A B ROW...       exit 1 unless the given rows (first axis) of two .npy files
                             hold the same bits
  finite FILE...             exit 1 when a .npy file holds NaN or +-Inf
  ckpt-finite MANIFEST...    exit 1 when a gdn-cp checkpoint (its parts) holds NaN or +-Inf
  ckpt-close A B REL         exit 1 unless two gdn-cp checkpoints of one layout (manifests A, B)
                             hold the same values and moments to REL: in each part,
                             max |a - b| <= REL max |b|
  ckpt-poison SRC DST        copy a checkpoint (manifest SRC and its parts) to the manifest
                             name DST with its first value set to NaN and the checksums
                             recomputed, so only its values are wrong
  write-i64 FILE SHAPE V...  write an int64 .npy of SHAPE ("3" or "1,24") holding V...

As a module: read_int64(path) -> (shape, values) and write_int64(path, shape, values).
"""
import json
import math
import os
import struct
import sys


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path + ": not a .npy file"
    major = data[6]
    hlen_size = 2 if major == 1 else 4
    hlen = int.from_bytes(data[8:8 + hlen_size], "little")
    start = 8 + hlen_size + hlen
    header = eval(data[8 + hlen_size:start].decode("latin1"))  # numpy's dict literal
    return data, start, header


def fmt_of(descr):
    return {"<f4": "<f", "<f8": "<d"}[descr]


def floats(path):
    data, start, header = read_npy(path)
    fmt = fmt_of(header["descr"])
    size = struct.calcsize(fmt)
    return [x[0] for x in struct.iter_unpack(fmt, data[start:])], header, size


def cmd_set(path, index, value):
    data, start, header = read_npy(path)
    fmt = fmt_of(header["descr"])
    size = struct.calcsize(fmt)
    at = start + int(index) * size
    blob = bytearray(data)
    blob[at:at + size] = struct.pack(fmt, float(value))
    with open(path, "wb") as f:
        f.write(blob)
    return 0


def cmd_same_rows(a, b, *rows):
    da, sa, ha = read_npy(a)
    db, sb, hb = read_npy(b)
    row_a = len(da[sa:]) // ha["shape"][0]
    row_b = len(db[sb:]) // hb["shape"][0]
    assert row_a == row_b, "rows differ in size"
    for r in map(int, rows):
        if da[sa + r * row_a:sa + (r + 1) * row_a] != db[sb + r * row_b:sb + (r + 1) * row_b]:
            print(f"row {r} of {a} and {b} differ")
            return 1
    return 0


def cmd_finite(*paths):
    for p in paths:
        values, _, _ = floats(p)
        bad = [i for i, x in enumerate(values) if not math.isfinite(x)]
        if bad:
            print(f"{p}: element {bad[0]} is {values[bad[0]]}")
            return 1
    return 0


def read_ckpt(path):
    """A checkpoint file: its bytes, where its data starts, its header."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    assert data[:8] == b"GDNCKPT1", path + ": not a checkpoint"
    hlen = struct.unpack_from("<Q", data, 8)[0]
    header = json.loads(data[16:16 + hlen].decode())
    return data, 16 + hlen, header


def fnv1a64(blob):
    h = 0xCBF29CE484222325
    for byte in blob:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_ckpt(path, header, data):
    """Writes a checkpoint file; returns (bytes, checksum)."""
    text = json.dumps(header).encode()
    blob = bytearray(b"GDNCKPT1" + struct.pack("<Q", len(text)) + text + data)
    checksum = fnv1a64(blob)
    blob += struct.pack("<Q", checksum) + b"GDNCKEND"
    with open(path, "wb") as f:
        f.write(blob)
    return len(blob), checksum


def cmd_ckpt_finite(*manifests):
    for m in manifests:
        _, _, header = read_ckpt(m)
        fmt = "<f" if header["dtype"] == "f32" else "<d"
        for part in header["parts"]:
            p = os.path.join(os.path.dirname(m), part["file"])
            data, start, _ = read_ckpt(p)
            for i, (x,) in enumerate(struct.iter_unpack(fmt, data[start:len(data) - 16])):
                if not math.isfinite(x):
                    print(f"{p}: value {i} is {x}")
                    return 1
    return 0


def cmd_ckpt_close(a, b, rel):
    _, _, ha = read_ckpt(a)
    _, _, hb = read_ckpt(b)
    if len(ha["parts"]) != len(hb["parts"]) or ha["dtype"] != hb["dtype"]:
        print(f"{a} and {b}: other layouts or dtypes")
        return 1
    fmt = "<f" if ha["dtype"] == "f32" else "<d"
    worst = 0.0
    for pa, pb in zip(ha["parts"], hb["parts"]):
        da, sa, _ = read_ckpt(os.path.join(os.path.dirname(a), pa["file"]))
        db, sb, _ = read_ckpt(os.path.join(os.path.dirname(b), pb["file"]))
        xa = [x for (x,) in struct.iter_unpack(fmt, da[sa:len(da) - 16])]
        xb = [x for (x,) in struct.iter_unpack(fmt, db[sb:len(db) - 16])]
        if len(xa) != len(xb):
            print(f"{pa['file']}: {len(xa)} values vs {len(xb)}")
            return 1
        scale = max((abs(x) for x in xb), default=0.0) or 1.0
        worst = max(worst, max((abs(x - y) for x, y in zip(xa, xb)), default=0.0) / scale)
    print(f"largest difference {worst:.2e} of each part's largest value")
    return 0 if worst <= float(rel) else 1


def cmd_ckpt_poison(src, dst):
    _, _, man = read_ckpt(src)
    fmt = "<f" if man["dtype"] == "f32" else "<d"
    step = int(os.path.basename(dst)[len("ckpt-"):-len(".bin")])
    man["step"] = step
    for k, part in enumerate(man["parts"]):
        data, start, header = read_ckpt(os.path.join(os.path.dirname(src), part["file"]))
        if k == 0:
            struct.pack_into(fmt, data, start, float("nan"))
        header["step"] = step
        part["file"] = os.path.basename(dst) + part["file"][part["file"].rindex(".part-"):]
        part["bytes"], part["checksum"] = write_ckpt(
            os.path.join(os.path.dirname(dst), part["file"]), header, data[start:len(data) - 16])
    write_ckpt(dst, man, b"")
    return 0


def read_int64(path):
    """(shape, values) of a little-endian int64 .npy."""
    data, start, header = read_npy(path)
    assert header["descr"] == "<i8", path + ": not int64"
    n = 1
    for d in header["shape"]:
        n *= d
    return tuple(header["shape"]), struct.unpack_from("<%dq" % n, data, start)


def write_int64(path, shape, values):
    """An int64 .npy (numpy's format 1.0: the header padded to 64 bytes)."""
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': %s, }" % (repr(tuple(shape)),)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%dq" % len(values), *(int(v) for v in values)))


def cmd_write_i64(path, shape, *values):
    write_int64(path, [int(x) for x in shape.split(",")], values)
    return 0


COMMANDS = {"set": cmd_set, "write-i64": cmd_write_i64, "same-rows": cmd_same_rows, "finite": cmd_finite,
            "ckpt-finite": cmd_ckpt_finite, "ckpt-poison": cmd_ckpt_poison,
            "ckpt-close": cmd_ckpt_close}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__)
        sys.exit(2)
    sys.exit(COMMANDS[sys.argv[1]](*sys.argv[2:]))
