# SPDX-License-Identifier: MIT
import gc

import numpy as np
import pytest

import fucina as fc

RNG = np.random.default_rng(3)


def test_elementwise_and_matmul_match_numpy(ctx):
    a = RNG.standard_normal((3, 4))
    b = RNG.standard_normal((3, 4))
    c = RNG.standard_normal((4, 2))
    ta, tb, tc = (fc.tensor(x, ctx=ctx) for x in (a, b, c))
    assert ta.dtype == "f64" and ta.shape == (3, 4)
    np.testing.assert_allclose((ta + tb).numpy(), a + b, rtol=1e-15)
    np.testing.assert_allclose((ta - tb).numpy(), a - b, rtol=1e-15)
    np.testing.assert_allclose((ta * tb).numpy(), a * b, rtol=1e-15)
    np.testing.assert_allclose((ta / tb).numpy(), a / b, rtol=1e-15)
    np.testing.assert_allclose((ta @ tc).numpy(), a @ c, rtol=1e-12)
    np.testing.assert_allclose(ta.matmul(tc).numpy(), a @ c, rtol=1e-12)
    np.testing.assert_allclose((2.0 - ta).numpy(), 2.0 - a, rtol=1e-15)
    np.testing.assert_allclose((ta + 1.5).numpy(), a + 1.5, rtol=1e-15)
    np.testing.assert_allclose((3.0 * ta).numpy(), 3.0 * a, rtol=1e-15)
    np.testing.assert_allclose((1.0 / tb).numpy(), 1.0 / b, rtol=1e-15)
    np.testing.assert_allclose((-ta).numpy(), -a)
    np.testing.assert_allclose((ta ** 2.0).numpy(), a ** 2, rtol=1e-15)
    # an ndarray on the left defers to the Tensor (no object-array broadcast)
    r = a + tb
    assert isinstance(r, fc.Tensor)
    np.testing.assert_allclose(r.numpy(), a + b, rtol=1e-15)


