# SPDX-License-Identifier: MIT
"""Optimizers: fc_optim (SGD, Adam, AdamW, RMSprop, Adagrad, Lion, LAMB).

    opt = fucina.optim.Adam([w, b], lr=1e-3)
    loss.backward(); opt.step(); opt.zero_grad()

The update rules are the C library's (include/fucina/optim.h), which follow
torch.optim; an option left at None takes the C default (PyTorch's). The
optimizer holds a reference to every parameter, so they live as long as it
does; close() (or the end of a `with` block, or garbage collection) frees it.
"""
import ctypes
import numbers

from . import errors
from ._core import Tensor
from ._lib import OptimOpts, lib

# fc_optim_kind, in the header's order.
KINDS = ("sgd", "adam", "adamw", "rmsprop", "adagrad", "lion", "lamb")
_REALS = ("lr", "weight_decay", "momentum", "dampening", "beta1", "beta2", "eps", "alpha",
          "lr_decay", "initial_accumulator_value")
_BOOLS = ("nesterov", "amsgrad", "centered")


def _opts(kind, kw):
    if kind not in KINDS:
        raise ValueError("optimizer kind must be one of %s, not %r" % (KINDS, kind))
    o = OptimOpts(kind=KINDS.index(kind))
    for k, v in kw.items():
        if k == "betas":
            if not isinstance(v, (tuple, list)) or len(v) != 2:
                raise TypeError("betas must be a pair of reals")
            kw_b = {"beta1": v[0], "beta2": v[1]}
            for kb, vb in kw_b.items():
                if isinstance(vb, bool) or not isinstance(vb, numbers.Real):
                    raise TypeError("%s must be a real number" % kb)
                setattr(o, kb, float(vb))
        elif k in _REALS:
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError("%s must be a real number, not %s" % (k, type(v).__name__))
            setattr(o, k, float(v))
        elif k in _BOOLS:
            if not isinstance(v, bool):
                raise TypeError("%s must be a bool" % k)
            setattr(o, k, v)
        else:
            raise TypeError("unknown optimizer option %r" % k)
    return o


def _params(params):
    ps = list(params)
    if not ps:
        raise ValueError("optimizer: no parameters")
    for p in ps:
        if not isinstance(p, Tensor):
            raise TypeError("optimizer: parameters must be Tensors, not %s" % type(p).__name__)
    if len(ps) > 2 ** 31 - 1:
        raise ValueError("optimizer: too many parameters")
    return ps


class Optimizer:
    """fc_optim over params with one group of options; add_group adds more."""

    def __init__(self, kind, params, **options):
        ps = _params(params)
        self._ctx = ps[0].ctx
        self._kind = kind
        o = _opts(kind, {k: v for k, v in options.items() if v is not None})
        arr = (ctypes.c_void_p * len(ps))(*[p.handle for p in ps])
        self._h = lib.fc_optim_new(self._ctx._h, ctypes.byref(o), arr, len(ps))
        if not self._h:
            self._ctx.check()
            raise errors.Error(-21, "fc_optim_new returned NULL without an error")
        self._params = ps

    def add_group(self, params, **options):
        """A parameter group with its own options (same kind)."""
        ps = _params(params)
        o = _opts(self._kind, {k: v for k, v in options.items() if v is not None})
        arr = (ctypes.c_void_p * len(ps))(*[p.handle for p in ps])
        self._ctx.check(lib.fc_optim_add_group(self.handle, ctypes.byref(o), arr, len(ps)))
        self._params = self._params + ps

    @property
    def handle(self):
        if not self._h:
            raise errors.StateError(-21, "optimizer used after close()")
        return self._h

    def step(self):
        """One update of every parameter with a gradient (all or nothing)."""
        self._ctx.check(lib.fc_optim_step(self.handle))

    def zero_grad(self):
        lib.fc_optim_zero_grad(self.handle)

    @property
    def lr(self):
        """The first group's learning rate; setting it sets every group's."""
        return lib.fc_optim_lr(self.handle, 0)

    @lr.setter
    def lr(self, value):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError("lr must be a real number")
        self._ctx.check(lib.fc_optim_set_lr(self.handle, float(value)))

    def group_lr(self, group):
        if not 0 <= group < lib.fc_optim_group_count(self.handle):
            raise IndexError("optimizer has no group %d" % group)
        return lib.fc_optim_lr(self.handle, group)

    def set_group_lr(self, group, value):
        self._ctx.check(lib.fc_optim_set_group_lr(self.handle, int(group), float(value)))

    @property
    def step_count(self):
        return lib.fc_optim_step_count(self.handle)

    def close(self):
        h, self._h = self._h, None
        if h and self._ctx._h:
            lib.fc_optim_free(h)
        self._params = []

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def SGD(params, lr, momentum=None, dampening=None, weight_decay=None, nesterov=False):
    return Optimizer("sgd", params, lr=lr, momentum=momentum, dampening=dampening,
                     weight_decay=weight_decay, nesterov=nesterov)


def Adam(params, lr=1e-3, betas=None, eps=None, weight_decay=None, amsgrad=False):
    return Optimizer("adam", params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                     amsgrad=amsgrad)


def AdamW(params, lr=1e-3, betas=None, eps=None, weight_decay=1e-2, amsgrad=False):
    return Optimizer("adamw", params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                     amsgrad=amsgrad)


def RMSprop(params, lr=1e-2, alpha=None, eps=None, weight_decay=None, momentum=None,
            centered=False):
    return Optimizer("rmsprop", params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                     momentum=momentum, centered=centered)


def Adagrad(params, lr=1e-2, lr_decay=None, weight_decay=None, initial_accumulator_value=None,
            eps=None):
    return Optimizer("adagrad", params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                     initial_accumulator_value=initial_accumulator_value, eps=eps)


def Lion(params, lr=1e-4, betas=None, weight_decay=None):
    return Optimizer("lion", params, lr=lr, betas=betas, weight_decay=weight_decay)


def Lamb(params, lr=1e-3, betas=None, eps=None, weight_decay=None):
    """LAMB as include/fucina/optim.h defines it (torch has none)."""
    return Optimizer("lamb", params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
