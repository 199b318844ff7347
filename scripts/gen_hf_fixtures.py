# SPDX-License-Identifier: MIT
"""Tiny random Hugging Face checkpoints and their float64 logits, for
tests/models/test_llama_hf.c (run: /usr/bin/python3 scripts/gen_hf_fixtures.py).

Each fixture under tests/data/hf/<name>/ is a checkpoint directory in the
layout the hub publishes: config.json, and model.safetensors or shards with
model.safetensors.index.json. No transformers package is used: the forward
below is written from the published modelling equations (transformers'
modeling_llama.py / modeling_qwen2.py / modeling_mistral.py, which share
one decoder layer):

  h = x + o_proj(attn(rms(x) * input_layernorm))
  x = h + down_proj(silu(gate_proj(n)) * up_proj(n)),  n = rms(h) * post_attention_layernorm
  logits = lm_head(rms(x) * norm)       (lm_head = embed_tokens when tied)

with rms(x) = x / sqrt(mean(x^2) + eps); attention softmax(q k^T / sqrt(hd))
over the causal (and, for Mistral, sliding-window: q - k < window) keys,
key/value head h // (heads / kv_heads) for query head h; rotary embedding
q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x2, x1) over the two
halves of each head, angle pos * inv_freq[i], inv_freq = theta^(-2i/hd),
divided by factor for "linear" scaling and remapped for "llama3"
(_compute_llama3_parameters); Qwen2 adds biases to q, k and v.

Everything is computed in float64 from the weights as stored (bf16 and f16
fixtures are rounded first), so the reference is the checkpoint's exact
function. Written next to the weights:
  reference.f64  the logits of the prompt, [T, vocab] little-endian float64
  reference.txt  "prompt <ids>" and "greedy <ids>": n_new tokens by argmax,
                 each fed back (the generator checks each step's margin
                 between the two best logits, so f32 cannot flip it).
"""
import json
import math
import os
import struct
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hf")

ST_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def st_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.float32:
        return t.numpy().tobytes()
    return t.view(torch.int16).numpy().tobytes()


