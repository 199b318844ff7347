#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference safetensors files for fucina's reader, and a checker for files
fucina writes.

  gen_safetensors.py gen OUT.safetensors     write the reference file
  gen_safetensors.py check IN.safetensors    verify a file against the same
                                             contents; exit 0 when it matches

The layout is written here from the format's specification with struct and
json only (Debian has no python3-safetensors), independently of fucina's C
writer; the values come from torch (python3-torch) where it has the dtype
and from numpy or literal bit patterns where it does not (torch 1.13 has no
uint16 and no float8). tests/data/io/st_reference.safetensors is the output
of `gen`, committed so the C suite needs no Python; tests/io/test_safetensors.c
checks the same values from its own table, and, when /usr/bin/python3 has
torch, runs `check` on a file written by fucina.
"""
import json
import struct
import sys

import numpy as np
import torch


def expected():
    """name -> (safetensors dtype, shape, raw little-endian bytes)."""
    t = {}
    half = torch.arange(6, dtype=torch.float64) * 0.5 - 1.25

    def put(name, dt, tensor_or_bytes, shape):
        if isinstance(tensor_or_bytes, torch.Tensor):
            x = tensor_or_bytes.contiguous()
            if x.dtype == torch.bfloat16:
                raw = x.view(torch.int16).numpy().tobytes()
            else:
                raw = x.numpy().tobytes()
        else:
            raw = bytes(tensor_or_bytes)
        t[name] = (dt, list(shape), raw)

    put("f32", "F32", half.to(torch.float32).reshape(2, 3), [2, 3])
    put("f16", "F16", half.to(torch.float16).reshape(3, 2), [3, 2])
    put("bf16", "BF16", half.to(torch.bfloat16), [6])
    put("f64", "F64", torch.arange(4, dtype=torch.float64).reshape(2, 2) * 0.1, [2, 2])
    put("i64", "I64", torch.tensor([-(2**40), 0, 2**62 + 5], dtype=torch.int64), [3])
    put("i32", "I32", torch.tensor([-7, 0, 7, 2**31 - 1], dtype=torch.int32), [4])
    put("i16", "I16", torch.tensor([[-300, -1], [1, 32767]], dtype=torch.int16), [2, 2])
    put("i8", "I8", torch.tensor([-128, -1, 0, 127], dtype=torch.int8), [4])
    put("u16", "U16", np.array([0, 1000, 65535], dtype="<u2").tobytes(), [3])
    put("u8", "U8", torch.tensor([0, 1, 2, 254, 255], dtype=torch.uint8), [5])
    put("bool", "BOOL", torch.tensor([[True, False], [False, True]]), [2, 2])
    # 1, -1, 2, NaN in E4M3FN; 1, -1, 2, +inf in E5M2
    put("f8_e4m3", "F8_E4M3", [0x38, 0xB8, 0x40, 0x7F], [4])
    put("f8_e5m2", "F8_E5M2", [0x3C, 0xBC, 0x40, 0x7C], [4])
    put("scalar", "F32", torch.tensor(3.5, dtype=torch.float32), [])
    put("empty", "F32", b"", [0, 3])
    put("layers.0.w\u00e9ight", "F32", torch.tensor([1.0, -2.0], dtype=torch.float32), [2])
    return t


METADATA = {"format": "pt", "note": "fucina \u2713 \"quoted\""}
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "I32": 4, "I64": 8,
            "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def gen(path):
    tensors = expected()
    # Data widest element first, then by name (as the reference writer
    # orders it), so every tensor is aligned to its element size.
    order = sorted(tensors, key=lambda n: (-ITEMSIZE[tensors[n][0]], n))
    header = {"__metadata__": METADATA}
    off = 0
    for name in order:
        dt, shape, raw = tensors[name]
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()  # ASCII, \u escapes
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            f.write(tensors[name][2])


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    if (8 + n) % 8 != 0:
        return "data buffer does not start 8-aligned"
    text = blob[8:8 + n]
    if text.rstrip(b" ") != text.rstrip():
        return "header padded with something other than spaces"
    header = json.loads(text.decode("utf-8"))
    meta = header.pop("__metadata__", {})
    if meta != METADATA:
        return "metadata differs: %r" % (meta,)
    want = expected()
    if set(header) != set(want):
        return "tensor names differ: %r" % (sorted(header),)
    data = blob[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    pos = 0
    for b, e in spans:
        if b != pos:
            return "hole or overlap at %d" % b
        pos = e
    if pos != len(data):
        return "buffer length %d, tensors cover %d" % (len(data), pos)
    for name, (dt, shape, raw) in want.items():
        got = header[name]
        if got["dtype"] != dt or got["shape"] != shape:
            return "%s: dtype/shape %s %s" % (name, got["dtype"], got["shape"])
        b, e = got["data_offsets"]
        if data[b:e] != raw:
            return "%s: bytes differ" % name
        if dt in ("F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL") and e > b:
            tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                   "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
                   "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
                   "BOOL": torch.bool}[dt]
            x = torch.frombuffer(bytearray(data[b:e]), dtype=tdt).reshape(shape)
            y = torch.frombuffer(bytearray(raw), dtype=tdt).reshape(shape)
            if not torch.equal(x, y):
                return "%s: torch sees different values" % name
    return None


def main(argv):
    if len(argv) != 3 or argv[1] not in ("gen", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "gen":
        gen(argv[2])
        return 0
    err = check(argv[2])
    if err:
        print("gen_safetensors.py check: %s: %s" % (argv[2], err), file=sys.stderr)
        return 1
    print("gen_safetensors.py check: %s matches" % argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
