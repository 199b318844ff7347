# SPDX-License-Identifier: MIT
import numpy as np
import pytest

import fucina as fc


def test_backward_accumulates_grad(ctx):
    x = fc.tensor([[1.0, -2.0, 3.0]], dtype="f64", requires_grad=True, ctx=ctx)
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = (x * x).sum()
    assert not y.is_leaf
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, -4.0, 6.0]])
    (x.tanh().sum()).backward()  # accumulates
    xs = np.array([[1.0, -2.0, 3.0]])
    np.testing.assert_allclose(x.grad.numpy(), 2 * xs + 1 - np.tanh(xs) ** 2, rtol=1e-14)
    x.zero_grad()
    assert x.grad is None


def test_backward_with_explicit_gradient(ctx):
    x = fc.tensor([1.0, 2.0], dtype="f64", requires_grad=True, ctx=ctx)
    y = x * 3.0
    y.backward(fc.tensor([1.0, 10.0], dtype="f64", ctx=ctx))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 30.0])


def test_no_grad_records_nothing(ctx):
    x = fc.tensor([1.0], dtype="f64", requires_grad=True, ctx=ctx)
    with fc.no_grad(ctx):
        assert not fc.is_grad_enabled(ctx)
        y = x * 2.0
    assert fc.is_grad_enabled(ctx)
    assert not y.requires_grad
    assert (x * 2.0).requires_grad


def test_autograd_grad_matches_analytic(ctx):
    a = np.array([[0.5, -1.0], [2.0, 0.25]])
    x = fc.tensor(a, requires_grad=True, ctx=ctx)
    w = fc.tensor(np.array([[1.0], [-3.0]]), requires_grad=True, ctx=ctx)
    loss = (x @ w).tanh().sum()
    gx, gw = fc.grad(loss, [x, w])
    s = 1 - np.tanh(a @ np.array([[1.0], [-3.0]])) ** 2
    np.testing.assert_allclose(gx.numpy(), s @ np.array([[1.0, -3.0]]), rtol=1e-14)
    np.testing.assert_allclose(gw.numpy(), a.T @ s, rtol=1e-14)
    assert x.grad is None  # fc_autograd_grad changes no leaf's gradient


def test_autograd_grad_allow_unused(ctx):
    x = fc.tensor([1.0], dtype="f64", requires_grad=True, ctx=ctx)
    z = fc.tensor([1.0], dtype="f64", requires_grad=True, ctx=ctx)
    y = (x * x).sum()
    with pytest.raises(fc.InvalidArgumentError):
        fc.grad(y, [x, z], retain_graph=True)
    gx, gz = fc.grad(y, [x, z], allow_unused=True)
    assert gz is None and gx.numpy().tolist() == [2.0]


def _f_fc(x, a):
    return ((a @ x).tanh() ** 2.0).sum() + (x * x * x).sum()


def test_hvp_matches_pytorch_f64(ctx):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 4))
    x0 = rng.standard_normal((4, 1))
    v0 = rng.standard_normal((4, 1))
    x = fc.tensor(x0, requires_grad=True, ctx=ctx)
    ta = fc.tensor(a, ctx=ctx)
    (g,) = fc.grad(_f_fc(x, ta), x, create_graph=True)
    assert g.requires_grad
    (hv,) = fc.grad((g * fc.tensor(v0, ctx=ctx)).sum(), x)
    at = torch.tensor(a, dtype=torch.float64)

    def f_torch(xt):
        return (torch.tanh(at @ xt) ** 2).sum() + (xt * xt * xt).sum()

    _, hv_ref = torch.autograd.functional.hvp(
        f_torch, torch.tensor(x0, dtype=torch.float64), torch.tensor(v0, dtype=torch.float64))
    np.testing.assert_allclose(hv.numpy(), hv_ref.numpy(), rtol=1e-12, atol=1e-13)


def test_gradcheck_and_gradgradcheck_of_a_user_function(ctx):
    rng = np.random.default_rng(5)
    x = fc.tensor(rng.standard_normal((3, 2)), requires_grad=True, ctx=ctx)
    w = fc.tensor(rng.standard_normal((2, 2)), requires_grad=True, ctx=ctx)

    def fn(x, w):
        return (x @ w).tanh() * x.sum(axis=1, keepdims=True) + 1.0

    assert fc.gradcheck(fn, [x, w])
    assert fc.gradgradcheck(fn, [x, w])


def test_gradcheck_refuses_f32(ctx):
    x = fc.tensor([1.0, 2.0], dtype="f32", requires_grad=True, ctx=ctx)
    with pytest.raises(fc.DTypeError) as ei:
        fc.gradcheck(lambda t: t * t, [x])
    assert "gradcheck" in ei.value.message


def test_exception_in_callback_is_reraised_after_the_call(ctx):
    x = fc.tensor([1.0, 2.0], dtype="f64", requires_grad=True, ctx=ctx)
    calls = []

    def fn(t):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("boom")
        return t * t

    with pytest.raises(KeyError, match="boom"):
        fc.gradcheck(fn, [x])
    # the context is clean afterwards
    assert ctx.stats()["tensors_live"] >= 1
    assert (x * 2.0).sum().item() == 6.0

    with pytest.raises(TypeError, match="must return a Tensor"):
        fc.gradcheck(lambda t: 1.0, [x])
    with pytest.raises(TypeError):
        fc.gradcheck("not callable", [x])


def test_gradcheck_reports_a_wrong_gradient(ctx):
    x = fc.tensor([0.5, -1.5, 2.0], dtype="f64", requires_grad=True, ctx=ctx)

    def wrong(t):  # d/dt of t * const(t) is const(t), not the true 2t
        return t * t.detach()

    with pytest.raises(fc.StateError) as ei:
        fc.gradcheck(wrong, [x])
    assert ei.value.status_name == "FC_ERR_STATE"
    assert "analytic" in ei.value.message or "numeric" in ei.value.message
    assert fc.gradcheck(wrong, [x], raise_exception=False) is False
    assert (x * 1.0).sum().item() == 1.0  # the context's error was cleared


def test_context_freed_before_its_tensors_is_safe():
    c = fc.Context(threads=1)
    t = fc.ones((2,), ctx=c)
    c.__del__()  # as the finalizer order of a collected cycle may do
    t.release()  # must not touch the freed handle
    assert t.released


def test_tensors_a_gradcheck_function_keeps_stay_valid(ctx):
    # gradcheck calls fn inside a C scope; what fn made and stored must
    # survive the scope's end, owned by Python alone
    from fucina._lib import lib
    x = fc.tensor([0.25, -0.5], dtype="f64", requires_grad=True, ctx=ctx)
    stash = []

    def fn(t):
        for _ in range(80):  # more than the 64 released handles kept in quarantine
            stash.append(t * 1.0)
        return (t * t).tanh()

    assert fc.gradcheck(fn, [x])
    assert lib.fc_ctx_status(ctx._h) == 0
    assert len(stash) == 80 * 5  # 2 * numel + 1 calls
    # the first call is the unperturbed analytic pass; later ones see x +- eps
    assert all(s.numpy().tolist() == [0.25, -0.5] for s in stash[:80])
    np.testing.assert_allclose(stash[-1].numpy(), [0.25, -0.5], atol=1e-5)
    assert all(not s.released for s in stash)
    del stash
