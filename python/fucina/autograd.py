# SPDX-License-Identifier: MIT
"""Functional autograd: grad (fc_autograd_grad), gradcheck, gradgradcheck.

gradcheck and gradgradcheck take a Python function of Tensors. The C API
calls it through an fc_gradcheck_fn made with ctypes.CFUNCTYPE; an
exception raised inside cannot cross the C frames, so the callback records
it in the context (FC_ERR_INVALID_ARG, "python callback raised ...") and
returns NULL, and the exception itself is re-raised once the C call has
returned.
"""
import ctypes
import numbers

from . import _core
from ._core import Tensor, _wrap
from ._lib import GRADCHECK_FN, AutogradGradOpts, GradcheckOpts, GradcheckReport, lib


def _tensor_list(xs, what):
    if isinstance(xs, Tensor):
        return [xs], True
    xs = list(xs)
    if not xs:
        raise ValueError("%s: empty" % what)
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError("%s: expected Tensors, got %s" % (what, type(x).__name__))
    return xs, False


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=False,
         allow_unused=False):
    """torch.autograd.grad: a tuple of new Tensors, one per input (None for
    an unreached input with allow_unused)."""
    outs, _ = _tensor_list(outputs, "grad outputs")
    ins, _ = _tensor_list(inputs, "grad inputs")
    ctx = outs[0].ctx
    gouts = None
    if grad_outputs is not None:
        gl = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
        if len(gl) != len(outs):
            raise ValueError("grad: %d grad_outputs for %d outputs" % (len(gl), len(outs)))
        for g in gl:
            if g is not None and not isinstance(g, Tensor):
                raise TypeError("grad: grad_outputs must be Tensors or None")
        gouts = (ctypes.c_void_p * len(gl))(*[g.handle if g is not None else None for g in gl])
    o = (ctypes.c_void_p * len(outs))(*[t.handle for t in outs])
    i = (ctypes.c_void_p * len(ins))(*[t.handle for t in ins])
    res = (ctypes.c_void_p * len(ins))()
    opts = AutogradGradOpts(retain_graph=bool(retain_graph), allow_unused=bool(allow_unused),
                            create_graph=bool(create_graph))
    ctx.check(lib.fc_autograd_grad(ctx._h, o, gouts, len(outs), i, len(ins),
                                   ctypes.byref(opts), res))
    return tuple(_wrap(ctx, h, outs + ins) if h else None for h in res)


class _Callback:
    """fn as an fc_gradcheck_fn; keeps the first exception it raised."""

    def __init__(self, fn, ctx):
        self.fn, self.ctx, self.exc = fn, ctx, None
        self.c = GRADCHECK_FN(self._call)

    def _call(self, ctx_h, inputs, n, user):
        _core.callback_depth += 1
        try:
            args = [Tensor(lib.fc_retain(inputs[k]), self.ctx) for k in range(n)]
            out = self.fn(*args)
            if not isinstance(out, Tensor):
                raise TypeError("gradcheck: fn must return a Tensor, not %s"
                                % type(out).__name__)
            # The C caller releases fn's result through its scope, so it gets
            # a fresh handle made in that scope (an identity view), not one
            # Python owns: a retained handle would never be released.
            return lib.fc_contiguous(ctx_h, out.handle)
        except BaseException as e:  # noqa: B902 - nothing may unwind through C
            if self.exc is None:
                self.exc = e
            # fc_ctx_fail is variadic (not in the generated table): called
            # with explicit ctypes arguments, "%s" so the text is not a format.
            lib.fc_ctx_fail(ctypes.c_void_p(ctx_h), ctypes.c_int(-2), b"%s",
                            ("python callback raised %s: %s" % (type(e).__name__, e)).encode())
            return None
        finally:
            _core.callback_depth -= 1


def _check(cfn, fn, inputs, eps, atol, rtol, seed, raise_exception, constant_grad_output):
    ins, _ = _tensor_list(inputs, "gradcheck inputs")
    if not callable(fn):
        raise TypeError("gradcheck: fn must be callable")
    for v in (eps, atol, rtol):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError("gradcheck: eps, atol and rtol must be real numbers")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError("gradcheck: seed must be int")
    ctx = ins[0].ctx
    cb = _Callback(fn, ctx)
    arr = (ctypes.c_void_p * len(ins))(*[t.handle for t in ins])
    opts = GradcheckOpts(eps=eps, atol=atol, rtol=rtol, seed=seed,
                         constant_grad_output=bool(constant_grad_output))
    rep = GradcheckReport()
    st = cfn(ctx._h, cb.c, None, arr, len(ins), ctypes.byref(opts), ctypes.byref(rep))
    if cb.exc is not None:
        lib.fc_ctx_clear_error(ctx._h)
        raise cb.exc
    if st != 0 and (raise_exception or rep.checked == 0):
        ctx.check(st)
    lib.fc_ctx_clear_error(ctx._h)
    return st == 0


def gradcheck(fn, inputs, eps=0.0, atol=0.0, rtol=0.0, seed=0, raise_exception=True):
    """fc_gradcheck of fn(*inputs) (f64 leaves that require grad; 0 picks the
    C defaults eps 1e-6, atol 1e-5, rtol 1e-3). True when it passes; a
    mismatch raises StateError naming the worst element, or returns False
    with raise_exception=False."""
    return _check(lib.fc_gradcheck, fn, inputs, eps, atol, rtol, seed, raise_exception, False)


def gradgradcheck(fn, inputs, eps=0.0, atol=0.0, rtol=0.0, seed=0, raise_exception=True,
                  constant_grad_output=False):
    """fc_gradgradcheck: second derivatives, as gradcheck."""
    return _check(lib.fc_gradgradcheck, fn, inputs, eps, atol, rtol, seed, raise_exception,
                  constant_grad_output)
