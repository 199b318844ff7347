# SPDX-License-Identifier: MIT
"""Functions over Tensors that are not methods: linear, losses.

    y = fucina.functional.linear(x, w, b)        # x @ w.T + b, fc_linear
    loss = fucina.functional.cross_entropy(y, targets)

Shapes, dtypes and errors are the C library's (matmul.h, ops.h).
"""
import ctypes
import numbers

from ._core import Tensor, _as_tensor
from ._lib import STRUCT, lib

_REDUCTIONS = ("mean", "sum", "none")  # fc_reduction, in the header's order


def _reduction(r):
    if r not in _REDUCTIONS:
        raise ValueError("reduction must be one of %s, not %r" % (_REDUCTIONS, r))
    return _REDUCTIONS.index(r)


def _tensor(x, what):
    if not isinstance(x, Tensor):
        raise TypeError("%s: expected a Tensor, got %s" % (what, type(x).__name__))
    return x


def linear(x, w, bias=None):
    """x @ w^T (+ bias): x [..., in], w [out, in], bias [out] or None."""
    _tensor(x, "linear x")
    _tensor(w, "linear w")
    if bias is not None:
        _tensor(bias, "linear bias")
    h = lib.fc_linear(x.ctx._h, x.handle, w.handle, bias.handle if bias is not None else None)
    return x._wrap(h, w, *([bias] if bias is not None else []))


def mse_loss(a, b, reduction="mean"):
    _tensor(a, "mse_loss a")
    b = _as_tensor(b, a.ctx, like=a)
    return a._wrap(lib.fc_mse_loss(a.ctx._h, a.handle, b.handle, _reduction(reduction)), b)


def cross_entropy(logits, targets, reduction="mean", ignore_index=None, label_smoothing=0.0):
    """Fused log-softmax + NLL over logits [N, C] and integer targets [N]."""
    _tensor(logits, "cross_entropy logits")
    targets = _as_tensor(targets, logits.ctx)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, numbers.Real):
        raise TypeError("cross_entropy: label_smoothing must be a real number")
    opts = STRUCT["fc_ce_opts"](reduction=_reduction(reduction),
                                ignore_index=int(ignore_index or 0),
                                use_ignore=ignore_index is not None,
                                label_smoothing=float(label_smoothing))
    return logits._wrap(lib.fc_cross_entropy(logits.ctx._h, logits.handle, targets.handle,
                                             ctypes.byref(opts)), targets)