def test_unary_reductions_and_layout_match_numpy(ctx):
    a = RNG.standard_normal((2, 3, 4))
    t = fc.tensor(a, ctx=ctx)
    np.testing.assert_allclose(t.relu().numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(t.tanh().numpy(), np.tanh(a), rtol=1e-14)
    np.testing.assert_allclose(t.exp().numpy(), np.exp(a), rtol=1e-14)
    np.testing.assert_allclose(t.abs().sqrt().numpy(), np.sqrt(np.abs(a)), rtol=1e-14)
    np.testing.assert_allclose(t.sum().numpy(), [a.sum()], rtol=1e-13)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), a.sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(t.mean(axis=(0, 2), keepdims=True).numpy(),
                               a.mean(axis=(0, 2), keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(t.max(axis=-1).numpy(), a.max(axis=-1))
    np.testing.assert_allclose(t.T.numpy(), a.T)
    np.testing.assert_allclose(t.reshape(6, -1).numpy(), a.reshape(6, -1))
    np.testing.assert_allclose(t.reshape((4, 6)).numpy(), a.reshape(4, 6))
    np.testing.assert_allclose(t.transpose(0, 2).numpy(), a.transpose(2, 1, 0))
    np.testing.assert_allclose(t.softmax(-1).numpy(),
                               np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-13)
    assert t.sum().item() == pytest.approx(a.sum(), rel=1e-13)


def test_indexing_by_int_and_slice_matches_numpy(ctx):
    a = np.arange(24.0).reshape(2, 3, 4)
    t = fc.tensor(a, ctx=ctx)
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    np.testing.assert_array_equal(t[-1, 2].numpy(), a[-1, 2])
    np.testing.assert_array_equal(t[:, 1:].numpy(), a[:, 1:])
    np.testing.assert_array_equal(t[0, ::2, 1:4:2].numpy(), a[0, ::2, 1:4:2])
    np.testing.assert_array_equal(t[:, -2:, :-1].numpy(), a[:, -2:, :-1])
    np.testing.assert_array_equal(t[1, 2, 3].numpy(), [a[1, 2, 3]])  # no rank 0: shape [1]
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]


def test_dtypes_round_trip(ctx):
    for name, npd in [("bool", np.bool_), ("u8", np.uint8), ("i16", np.int16),
                      ("i32", np.int32), ("i64", np.int64), ("f16", np.float16),
                      ("f32", np.float32), ("f64", np.float64)]:
        a = (np.arange(6) % 3).astype(npd).reshape(2, 3)
        t = fc.tensor(a, ctx=ctx)
        assert t.dtype == name
        out = t.numpy()
        assert out.dtype == npd
        np.testing.assert_array_equal(out, a)
    t = fc.tensor([1.0, 2.0], ctx=ctx).to("bf16")
    with pytest.raises(fc.DTypeError):
        t.numpy()
    np.testing.assert_array_equal(t.to("f32").numpy(), [1.0, 2.0])
    assert fc.tensor(5.0, ctx=ctx).shape == (1,)


def test_copy_does_not_alias(ctx):
    a = np.ones(4)
    t = fc.tensor(a, ctx=ctx)
    a[0] = 9.0
    assert t.numpy()[0] == 1.0


def test_zero_copy_from_numpy_aliases_and_keeps_the_array_alive(ctx):
    a = np.arange(6.0).reshape(2, 3)
    t = fc.from_numpy(a)  # default context
    t2 = fc.tensor(a, copy=False, ctx=ctx)
    a[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0 and t2.numpy()[0, 0] == 42.0
    v = t2.T  # a view made from it keeps the array alive too
    del a, t, t2
    gc.collect()
    np.testing.assert_array_equal(v.numpy(), [[42.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    with pytest.raises(TypeError):
        fc.tensor(np.ones((3, 4))[:, ::2], copy=False, ctx=ctx)  # not C-contiguous
    with pytest.raises(TypeError):
        fc.tensor(np.ones(3), dtype="f32", copy=False, ctx=ctx)  # would need a cast


def test_zero_copy_of_a_read_only_array_is_read_only(ctx):
    a = np.ones(3)
    a.flags.writeable = False
    t = fc.tensor(a, copy=False, ctx=ctx)
    np.testing.assert_array_equal((t * 2.0).numpy(), [2.0, 2.0, 2.0])


def test_array_interface_is_zero_copy_and_keeps_the_tensor_alive(ctx):
    t = fc.arange(0, 6, dtype="f32", ctx=ctx).reshape(2, 3)
    arr = np.asarray(t)
    assert arr.dtype == np.float32 and arr.shape == (2, 3)
    assert not arr.flags.writeable
    assert arr.__array_interface__["data"][0] == t.__array_interface__["data"][0]
    del t
    gc.collect()
    np.testing.assert_array_equal(arr, [[0, 1, 2], [3, 4, 5]])
    del arr
    # a strided view has no interface: NumPy takes the copying __array__
    u = fc.arange(0, 6, dtype="f32", ctx=ctx).reshape(2, 3).T
    assert not u.is_contiguous()
    np.testing.assert_array_equal(np.asarray(u), [[0, 3], [1, 4], [2, 5]])


def test_scope_releases_what_it_made_except_kept(ctx):
    base = ctx.stats()["tensors_live"]
    with fc.scope():
        a = fc.ones((2,), ctx=ctx)
        b = fc.keep(a + 1.0)
        c = a * b
    assert a.released and c.released and not b.released
    assert ctx.stats()["tensors_live"] == base + 1
    np.testing.assert_array_equal(b.numpy(), [2.0, 2.0])
    with fc.ones((3,), ctx=ctx) as d:
        assert d.sum().item() == 3.0
    assert d.released


def test_context_stats_count_tensors(ctx):
    assert ctx.stats()["tensors_live"] == 0
    a = fc.ones((2,), ctx=ctx)
    b = a + a
    assert ctx.stats()["tensors_live"] == 2
    del a, b
    gc.collect()
    assert ctx.stats()["tensors_live"] == 0


def test_more_ops_match_numpy(ctx):
    a = RNG.standard_normal((2, 3))
    b = RNG.standard_normal((2, 3))
    ta, tb = fc.tensor(a, ctx=ctx), fc.tensor(b, ctx=ctx)
    np.testing.assert_allclose(ta.clamp(-0.5, 0.5).numpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(ta.leaky_relu(0.1).numpy(), np.where(a > 0, a, 0.1 * a))
    np.testing.assert_allclose(ta.log_softmax(1).numpy(),
                               a - np.log(np.exp(a).sum(1, keepdims=True)), rtol=1e-13)
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)
    np.testing.assert_array_equal((ta > 0.0).numpy(), a > 0.0)
    np.testing.assert_array_equal((ta >= 0.0).numpy(), a >= 0.0)
    np.testing.assert_array_equal((ta <= tb).numpy(), a <= b)
    np.testing.assert_array_equal(fc.where(ta > tb, ta, tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(fc.maximum(ta, tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(fc.minimum(ta, 0.0).numpy(), np.minimum(a, 0.0))
    np.testing.assert_array_equal(fc.concat([ta, tb], axis=1).numpy(),
                                  np.concatenate([a, b], axis=1))
    np.testing.assert_array_equal(fc.stack([ta, tb]).numpy(), np.stack([a, b]))
    with pytest.raises(fc.ShapeError):
        fc.concat([ta, fc.ones((3, 3), dtype="f64", ctx=ctx)], axis=1)
    with pytest.raises(TypeError):
        fc.concat([ta, a])
    with pytest.raises(TypeError):
        ta.clamp("0", 1)


def test_works_without_numpy():
    import subprocess
    import sys
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import fucina as fc\n"
            "a = fc.arange(0, 6, dtype='f64').reshape(2, 3) * 2.0\n"
            "assert a.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]], a.tolist()\n"
            "assert a.sum().item() == 30.0\n"
            "try:\n    fc.tensor([1.0])\nexcept ImportError:\n    pass\n"
            "else:\n    raise SystemExit('tensor() without NumPy did not raise')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
