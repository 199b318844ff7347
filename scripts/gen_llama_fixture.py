#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Llama fixtures for fucina's model tests, with PyTorch's logits.

  gen_llama_fixture.py OUT_DIR LLAMA_CONVERT
  gen_llama_fixture.py --fuzz-seeds fuzz/corpus/llama LLAMA_CONVERT

LLAMA_CONVERT is fucina's examples/llama_convert (build/examples/...), which
quantizes a GGUF Llama with the library. Writes into OUT_DIR
(tests/data/llama/, committed):

  tiny_f32.gguf      config A (2 layers, dim 64, 4 heads, 2 kv heads, ff 128,
                     vocab 96, output tied to token_embd), f32 weights,
                     random init (seed 4)
  tiny_q8_0.gguf     the same model, 2-D weights quantized to q8_0 by fucina
  small_q4_k.gguf    config B (1 layer, dim 256, 4 heads, 2 kv heads, ff 256,
                     vocab 64, with an output tensor), 2-D weights q4_k
                     (rows of 256: the smallest dims q4_k takes); its f32
                     original is not kept
  <name>.logits      PyTorch's logits, f32 little-endian [2, T, vocab], for
                     the two prompts of PROMPTS (ids modulo the vocab), run on the weights of that
                     file (the quantized ones dequantized here, in numpy,
                     from the GGUF bytes: an independent reading of the
                     block formats)
  <name>.logits_act  (quantized files) the same run with the input of every
                     weight product rounded as fucina's and ggml's quantized
                     products round it (q8 blocks of 32 with an f32 scale
                     against q8_0, ggml's q8_K against q4_k; see q8_act):
                     fucina should match these to f32 rounding
  <name>.greedy      int32 [N_GREEDY]: PyTorch's greedy continuation of
                     prompt 0 (full recomputation, no cache)
  <name>.margins     f32 [N_GREEDY]: at each of those steps, how far the
                     chosen logit leads the runner-up (a quantized run may
                     diverge only after a step whose lead is within its
                     tolerance)

Conventions, those llama.cpp computes for general.architecture "llama":
rotary embedding on adjacent pairs (2i, 2i+1) (Meta's original layout,
which llama.cpp's convert script restores for Hugging Face checkpoints by
permuting Q/K), ggml dims innermost first (a torch [out, in] weight is
stored as ne {in, out}), query head h reads kv head h // (heads // kv).
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

PROMPTS = [[1, 17, 42, 5, 63, 17, 8, 90, 33, 2, 71, 17],
           [3, 3, 60, 11, 94, 0, 45, 45, 12, 80, 7, 29]]
N_GREEDY = 8

CONFIG_A = dict(n_layers=2, dim=64, n_heads=4, n_kv_heads=2, ff=128, vocab=96, context=64,
                rope_base=10000.0, eps=1e-5, tied=True)
CONFIG_B = dict(n_layers=1, dim=256, n_heads=4, n_kv_heads=2, ff=256, vocab=64, context=64,
                rope_base=500000.0, eps=1e-6, tied=False)

# ---- the reference model ------------------------------------------------------


def init_weights(c, seed):
    """name -> torch tensor in PyTorch's layout ([out, in] for matrices)."""
    g = torch.Generator().manual_seed(seed)
    hd = c["dim"] // c["n_heads"]
    D, F = c["dim"], c["ff"]

    def mat(o, i, std=None):
        return torch.randn(o, i, generator=g) * (std if std else 1.0 / i ** 0.5)

    def nrm(n):
        return 1.0 + 0.1 * torch.randn(n, generator=g)

    w = {"token_embd.weight": 0.25 * torch.randn(c["vocab"], D, generator=g)}
    for l in range(c["n_layers"]):
        p = "blk.%d." % l
        w[p + "attn_norm.weight"] = nrm(D)
        w[p + "attn_q.weight"] = mat(c["n_heads"] * hd, D)
        w[p + "attn_k.weight"] = mat(c["n_kv_heads"] * hd, D)
        w[p + "attn_v.weight"] = mat(c["n_kv_heads"] * hd, D)
        w[p + "attn_output.weight"] = mat(D, c["n_heads"] * hd)
        w[p + "ffn_norm.weight"] = nrm(D)
        w[p + "ffn_gate.weight"] = mat(F, D)
        w[p + "ffn_up.weight"] = mat(F, D)
        w[p + "ffn_down.weight"] = mat(D, F)
    w["output_norm.weight"] = nrm(D)
    if not c["tied"]:
        w["output.weight"] = mat(c["vocab"], D, 2.0 / D ** 0.5)
    return w


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_pairs(x, base):
    """x [B, T, H, hd]: rotate adjacent pairs (2i, 2i+1) at angle t * base^(-2i/hd)."""
    B, T, H, hd = x.shape
    inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).float()[None, :, None, :]
    sin = torch.sin(ang).float()[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).reshape(B, T, H, hd)


