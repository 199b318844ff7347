#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference GGUF files for fucina's reader, written from the GGUF
specification with struct only (no gguf package, no fucina code).

  gen_gguf.py OUT_DIR

writes OUT_DIR/gguf_reference_v3.gguf (every metadata value type, nested
arrays, general.alignment = 64, tensors of types 0, 1, 2, 24, 30 and both
layouts of id 42) and OUT_DIR/gguf_reference_v2.gguf (version 2, default
alignment 32, types 0 and 8). Quantized tensor bytes are ggml's own output
from tests/data/ggml/<type>/quant.bin (6 rows x 1024), so the C test can
compare what it reads with those files. The outputs are committed under
tests/data/io/; tests/io/test_gguf.c holds the expected values.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "data", "ggml")

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
              BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gstr(v)
    if vtype == ARRAY:
        elem, items = v
        out = struct.pack("<IQ", elem, len(items))
        return out + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR_FMT[vtype], v)


def golden(name):
    with open(os.path.join(GOLDEN, name, "quant.bin"), "rb") as f:
        return f.read()


def write(path, version, kvs, tensors, align):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, dims_innermost_first, bytes)]"""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + value(vtype, v)
    off = 0
    for name, gtype, dims, raw in tensors:
        out += gstr(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, off)
        off += (len(raw) + align - 1) // align * align
    out += b"\0" * ((align - len(out) % align) % align)
    for _, _, _, raw in tensors:
        out += raw + b"\0" * ((align - len(raw) % align) % align)
    with open(path, "wb") as f:
        f.write(out)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = argv[1]
    f32 = b"".join(struct.pack("<f", i * 0.5 - 1.25) for i in range(6))
    f16 = struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0)
    i8 = struct.pack("<5b", -128, -1, 0, 1, 127)
    bf16 = struct.pack("<4H", 0x3F80, 0xC000, 0x3F00, 0x7F80)  # 1, -2, 0.5, +inf
    kvs = [
        ("general.architecture", STRING, "fucina-test"),
        ("general.alignment", U32, 64),
        ("t.u8", U8, 200),
        ("t.i8", I8, -100),
        ("t.u16", U16, 60000),
        ("t.i16", I16, -30000),
        ("t.u32", U32, 4000000000),
        ("t.i32", I32, -2000000000),
        ("t.f32", F32, 0.15625),
        ("t.bool", BOOL, 1),
        ("t.u64", U64, 2**63 + 7),
        ("t.i64", I64, -(2**62)),
        ("t.f64", F64, 0.1),
        ("t.str.empty", STRING, ""),
        ("t.arr.i32", ARRAY, (I32, [1, -2, 3])),
        ("t.arr.str", ARRAY, (STRING, ["a", "", "h\u00e9llo"])),
        ("t.arr.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"]), (F32, [])])),
        ("t.arr.bool", ARRAY, (BOOL, [1, 0, 1])),
        ("t.arr.f64", ARRAY, (F64, [0.5, -0.25])),
        ("t.arr.empty", ARRAY, (U32, [])),
    ]
    tensors = [
        ("f32.t", 0, [3, 2], f32),
        ("f16.t", 1, [4], f16),
        ("q4_0.t", 2, [1024, 6], golden("q4_0")),
        ("q2_0_g64.t", 42, [1024, 6], golden("q2_0")),
        ("q2_0_g128.t", 42, [1024, 6], golden("q2_0_g128")),
        ("i8.t", 24, [5], i8),
        ("bf16.t", 30, [2, 2], bf16),
    ]
    write(os.path.join(outdir, "gguf_reference_v3.gguf"), 3, kvs, tensors, 64)
    kvs2 = [("general.name", STRING, "v2"), ("t.u32", U32, 7)]
    tensors2 = [("f32.t", 0, [3, 2], f32), ("q8_0.t", 8, [1024, 6], golden("q8_0"))]
    write(os.path.join(outdir, "gguf_reference_v2.gguf"), 2, kvs2, tensors2, 32)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