def write_safetensors(path, tensors):
    """tensors: list of (name, torch tensor) in order; the format's header
    (8-byte length, JSON) then the bytes, no holes."""
    header, blobs, off = {}, [], 0
    for name, t in tensors:
        b = st_bytes(t)
        header[name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def inv_freq(cfg):
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    theta = cfg.get("rope_theta", 10000.0)
    f = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    rs = cfg.get("rope_scaling")
    if not rs:
        return f
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return f / rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        orig = rs["original_max_position_embeddings"]
        low_wl, high_wl = orig / low, orig / high
        wl = 2 * math.pi / f
        f_l = torch.where(wl > low_wl, f / factor, f)
        smooth = (orig / wl - low) / (high - low)
        smoothed = (1 - smooth) * f_l / factor + smooth * f_l
        medium = ~(wl < high_wl) & ~(wl > low_wl)
        return torch.where(medium, smoothed, f_l)
    raise ValueError(kind)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def forward(cfg, W, ids):
    """ids: list of token ids; returns logits [T, vocab] float64."""
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    hd, eps = D // H, cfg["rms_norm_eps"]
    T = len(ids)
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq(cfg)[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    visible = j <= i
    win = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    if win:
        visible &= (i - j) < win
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l

        def lin(name, inp):
            y = inp @ W[p + name + ".weight"].T
            b = W.get(p + name + ".bias")
            return y + b if b is not None else y

        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = lin("self_attn.q_proj", h).view(T, H, hd)
        k = lin("self_attn.k_proj", h).view(T, Hkv, hd)
        v = lin("self_attn.v_proj", h).view(T, Hkv, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // Hkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        s = s.masked_fill(~visible[None], float("-inf"))
        a = torch.einsum("hts,shd->thd", s.softmax(-1), v).reshape(T, D)
        x = x + lin("self_attn.o_proj", a)
        n = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin("mlp.gate_proj", n)
        x = x + lin("mlp.down_proj", g * torch.sigmoid(g) * lin("mlp.up_proj", n))
    x = rms(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return x @ head.T


def make_weights(cfg, dtype, gen):
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    hd, F, V = D // H, cfg["intermediate_size"], cfg["vocab_size"]
    bias = cfg["model_type"] == "qwen2"

    def rn(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * std

    W = [("model.embed_tokens.weight", rn(V, D, std=1.0))]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        W.append((p + "input_layernorm.weight", 1 + rn(D, std=0.1)))
        for n, rows in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
            W.append((p + "self_attn.%s_proj.weight" % n, rn(rows, D, std=1 / math.sqrt(D))))
            if bias:
                W.append((p + "self_attn.%s_proj.bias" % n, rn(rows, std=0.2)))
        W.append((p + "self_attn.o_proj.weight", rn(D, H * hd, std=1 / math.sqrt(D))))
        W.append((p + "post_attention_layernorm.weight", 1 + rn(D, std=0.1)))
        W.append((p + "mlp.gate_proj.weight", rn(F, D, std=1 / math.sqrt(D))))
        W.append((p + "mlp.up_proj.weight", rn(F, D, std=1 / math.sqrt(D))))
        W.append((p + "mlp.down_proj.weight", rn(D, F, std=1 / math.sqrt(F))))
    W.append(("model.norm.weight", 1 + rn(D, std=0.1)))
    if not cfg.get("tie_word_embeddings"):
        W.append(("lm_head.weight", rn(V, D, std=2 / math.sqrt(D))))
    # rounded to the stored dtype: the reference is the function of these
    return [(n, t.to(dtype)) for n, t in W]


def greedy(cfg, W, prompt, n_new):
    ids, margins = list(prompt), []
    for _ in range(n_new):
        z = forward(cfg, W, ids)[-1]
        top = torch.topk(z, 2).values
        margins.append(float(top[0] - top[1]))
        ids.append(int(z.argmax()))
    return ids[len(prompt):], min(margins)


def base_config(model_type, **kw):
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "mistral": "MistralForCausalLM"}[model_type]],
        "model_type": model_type,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
        "vocab_size": 48,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "initializer_range": 0.02,
        "use_cache": True,
        "transformers_version": "4.44.0",
    }
    cfg.update(kw)
    return cfg


FIXTURES = [
    # name, config, dtype, shards (None: one file), seed
    ("llama_tied", base_config("llama", tie_word_embeddings=True, attention_bias=False,
                               mlp_bias=False, rope_scaling={"type": "linear", "factor": 2.0}),
     torch.float32, None, 1),
    ("llama3_sharded", base_config("llama", torch_dtype="bfloat16", max_position_embeddings=128,
                                   rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                 "original_max_position_embeddings": 64}),
     torch.bfloat16, 2, 2),
    ("qwen2", base_config("qwen2", tie_word_embeddings=True, rope_theta=1000000.0,
                          rms_norm_eps=1e-6, use_sliding_window=False, sliding_window=4096,
                          max_window_layers=2),
     torch.float32, None, 3),
    ("mistral", base_config("mistral", torch_dtype="float16", sliding_window=4, rope_scaling=None),
     torch.float16, None, 4),
]

PROMPT = [3, 17, 42, 5, 9, 31, 0, 11, 26, 40, 7, 19]
GREEDY_PROMPT = 4
N_NEW = 8


def main():
    for name, cfg, dtype, shards, seed in FIXTURES:
        out = os.path.join(ROOT, name)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        # a seed whose greedy run has clear margins (f32 must not flip it)
        for s in range(seed, seed + 100):
            gen = torch.Generator().manual_seed(s)
            W = make_weights(cfg, dtype, gen)
            Wd = {n: t.to(torch.float64) for n, t in W}
            toks, margin = greedy(cfg, Wd, PROMPT[:GREEDY_PROMPT], N_NEW)
            if margin > 0.05:
                break
        else:
            sys.exit("%s: no seed with a clear greedy margin" % name)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        if shards is None:
            tensors = list(W)
            if name == "llama_tied":  # an old checkpoint's buffer, which loaders skip
                tensors.insert(2, ("model.layers.0.self_attn.rotary_emb.inv_freq",
                                   inv_freq(cfg).to(torch.float32)))
            write_safetensors(os.path.join(out, "model.safetensors"), tensors)
        else:
            per = (len(W) + shards - 1) // shards
            wmap, total = {}, 0
            for k in range(shards):
                fn = "model-%05d-of-%05d.safetensors" % (k + 1, shards)
                part = W[k * per:(k + 1) * per]
                write_safetensors(os.path.join(out, fn), part)
                for n, t in part:
                    wmap[n] = fn
                    total += t.numel() * t.element_size()
            with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
                f.write("\n")
        logits = forward(cfg, Wd, PROMPT)
        with open(os.path.join(out, "reference.f64"), "wb") as f:
            f.write(struct.pack("<%dd" % logits.numel(), *logits.flatten().tolist()))
        with open(os.path.join(out, "reference.txt"), "w") as f:
            f.write("prompt %s\n" % " ".join(map(str, PROMPT)))
            f.write("greedy_prompt %d\n" % GREEDY_PROMPT)
            f.write("greedy %s\n" % " ".join(map(str, toks)))
        print("%s: seed %d, greedy margin %.3f, |logits| max %.3f" %
              (name, s, margin, float(logits.abs().max())))


if __name__ == "__main__":
    main()
