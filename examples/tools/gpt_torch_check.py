# SPDX-License-Identifier: MIT
"""Cross-check train_gpt against PyTorch.

Reads the checkpoint train_gpt wrote (a safetensors file made by
fc_checkpoint_save, with the trainer's sizes in its metadata), rebuilds the same model in PyTorch with those
weights (the layer definitions of gpt_train.py in the benchmark peers folder, ../shared/peers), and
computes the validation loss over the same windows of the same text:
the text is cut into blocks of 16T characters (fewer for short texts,
never under 2(T+1)), every 10th block is held out, and each held-out
block gives its whole windows of length T at stride T.
train_gpt prints that number at the end of its run ("val loss: ... ->
X"); the two should agree to about 1e-4.

    /usr/bin/python3 examples/tools/gpt_torch_check.py train_gpt_out/ckpt.safetensors \
        [/usr/share/common-licenses/GPL-3]
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F


def read_checkpoint(path):
    """The safetensors file fc_checkpoint_save wrote: (metadata, tensors)."""
    buf = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", buf, 0)
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    base, tensors = 8 + n, {}
    for name, info in header.items():
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(buf[base + b:base + e]), dtype=torch.float32)
        tensors[name] = t.reshape(info["shape"])
    return meta, tensors


def forward(P, idx, L, H):
    B, T = idx.shape
    x = P["wte"][idx] + P["wpe"][:T]
    C = x.shape[-1]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = lambda s: P["h%d.%s" % (l, s)]
        h = F.layer_norm(x, (C,), p("ln1.w"), p("ln1.b"), 1e-5)
        q, k, v = F.linear(h, p("qkv.w"), p("qkv.b")).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, p("proj.w"), p("proj.b"))
        h = F.layer_norm(x, (C,), p("ln2.w"), p("ln2.b"), 1e-5)
        x = x + F.linear(F.gelu(F.linear(h, p("fc1.w"), p("fc1.b")), approximate="tanh"),
                         p("fc2.w"), p("fc2.b"))
    x = F.layer_norm(x, (C,), P["lnf.w"], P["lnf.b"], 1e-5)
    return F.linear(x, P["head.w"])


def main():
    ckpt = sys.argv[1]
    text = open(sys.argv[2] if len(sys.argv) > 2 else "/usr/share/common-licenses/GPL-3",
                "rb").read()
    meta, tensors = read_checkpoint(ckpt)
    values = {k[len("train_gpt."):]: int(v) for k, v in meta.items() if k.startswith("train_gpt.")}
    P = {k[len("param."):]: v for k, v in tensors.items() if k.startswith("param.")}
    T, L, H = values["block"], values["n_layer"], values["n_head"]
    chars = sorted(set(text))
    assert len(chars) == values["vocab"], "another text than the checkpoint's"
    ids = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    n = len(ids)
    seg = max(min(n // 20, 16 * T), 2 * (T + 1))
    starts = []
    for k in range(9, (n + seg - 1) // seg, 10):
        lo, hi = k * seg, min(k * seg + seg, n)
        starts += range(lo, hi - T, T)
    nw = len(starts)
    idx = torch.stack([ids[s:s + T] for s in starts])
    tgt = torch.stack([ids[s + 1:s + T + 1] for s in starts])
    with torch.no_grad():
        logits = forward(P, idx, L, H)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    print("step %d: PyTorch validation loss %.6f over %d windows"
          % (values["step"], loss.item(), nw))


if __name__ == "__main__":
    main()
