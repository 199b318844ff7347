# SPDX-License-Identifier: MIT
"""Training from Python: the optimizers against PyTorch and against the
same steps written in C (python/tests/c_mlp.c), bit for bit."""
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import fucina as fc
from fucina import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def _bits(v):
    return "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


def _w(k, salt):
    return np.float32(((k * 13 + salt) % 17 - 8) / 16.0)


def _python_mlp_lines(ctx):
    n, nin, hid, out = 16, 4, 8, 3
    x = np.array([[((i * 7 + j * 3) % 11 - 5) / 4.0 for j in range(nin)] for i in range(n)],
                 dtype=np.float32)
    y = np.array([(i * 5) % 3 for i in range(n)], dtype=np.int64)
    shapes = [((hid, nin), 1), ((hid,), 2), ((out, hid), 3), ((out,), 4)]
    params = []
    for shape, salt in shapes:
        vals = np.array([_w(k, salt) for k in range(int(np.prod(shape)))],
                        dtype=np.float32).reshape(shape)
        params.append(fc.tensor(vals, ctx=ctx, requires_grad=True))
    X, Y = fc.tensor(x, ctx=ctx), fc.tensor(y, ctx=ctx)
    lines = []
    with fc.optim.Adam(params, lr=0.01) as opt:
        for _ in range(20):
            with fc.scope():
                h = F.linear(X, params[0], params[1]).tanh()
                loss = F.cross_entropy(F.linear(h, params[2], params[3]), Y)
                loss.backward()
                opt.step()
                lines.append("loss " + _bits(loss.item()))
                opt.zero_grad()
    for p in params:
        lines.extend(_bits(v) for v in p.numpy().ravel())
    return lines


def test_mlp_trained_from_python_matches_c_bit_for_bit(ctx, tmp_path):
    # A sanitized libfucina.so needs the program linked with the same
    # compiler and sanitizer runtime: scripts/test_python.sh names them in
    # FUCINA_TEST_CC and FUCINA_TEST_CFLAGS.
    cc = shutil.which(os.environ.get("FUCINA_TEST_CC") or os.environ.get("CC", "cc")) \
        or shutil.which("gcc")
    extra = os.environ.get("FUCINA_TEST_CFLAGS", "").split()
    libpath = os.environ.get("FUCINA_LIB") or os.path.join(REPO, "build", "libfucina.so")
    if cc is None or not os.path.exists(libpath):
        pytest.skip("needs a C compiler and the built libfucina.so")
    exe = str(tmp_path / "c_mlp")
    libdir = os.path.dirname(os.path.abspath(libpath))
    # The compiler itself runs without the interpreter's sanitizer preload.
    cc_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run([cc, "-std=c11", "-O1", *extra, "-I", os.path.join(REPO, "include"),
                    os.path.join(HERE, "c_mlp.c"), "-o", exe, os.path.abspath(libpath),
                    "-Wl,-rpath," + libdir], check=True, env=cc_env)
    ref = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split("\n")
    ref = [r for r in ref if r]
    got = _python_mlp_lines(ctx)
    assert len(ref) == 20 + 8 * 4 + 8 + 3 * 8 + 3
    assert got == ref


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_optimizer_trajectories_match_pytorch(ctx, kind):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((5, 4))
    a = rng.standard_normal((6, 5))
    opts = {"sgd": dict(lr=0.02, momentum=0.9, weight_decay=0.01, nesterov=True),
            "adam": dict(lr=0.05, weight_decay=0.01, amsgrad=True),
            "adamw": dict(lr=0.05, weight_decay=0.1),
            "rmsprop": dict(lr=0.01, momentum=0.5, centered=True),
            "adagrad": dict(lr=0.1, lr_decay=0.01)}[kind]
    ctor = {"sgd": (fc.optim.SGD, torch.optim.SGD), "adam": (fc.optim.Adam, torch.optim.Adam),
            "adamw": (fc.optim.AdamW, torch.optim.AdamW),
            "rmsprop": (fc.optim.RMSprop, torch.optim.RMSprop),
            "adagrad": (fc.optim.Adagrad, torch.optim.Adagrad)}[kind]
    w = fc.tensor(w0, dtype="f64", ctx=ctx, requires_grad=True)
    A = fc.tensor(a, dtype="f64", ctx=ctx)
    wt = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    at = torch.tensor(a, dtype=torch.float64)
    opt, topt = ctor[0]([w], **opts), ctor[1]([wt], **opts)
    for _ in range(30):
        with fc.scope():
            ((A @ w).tanh() ** 2).sum().backward()
            opt.step()
            opt.zero_grad()
        topt.zero_grad()
        (torch.tanh(at @ wt) ** 2).sum().backward()
        topt.step()
    # Both sides round differently by an ulp here and there (tanh, sums); the
    # step sizes keep those from growing, so 30 steps agree to ~1e-13.
    np.testing.assert_allclose(w.numpy(), wt.detach().numpy(), rtol=1e-11, atol=1e-12)
    assert opt.step_count == 30
    opt.close()


def test_optimizer_bad_input(ctx):
    w = fc.tensor([1.0, 2.0], ctx=ctx, requires_grad=True)
    with pytest.raises(TypeError):
        fc.optim.Adam([w], lr="fast")
    with pytest.raises(TypeError):
        fc.optim.Adam([w], lr=0.1, bogus=1)
    with pytest.raises(TypeError):
        fc.optim.Adam([1.0])
    with pytest.raises(ValueError):
        fc.optim.Adam([])
    with pytest.raises(fc.InvalidArgumentError, match="lr"):
        fc.optim.SGD([w], lr=-1.0)
    with pytest.raises(fc.InvalidArgumentError):
        fc.optim.Adam([w, w], lr=0.1)  # a parameter twice
    opt = fc.optim.SGD([w], lr=0.1)
    opt.lr = 0.5
    assert opt.lr == 0.5
    with pytest.raises(fc.InvalidArgumentError):
        opt.lr = float("nan")
    opt.close()
    with pytest.raises(fc.StateError):
        opt.step()
