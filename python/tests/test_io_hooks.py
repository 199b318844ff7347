# SPDX-License-Identifier: MIT
"""safetensors / GGUF I/O, gradient hooks and checkpointing from Python."""
import os

import numpy as np
import pytest

import fucina as fc

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "data"))


def test_safetensors_round_trip(ctx, tmp_path):
    a = fc.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), ctx=ctx)
    b = fc.tensor(np.array([1, -2, 3], dtype=np.int64), ctx=ctx)
    c = fc.tensor(np.array([1.5, -0.25], dtype=np.float32), ctx=ctx).to("bf16")
    path = tmp_path / "t.safetensors"
    fc.io.save_safetensors(path, {"a": a, "b": b, "c": c}, {"format": "pt"})
    got = fc.io.load_safetensors(path, ctx=ctx)
    assert list(got) == ["a", "b", "c"]
    np.testing.assert_array_equal(got["a"].numpy(), a.numpy())
    np.testing.assert_array_equal(got["b"].numpy(), [1, -2, 3])
    assert got["c"].dtype == "bf16"
    np.testing.assert_array_equal(got["c"].to("f32").numpy(), [1.5, -0.25])
    assert fc.io.safetensors_metadata(path) == {"format": "pt"}
    copied = fc.io.load_safetensors(path, ctx=ctx, copy=True)
    np.testing.assert_array_equal(copied["a"].numpy(), a.numpy())


def test_safetensors_read_by_pytorch_conventions(ctx, tmp_path):
    torch = pytest.importorskip("torch")
    a = fc.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), ctx=ctx)
    path = str(tmp_path / "p.safetensors")
    fc.io.save_safetensors(path, {"w": a})
    # Read it back by the format's definition (8-byte header length, JSON).
    import json
    import struct
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    assert hdr["w"]["dtype"] == "F32" and hdr["w"]["shape"] == [3, 4]
    b, e = hdr["w"]["data_offsets"]
    t = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(3, 4)
    assert torch.equal(t, torch.arange(12, dtype=torch.float32).reshape(3, 4))


def test_io_errors(ctx, tmp_path):
    with pytest.raises(fc.FileFormatError):
        fc.io.load_safetensors(tmp_path / "missing.safetensors", ctx=ctx)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(fc.FileFormatError) as e:
        fc.io.load_safetensors(bad, ctx=ctx)
    assert str(e.value)
    with pytest.raises(TypeError):
        fc.io.save_safetensors(tmp_path / "x", {"a": 1.0})
    with pytest.raises(TypeError):
        fc.io.load_gguf(12, ctx=ctx)


def test_gguf_metadata_and_tensors(ctx):
    meta, ts = fc.io.load_gguf(os.path.join(DATA, "llama", "tiny_f32.gguf"), ctx=ctx)
    assert meta["general.architecture"] == "llama"
    assert meta["llama.block_count"] == 2
    assert ts["token_embd.weight"].shape == (96, 64)
    meta2, none = fc.io.load_gguf(os.path.join(DATA, "tokenizer", "spm.gguf"), tensors=False)
    assert none == {} and isinstance(meta2["tokenizer.ggml.tokens"], list)


def test_hook_scales_and_is_removed(ctx):
    x = fc.tensor([1.0, 2.0, 3.0], dtype="f64", ctx=ctx, requires_grad=True)
    seen = []

    def double(g):
        seen.append(g.numpy().copy())
        return g * 2.0

    h = x.register_hook(double)
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0, 12.0])
    np.testing.assert_array_equal(seen[0], [2.0, 4.0, 6.0])
    h.remove()
    x.zero_grad()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    assert len(seen) == 1


def test_hook_exception_propagates_and_graph_stays_usable(ctx):
    x = fc.tensor([1.0, 2.0], dtype="f64", ctx=ctx, requires_grad=True)

    def boom(g):
        raise KeyError("from the hook")

    h = x.register_hook(boom)
    y = (x * x).sum()
    with pytest.raises(KeyError, match="from the hook"):
        y.backward(retain_graph=True)
    assert x.grad is None
    h.remove()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    with pytest.raises(TypeError):
        x.register_hook(3)


def test_hook_returning_a_wrong_type_fails_the_walk(ctx):
    x = fc.tensor([1.0], dtype="f64", ctx=ctx, requires_grad=True)
    h = x.register_hook(lambda g: "no")
    with pytest.raises(TypeError, match="None or a Tensor"):
        (x * 3.0).sum().backward()
    h.remove()


def test_checkpoint_gives_the_same_gradients(ctx):
    a0 = np.linspace(-1, 1, 12).reshape(3, 4)
    x1 = fc.tensor(a0, dtype="f64", ctx=ctx, requires_grad=True)
    x2 = fc.tensor(a0, dtype="f64", ctx=ctx, requires_grad=True)
    calls = []

    def block(t):
        calls.append(1)
        return (t.tanh() * t).exp()

    fc.checkpoint(block, x1).sum().backward()
    block(x2).sum().backward()
    assert len(calls) == 3  # forward, recompute in backward, the plain run
    np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())
    with pytest.raises(ValueError):
        fc.checkpoint(block)


def test_checkpoint_exception_in_recompute_propagates(ctx):
    x = fc.tensor([0.5, 1.5], dtype="f64", ctx=ctx, requires_grad=True)
    state = {"n": 0}

    def fn(t):
        state["n"] += 1
        if state["n"] > 1:
            raise RuntimeError("recompute failed")
        return t * t

    y = fc.checkpoint(fn, x).sum()
    with pytest.raises(RuntimeError, match="recompute failed"):
        y.backward()