def forward(c, w, ids, act=None):
    """ids [B, T] long -> logits [B, T, vocab] (f32 throughout). act, when
    given, rounds the input of every weight product the way a quantized
    matmul does (see q8_act)."""
    B, T = ids.shape
    H, KV, D = c["n_heads"], c["n_kv_heads"], c["dim"]
    hd, G = D // H, H // KV
    act = act or (lambda x: x)

    def lin(x, name):
        return act(x) @ w[name].T

    x = w["token_embd.weight"][ids]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(c["n_layers"]):
        p = "blk.%d." % l
        h = rms_norm(x, w[p + "attn_norm.weight"], c["eps"])
        q = rope_pairs(lin(h, p + "attn_q.weight").view(B, T, H, hd), c["rope_base"])
        k = rope_pairs(lin(h, p + "attn_k.weight").view(B, T, KV, hd), c["rope_base"])
        v = lin(h, p + "attn_v.weight").view(B, T, KV, hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        k = k.repeat_interleave(G, dim=1)  # query head h reads kv head h // G
        v = v.repeat_interleave(G, dim=1)
        s = q @ k.transpose(2, 3) / hd ** 0.5 + mask
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + lin(a, p + "attn_output.weight")
        h = rms_norm(x, w[p + "ffn_norm.weight"], c["eps"])
        f = torch.nn.functional.silu(lin(h, p + "ffn_gate.weight")) * lin(h, p + "ffn_up.weight")
        x = x + lin(f, p + "ffn_down.weight")
    x = rms_norm(x, w["output_norm.weight"], c["eps"])
    return lin(x, "output.weight" if "output.weight" in w else "token_embd.weight")


def q8_act(kind):
    """The activation rounding of ggml's quantized products (ggml's
    vec_dot_type), in f32 like ggml, codes rounded half to even:
      "q8_0"      per 32 values d = amax / 127, code = round(x * (1 / d)),
                  d kept in f32 (fucina) ...
      "q8_0_f16"  ... or rounded to f16 (ggml's block_q8_0 stores d as f16)
      "q8_k"      per 256 values: m = the value of largest magnitude,
                  iscale = -127 / m, code = min(127, round(iscale * x)),
                  d = 1 / iscale (ggml's quantize_row_q8_K; q4_k's)."""
    def f(x):
        sh = x.shape
        n = 256 if kind == "q8_k" else 32
        b = x.detach().reshape(-1, n).numpy().astype(np.float32)
        if kind == "q8_k":
            idx = np.abs(b).argmax(1)
            m = b[np.arange(len(b)), idx]
            iscale = np.where(m != 0, np.float32(-127.0) / np.where(m != 0, m, 1), 0).astype(np.float32)
            q = np.minimum(np.rint(iscale[:, None] * b), 127)
            d = np.where(iscale != 0, np.float32(1.0) / np.where(iscale != 0, iscale, 1), 0)
        else:
            amax = np.abs(b).max(1)
            d = (amax / np.float32(127.0)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
            q = np.rint(b * inv[:, None])
            if kind == "q8_0_f16":
                d = d.astype(np.float16).astype(np.float32)
        return torch.from_numpy((q * d.astype(np.float32)[:, None]).astype(np.float32)).reshape(sh)
    return f


def greedy(c, w, prompt, n):
    """(tokens, margins): each step's argmax and its lead over the runner-up."""
    ids, margins = list(prompt), []
    for _ in range(n):
        last = forward(c, w, torch.tensor([ids]))[0, -1]
        top = torch.topk(last, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(torch.argmax(last)))
    return ids[len(prompt):], margins


# ---- GGUF, written and read with struct only -------------------------------------

U32, F32T, STRING = 4, 6, 8


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, c, w):
    kvs = [("general.architecture", STRING, "llama"), ("general.name", STRING, "fucina-fixture"),
           ("llama.block_count", U32, c["n_layers"]), ("llama.context_length", U32, c["context"]),
           ("llama.embedding_length", U32, c["dim"]), ("llama.feed_forward_length", U32, c["ff"]),
           ("llama.attention.head_count", U32, c["n_heads"]),
           ("llama.attention.head_count_kv", U32, c["n_kv_heads"]),
           ("llama.rope.dimension_count", U32, c["dim"] // c["n_heads"]),
           ("llama.rope.freq_base", F32T, c["rope_base"]),
           ("llama.attention.layer_norm_rms_epsilon", F32T, c["eps"]),
           ("llama.vocab_size", U32, c["vocab"]),
           # no vocabulary: llama.cpp then takes token ids as they are (its
           # loader requires this key; "none" adds vocab_size dummy tokens)
           ("tokenizer.ggml.model", STRING, "none")]
    out = bytearray(b"GGUF") + struct.pack("<IQQ", 3, len(w), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t)
        out += gstr(v) if t == STRING else struct.pack("<I" if t == U32 else "<f", v)
    off, blobs = 0, []
    for name, t in w.items():
        data = t.detach().float().contiguous().numpy().astype("<f4").tobytes()
        dims = list(reversed(t.shape))  # ggml: innermost first
        out += gstr(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", 0, off)
        blobs.append(data)
        off += (len(data) + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for b in blobs:
        out += b + b"\0" * (-len(b) % 32)
    with open(path, "wb") as f:
        f.write(out)


def read_gguf(path):
    """name -> (ggml type, dims innermost first, bytes)."""
    buf = open(path, "rb").read()
    assert buf[:4] == b"GGUF"
    _, n_t, n_kv = struct.unpack_from("<IQQ", buf, 4)
    pos, align = 24, 32
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t, pos):
        if t == STRING:
            (n,) = struct.unpack_from("<Q", buf, pos)
            return pos + 8 + n
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            for _ in range(n):
                pos = skip_value(et, pos)
            return pos
        return pos + sizes[t]

    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", buf, pos)
        key = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (t,) = struct.unpack_from("<I", buf, pos)
        if key == "general.alignment":
            (align,) = struct.unpack_from("<I", buf, pos + 4)
        pos = skip_value(t, pos + 4)
    infos = []
    for _ in range(n_t):
        (n,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (nd,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from("<%dQ" % nd, buf, pos + 4)
        typ, off = struct.unpack_from("<IQ", buf, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, typ, dims, off))
    base = (pos + align - 1) // align * align
    return {n: (t, d, buf[base + o:]) for n, t, d, o in infos}


def dequant(typ, dims, raw):
    n = int(np.prod(dims))
    if typ == 0:
        return np.frombuffer(raw, "<f4", n).copy()
    if typ == 8:  # q8_0: f16 d, 32 x int8
        b = np.frombuffer(raw, np.uint8, n // 32 * 34).reshape(-1, 34)
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        q = b[:, 2:].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    if typ == 12:  # q4_k: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
        b = np.frombuffer(raw, np.uint8, n // 256 * 144).reshape(-1, 144)
        d = b[:, 0:2].copy().view("<f2").astype(np.float32)[:, 0]
        dmin = b[:, 2:4].copy().view("<f2").astype(np.float32)[:, 0]
        s = b[:, 4:16].astype(np.int32)
        qs = b[:, 16:144]
        out = np.empty((b.shape[0], 256), np.float32)
        for j in range(8):
            if j < 4:
                sc, m = s[:, j] & 63, s[:, j + 4] & 63
            else:
                sc = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
                m = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
            q = qs[:, (j // 2) * 32:(j // 2) * 32 + 32]
            q = (q & 0xF) if j % 2 == 0 else (q >> 4)
            out[:, j * 32:(j + 1) * 32] = (d * sc)[:, None] * q - (dmin * m)[:, None]
        return out.reshape(-1)
    raise ValueError("ggml type %d not handled" % typ)


def weights_of(path):
    w = {}
    for name, (typ, dims, raw) in read_gguf(path).items():
        shape = tuple(reversed(dims))
        w[name] = torch.from_numpy(dequant(typ, dims, raw).reshape(shape))
    return w


def reference(out_dir, name, c, path, act=None):
    w = weights_of(path)
    prompts = [[t % c["vocab"] for t in p] for p in PROMPTS]
    with torch.no_grad():
        logits = forward(c, w, torch.tensor(prompts))
        if act:
            # what a ggml-style quantized product computes: fucina's rounding
            actl = forward(c, w, torch.tensor(prompts), q8_act(act))
            actl.numpy().astype("<f4").tofile(os.path.join(out_dir, name + ".logits_act"))
            print("%s: activations rounded as %s move the logits by %.3g at most" % (
                name, act, float((actl - logits).abs().max())))
        g, margins = greedy(c, w, prompts[0], N_GREEDY)
    logits.numpy().astype("<f4").tofile(os.path.join(out_dir, name + ".logits"))
    np.array(g, "<i4").tofile(os.path.join(out_dir, name + ".greedy"))
    np.array(margins, "<f4").tofile(os.path.join(out_dir, name + ".margins"))
    print("%s: logits %s, |max| %.3f, greedy %s, margins %s" % (
        name, tuple(logits.shape), float(logits.abs().max()), g,
        " ".join("%.3f" % m for m in margins)))


def convert(tool, src, dst, dtype):
    subprocess.run([tool, src, dst, dtype], check=True)


def fuzz_seeds(out_dir, tool):
    """Seeds of fuzz/corpus/llama: two valid models small enough for the
    fuzzer's 64 KiB inputs (one f32 with tied output, one q8_0)."""
    os.makedirs(out_dir, exist_ok=True)
    s1 = dict(n_layers=1, dim=8, n_heads=2, n_kv_heads=1, ff=16, vocab=10, context=8,
              rope_base=10000.0, eps=1e-5, tied=True)
    s2 = dict(n_layers=1, dim=32, n_heads=4, n_kv_heads=2, ff=32, vocab=16, context=8,
              rope_base=10000.0, eps=1e-5, tied=False)
    write_gguf(os.path.join(out_dir, "tiny_f32.gguf"), s1, init_weights(s1, 0))
    with tempfile.TemporaryDirectory() as tmp:
        b = os.path.join(tmp, "s2.gguf")
        write_gguf(b, s2, init_weights(s2, 0))
        convert(tool, b, os.path.join(out_dir, "small_q8_0.gguf"), "q8_0")


def main():
    if sys.argv[1] == "--fuzz-seeds":
        fuzz_seeds(sys.argv[2], sys.argv[3])
        return
    out_dir, tool = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    a = os.path.join(out_dir, "tiny_f32.gguf")
    write_gguf(a, CONFIG_A, init_weights(CONFIG_A, 4))  # seed 4: a greedy run that moves
    reference(out_dir, "tiny_f32", CONFIG_A, a)
    q8 = os.path.join(out_dir, "tiny_q8_0.gguf")
    convert(tool, a, q8, "q8_0")
    reference(out_dir, "tiny_q8_0", CONFIG_A, q8, "q8_0")
    with tempfile.TemporaryDirectory() as tmp:
        b = os.path.join(tmp, "small_f32.gguf")
        write_gguf(b, CONFIG_B, init_weights(CONFIG_B, 1))
        q4 = os.path.join(out_dir, "small_q4_k.gguf")
        convert(tool, b, q4, "q4_k")
    reference(out_dir, "small_q4_k", CONFIG_B, q4, "q8_k")


if __name__ == "__main__":
    main()
