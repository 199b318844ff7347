#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""gen_autograd_ref.py - PyTorch reference losses, gradients and AdamW
trajectories for tests/ag/test_torch_xcheck.c.

Run with Debian's interpreter (python3-torch 1.13):

    /usr/bin/python3 scripts/gen_autograd_ref.py [OUT_DIR]

OUT_DIR defaults to tests/data/ag next to this script's repository. The
output is committed so the C suite needs no Python.

Three models, each from its own seeded torch.Generator:

  mlp_relu   x[8,12] -> Linear(12,16) -> ReLU           -> Linear(16,5) -> CE
  mlp_gelu   the same with GELU (tanh approximation)
  block      one pre-LN transformer block (like the peer gpt_train.py's
             Block: LayerNorm -> fused qkv Linear(C,3C) -> split -> view
             B,T,H,hd -> q @ k^T * 1/sqrt(hd) -> masked_fill(causal, -inf)
             -> softmax -> @ v -> proj -> residual; LayerNorm -> Linear ->
             GELU(tanh) -> Linear -> residual), B=2 T=5 C=8 H=2 FF=16, then
             a bias-free head Linear(C, V=7) and the mean cross-entropy over
             all B*T positions.

Parameters and inputs are drawn in float32; the float64 run uses exactly
the same values widened, so one f32 file per tensor serves both runs. For
each run (f64 and f32) the script writes the loss, the gradient of every
parameter and of the input x, and an AdamW trajectory (lr 1e-2, betas
(0.9, 0.999), eps 1e-8, weight_decay 0.1, over the parameters, not x):
losses[s] is the loss computed before update s+1, for s = 0..9, and
losses[10] the loss after the tenth update (11 values).

Files are raw little-endian, row-major, no header: <name>.f32, <name>.f64,
<name>.i64. MANIFEST lists every file with its dtype and shape.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
STEPS = 10


# ---- models ---------------------------------------------------------------------------


def mlp_init(seed):
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * scale

    p = {
        "w1": r(16, 12, scale=1 / math.sqrt(12)),
        "b1": r(16, scale=0.1),
        "w2": r(5, 16, scale=1 / math.sqrt(16)),
        "b2": r(5, scale=0.1),
    }
    x = r(8, 12)
    targets = torch.randint(0, 5, (8,), generator=g, dtype=torch.int64)
    return p, x, targets


def mlp_loss(act):
    def f(p, x, targets):
        h = F.linear(x, p["w1"], p["b1"])
        h = torch.relu(h) if act == "relu" else F.gelu(h, approximate="tanh")
        return F.cross_entropy(F.linear(h, p["w2"], p["b2"]), targets)

    return f


B, T, C, H, FF, V = 2, 5, 8, 2, 16, 7
HD = C // H
LN_EPS = 1e-5


def block_init(seed):
    g = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0, shift=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * scale + shift

    p = {
        # LayerNorm affine parameters away from their (1, 0) default so
        # their gradients are exercised with generic values
        "ln1_w": r(C, scale=0.1, shift=1.0),
        "ln1_b": r(C, scale=0.1),
        "qkv_w": r(3 * C, C, scale=1 / math.sqrt(C)),
        "qkv_b": r(3 * C, scale=0.1),
        "proj_w": r(C, C, scale=1 / math.sqrt(C)),
        "proj_b": r(C, scale=0.1),
        "ln2_w": r(C, scale=0.1, shift=1.0),
        "ln2_b": r(C, scale=0.1),
        "fc1_w": r(FF, C, scale=1 / math.sqrt(C)),
        "fc1_b": r(FF, scale=0.1),
        "fc2_w": r(C, FF, scale=1 / math.sqrt(FF)),
        "fc2_b": r(C, scale=0.1),
        "head_w": r(V, C, scale=1 / math.sqrt(C)),
    }
    x = r(B, T, C)
    targets = torch.randint(0, V, (B, T), generator=g, dtype=torch.int64)
    return p, x, targets


