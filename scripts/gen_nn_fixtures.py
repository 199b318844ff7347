#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch fixtures for tests/nn/test_nn.c (fucina/nn.h against torch.nn).

Builds, with torch.nn, the model the C test builds with fucina/nn.h (same
layers, same state_dict names), saves its state_dict and its outputs for
fixed inputs as safetensors:

  tests/data/nn/torch_state.safetensors  the state_dict, torch's names
  tests/data/nn/torch_io.safetensors     inputs and expected outputs

The C test loads the first into its registry (strict), runs the same
inputs and matches the outputs; it then saves its own state dict and checks
its names, shapes and bytes against the first file. `--check FILE` loads a
state dict written by fucina into this torch model (load_state_dict,
strict) and checks the outputs again: the direction the C suite cannot run
itself.

safetensors is written and read here by hand (the Debian machine has torch
but not the safetensors package): 8-byte little-endian header length, the
JSON header, the raw little-endian bytes.

Usage: /usr/bin/python3 scripts/gen_nn_fixtures.py [--check FILE]
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "nn")

DTYPES = {torch.float32: "F32", torch.int64: "I64"}
BACK = {"F32": torch.float32, "I64": torch.int64}

# The sizes the C test uses (tests/nn/test_nn.c, nn_fixture_*).
V, E, H, HKV, FF, T, B, NCLS = 20, 16, 4, 2, 32, 5, 2, 10


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        b, e = d["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        t = torch.frombuffer(buf, dtype=BACK[d["dtype"]]) if e > b else torch.empty(0)
        out[name] = t.reshape(d["shape"]).clone()
    return out


def rope_norm(x):
    # x [B, T, H, D]; adjacent pairs (2i, 2i+1) rotated by t * 10000^(-2i/D)
    # (fucina's FC_ROPE_NORM, llama.cpp's rope), angles in double precision.
    _, t, _, d = x.shape
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = torch.arange(t, dtype=torch.float64)[:, None] * (10000.0 ** (-2 * i / d))[None, :]
    cos = ang.cos().float()[None, :, None, :]
    sin = ang.sin().float()[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


class RMSNorm(nn.Module):  # torch 1.13 has no nn.RMSNorm
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        d = E // H
        self.q = nn.Linear(E, H * d, bias=False)
        self.k = nn.Linear(E, HKV * d, bias=False)
        self.v = nn.Linear(E, HKV * d, bias=False)
        self.o = nn.Linear(H * d, E, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        d = E // H
        q = rope_norm(self.q(x).view(b, t, H, d)).transpose(1, 2)
        k = rope_norm(self.k(x).view(b, t, HKV, d)).transpose(1, 2)
        v = self.v(x).view(b, t, HKV, d).transpose(1, 2)
        k = k.repeat_interleave(H // HKV, dim=1)  # query head h reads kv head h // G
        v = v.repeat_interleave(H // HKV, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        o = s.softmax(-1) @ v
        return self.o(o.transpose(1, 2).reshape(b, t, E))


class SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(E, FF, bias=False)
        self.up = nn.Linear(E, FF, bias=False)
        self.down = nn.Linear(FF, E, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(E)
        self.attn = Attn()
        self.norm2 = RMSNorm(E)
        self.ffn = SwiGLU()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.norm2(x))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(E, 24)
        self.fc2 = nn.Linear(24, NCLS)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = MLP()
        self.cnn = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                 nn.Flatten(), nn.Linear(4 * 5 * 5, 3))
        self.gn = nn.GroupNorm(2, 4)
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.gru = nn.GRU(6, 8, batch_first=True)
        self.conv1 = nn.Conv1d(6, 4, 3, padding=1, stride=2)
        self.up = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, output_padding=1)

    def tokens(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


# Gradients of mean(y_tokens^2) the C test compares, one per kind of layer
# on the token path.
GRADS = ["emb.weight", "blocks.0.ln1.bias", "blocks.0.attn.q.weight", "blocks.0.attn.k.weight",
         "blocks.1.attn.v.weight", "blocks.1.norm2.weight", "blocks.1.ffn.down.weight",
         "head.fc1.bias", "head.fc2.weight"]


def outputs(net, ids, img):
    """The outputs the C test compares; runs the cnn once in training mode
    (batch statistics, moving the running ones), then once in eval mode."""
    out = {}
    net.zero_grad()
    (net.tokens(ids) ** 2).mean().backward()
    params = dict(net.named_parameters())
    for name in GRADS:
        out["grad." + name] = params[name].grad.clone()
    with torch.no_grad():
        out["y_tokens"] = net.tokens(ids)
        net.train()
        out["y_cnn_train"] = net.cnn(img)
        out["running_mean"] = net.cnn[1].running_mean.clone()
        out["running_var"] = net.cnn[1].running_var.clone()
        net.eval()
        out["y_cnn_eval"] = net.cnn(img)
        out["y_gn"] = net.gn(net.cnn[0](img))
    seq = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(42))
    h0 = torch.randn(1, 2, 8, generator=torch.Generator().manual_seed(43))
    c0 = torch.randn(1, 2, 8, generator=torch.Generator().manual_seed(44))
    out["seq"], out["h0"], out["c0"] = seq, h0[0], c0[0]
    with torch.no_grad():
        y, (h, c) = net.lstm(seq, (h0, c0))
        out["y_lstm"], out["h_lstm"], out["c_lstm"] = y, h[0], c[0]
        y, h = net.gru(seq)
        out["y_gru"], out["h_gru"] = y, h[0]
        out["y_conv1d"] = net.conv1(seq.transpose(1, 2))
        out["y_up"] = net.up(img)
    return out


def make_net():
    torch.manual_seed(40)
    net = Net()
    with torch.no_grad():  # non-trivial norm parameters, so loading them matters
        for m in net.modules():
            if isinstance(m, (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm2d, RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.uniform_(-0.5, 0.5)
    return net


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        io = read_st(os.path.join(OUT, "torch_io.safetensors"))
        net = make_net()
        net.load_state_dict(read_st(sys.argv[2]), strict=True)
        # The C test saves after its training-mode cnn forward, so the
        # file's running statistics are the moved ones, those y_cnn_eval
        # was computed with.
        with torch.no_grad():
            y = net.tokens(io["ids"])
            err = (y - io["y_tokens"]).abs().max().item()
            print(f"tokens max |diff| {err:.3g}")
            assert err < 1e-5, err
            net.eval()
            y = net.cnn(io["img"])
            err = (y - io["y_cnn_eval"]).abs().max().item()
            print(f"cnn eval max |diff| {err:.3g}")
            assert err < 1e-5, err
        print("ok: torch loads the fucina state dict (strict) and matches")
        return
    net = make_net()
    g = torch.Generator().manual_seed(41)
    ids = torch.randint(0, V, (B, T), generator=g)
    img = torch.randn(3, 2, 5, 5, generator=g)
    os.makedirs(OUT, exist_ok=True)
    write_st(os.path.join(OUT, "torch_state.safetensors"), net.state_dict())
    io = {"ids": ids, "img": img}
    io.update(outputs(net, ids, img))
    write_st(os.path.join(OUT, "torch_io.safetensors"), io)
    print(f"wrote {len(net.state_dict())} state tensors and {len(io)} io tensors to {OUT}")


if __name__ == "__main__":
    main()
