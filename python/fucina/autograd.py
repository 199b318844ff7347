# SPDX-License-Identifier: MIT
"""Functional autograd: grad (fc_autograd_grad), gradcheck, gradgradcheck,
checkpoint (fc_grad_checkpoint) and gradient hooks (Tensor.register_hook).

gradcheck and gradgradcheck take a Python function of Tensors. The C API
calls it through an fc_gradcheck_fn made with ctypes.CFUNCTYPE; an
exception raised inside cannot cross the C frames, so the callback records
it in the context (FC_ERR_INVALID_ARG, "python callback raised ...") and
returns NULL, and the exception itself is re-raised once the C call has
returned. Hooks and checkpointed functions run during a backward walk do the
same: the walk fails with the callback's status and the call that started
it (Tensor.backward, grad) raises the exception.
"""
import ctypes
import numbers

from . import _core
from ._core import Tensor, _wrap
from ._lib import GRADCHECK_FN, AutogradGradOpts, GradcheckOpts, GradcheckReport, lib

# fc_grad_hook_fn: status (ctx, grad, replace, user)
GRAD_HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
FC_ERR_INVALID_ARG = -2


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
    _core.run_walk(ctx, lib.fc_autograd_grad, ctx._h, o, gouts, len(outs), i, len(ins),
                   ctypes.byref(opts), res)
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
            _core.pending_exceptions.append(e)
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
    del _core.pending_exceptions[:]
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


def checkpoint(fn, *inputs):
    """fc_grad_checkpoint: fn(*inputs) (1 to 4 Tensors in, a Tensor out)
    without keeping its intermediate values; a backward walk runs fn again
    (from the same RNG state) to get them. fn must compute the same graph
    each time. The result keeps fn alive for as long as anything computed
    from it does."""
    ins, _ = _tensor_list(list(inputs), "checkpoint inputs")
    if not callable(fn):
        raise TypeError("checkpoint: fn must be callable")
    if not 1 <= len(ins) <= 4:
        raise ValueError("checkpoint: takes 1 to 4 input Tensors, got %d" % len(ins))
    ctx = ins[0].ctx
    cb = _Callback(fn, ctx)
    arr = (ctypes.c_void_p * len(ins))(*[t.handle for t in ins])
    del _core.pending_exceptions[:]
    h = lib.fc_grad_checkpoint(ctx._h, cb.c, None, arr, len(ins))
    del _core.pending_exceptions[:]
    if cb.exc is not None:
        if h:
            lib.fc_release(h)
        lib.fc_ctx_clear_error(ctx._h)
        raise cb.exc
    cb.exc = None  # a later recompute reports through the walk
    out = _wrap(ctx, h, ins)
    out._bases = out._bases + (cb,)
    return out


class HookHandle:
    """A registered gradient hook; remove() unregisters it."""

    def __init__(self, tensor, hook_id, cb):
        self._tensor, self._id, self._cb = tensor, hook_id, cb

    def remove(self):
        if self._cb is None:
            return
        t = self._tensor
        st = lib.fc_grad_hook_remove(t.handle, self._id)
        t.ctx.check(st)
        _live_hooks.pop(id(self._cb), None)
        self._cb = None


# Hooks stay registered on the C tensor after its Python object is gone (a
# leaf held by a graph), so their callbacks live here until removed.
_live_hooks = {}


class _HookCallback:
    def __init__(self, fn, ctx):
        self.fn, self.ctx = fn, ctx
        self.c = GRAD_HOOK_FN(self._call)

    def _call(self, ctx_h, grad, replace, user):
        _core.callback_depth += 1
        try:
            g = Tensor(lib.fc_retain(grad), self.ctx)
            out = self.fn(g)
            if out is not None:
                if not isinstance(out, Tensor):
                    raise TypeError("hook: must return None or a Tensor, not %s"
                                    % type(out).__name__)
                replace[0] = out.handle
                _core.hook_results.append(out)  # C borrows it past this return
            return 0
        except BaseException as e:  # noqa: B902 - nothing may unwind through C
            _core.pending_exceptions.append(e)
            lib.fc_ctx_fail(ctypes.c_void_p(ctx_h), ctypes.c_int(FC_ERR_INVALID_ARG), b"%s",
                            ("python hook raised %s: %s" % (type(e).__name__, e)).encode())
            return FC_ERR_INVALID_ARG
        finally:
            _core.callback_depth -= 1


def _register_hook(t, fn):
    if not callable(fn):
        raise TypeError("register_hook: fn must be callable")
    cb = _HookCallback(fn, t.ctx)
    hid = ctypes.c_int64()
    t.ctx.check(lib.fc_grad_hook_add(t.handle, ctypes.cast(cb.c, ctypes.c_void_p), None,
                                     ctypes.byref(hid)))
    _live_hooks[id(cb)] = cb
    return HookHandle(t, hid.value, cb)