def block_loss(p, x, targets):
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    h = F.layer_norm(x, (C,), p["ln1_w"], p["ln1_b"], LN_EPS)
    q, k, v = F.linear(h, p["qkv_w"], p["qkv_b"]).split(C, dim=2)
    q = q.view(B, T, H, HD).transpose(1, 2)  # B,H,T,hd
    k = k.view(B, T, H, HD).transpose(1, 2)
    v = v.view(B, T, H, HD).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
    att = att.masked_fill(~mask, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    x = x + F.linear(y, p["proj_w"], p["proj_b"])
    h = F.layer_norm(x, (C,), p["ln2_w"], p["ln2_b"], LN_EPS)
    x = x + F.linear(F.gelu(F.linear(h, p["fc1_w"], p["fc1_b"]), approximate="tanh"),
                     p["fc2_w"], p["fc2_b"])
    logits = F.linear(x, p["head_w"])
    return F.cross_entropy(logits.view(-1, V), targets.view(-1))


# ---- runs -----------------------------------------------------------------------------


def leaves(p32, dtype):
    return {k: v.to(dtype).clone().requires_grad_(True) for k, v in p32.items()}


def gradients(loss_fn, p32, x32, targets, dtype):
    p = leaves(p32, dtype)
    x = x32.to(dtype).clone().requires_grad_(True)
    loss = loss_fn(p, x, targets)
    loss.backward()
    grads = {"x": x.grad.detach().clone()}
    grads.update({k: v.grad.detach().clone() for k, v in p.items()})
    return loss.detach().clone(), grads


def adamw_run(loss_fn, p32, x32, targets, dtype):
    p = leaves(p32, dtype)
    x = x32.to(dtype)
    opt = torch.optim.AdamW(list(p.values()), **ADAMW)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(p, x, targets)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    with torch.no_grad():
        losses.append(loss_fn(p, x, targets).item())
    return torch.tensor(losses, dtype=dtype)


# ---- output ---------------------------------------------------------------------------

SUFFIX = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}


class Writer:
    def __init__(self, root):
        self.root = root
        self.lines = []
        self.total = 0

    def put(self, rel, t):
        t = t.detach().contiguous()
        name = f"{rel}.{SUFFIX[t.dtype]}"
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        with open(path, "wb") as f:
            f.write(data)
        self.total += len(data)
        shape = " ".join(str(d) for d in t.shape) if t.dim() else "scalar"
        self.lines.append(f"{name}\t{SUFFIX[t.dtype]}\t{shape}")


def check_relu_margin(p32, x32):
    """ReLU's kink must not sit within rounding distance of any
    pre-activation, or f32 and f64 could disagree on which side it is."""
    pre = F.linear(x32.double(), p32["w1"].double(), p32["b1"].double())
    m = pre.abs().min().item()
    if m < 1e-3:
        sys.exit(f"mlp_relu: a pre-activation is {m:g} from 0; pick another seed")


def emit_model(w, name, loss_fn, p32, x32, targets):
    w.put(f"{name}/x", x32)
    for k, v in p32.items():
        w.put(f"{name}/{k}", v)
    w.put(f"{name}/targets", targets)
    report = {}
    for dtype in (torch.float64, torch.float32):
        loss, grads = gradients(loss_fn, p32, x32, targets, dtype)
        w.put(f"{name}/loss", loss.reshape(1))
        for k, g in grads.items():
            w.put(f"{name}/grad_{k}", g)
        w.put(f"{name}/adamw_losses", adamw_run(loss_fn, p32, x32, targets, dtype))
        report[dtype] = (loss, grads)
    # how far torch's own f32 run is from its f64 run: the floor for any
    # f32 tolerance in the C test
    l64, g64 = report[torch.float64]
    l32, g32 = report[torch.float32]
    worst = max((g32[k].double() - g64[k]).abs().max().item() / g64[k].abs().max().item()
                for k in g64)
    print(f"{name}: loss {l64.item():.10f}; torch f32 vs f64: loss rel "
          f"{abs(l32.item() - l64.item()) / abs(l64.item()):.2e}, worst grad "
          f"(max-abs-scaled) {worst:.2e}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "ag")
    torch.manual_seed(0)  # nothing should depend on it; set for safety
    torch.set_num_threads(1)  # deterministic summation order
    w = Writer(root)

    p, x, t = mlp_init(1234)
    check_relu_margin(p, x)
    emit_model(w, "mlp_relu", mlp_loss("relu"), p, x, t)
    p, x, t = mlp_init(5678)
    emit_model(w, "mlp_gelu", mlp_loss("gelu"), p, x, t)
    p, x, t = block_init(4321)
    emit_model(w, "block", block_loss, p, x, t)

    with open(os.path.join(root, "MANIFEST"), "w") as f:
        f.write("# Written by scripts/gen_autograd_ref.py with torch "
                f"{torch.__version__}; raw little-endian, row-major, no header.\n")
        f.write("# Parameters, x and targets are the inputs (f32 values; the f64 run widens\n"
                "# them exactly). loss/grad_*/adamw_losses exist per run: .f64 and .f32.\n")
        f.write("# adamw_losses: AdamW lr 1e-2 betas (0.9, 0.999) eps 1e-8 weight_decay 0.1;\n"
                "# [s] = loss before update s+1 (s = 0..9), [10] = loss after update 10.\n")
        f.write("# file\tdtype\tshape\n")
        f.write("\n".join(w.lines) + "\n")
    print(f"{len(w.lines)} files, {w.total} bytes of data in {os.path.normpath(root)}")


if __name__ == "__main__":
    main()
