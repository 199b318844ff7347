# SPDX-License-Identifier: MIT
"""fucina from Python: a ctypes binding of libfucina's C API.

    import fucina as fc
    x = fc.tensor([[1.0, 2.0]], dtype="f64", requires_grad=True)
    y = (x * x).sum()
    y.backward()
    x.grad.numpy()      # [[2., 4.]]

Modules: fucina.autograd (grad, gradcheck, gradgradcheck, checkpoint),
fucina.optim (SGD, Adam, AdamW, RMSprop, Adagrad, Lion, LAMB), fucina.io
(safetensors, GGUF) and fucina.llama (models, tokenizers and generation,
imported on demand: it loads libfucina_models).

Every failed call raises fucina.Error (a subclass per status family) with
the context's message; see fucina.errors.
"""
from . import autograd, functional, io, optim
from ._core import (DTYPES, UNARY, Context, Tensor, arange, concat, default_context, from_numpy,
                    full, is_grad_enabled, keep, maximum, minimum, no_grad, ones, rand, randn,
                    scope, stack, tensor, where, zeros)
from .autograd import checkpoint, grad, gradcheck, gradgradcheck
from .errors import (BackendError, DTypeError, Error, FileFormatError, IndexRangeError,
                     InvalidArgumentError, NumericError, OutOfMemoryError, ShapeError,
                     StateError)

__all__ = ["autograd", "functional", "io", "optim", "checkpoint", "DTYPES", "UNARY", "Context", "Tensor", "arange", "default_context", "concat", "stack",
           "where", "maximum", "minimum",
           "from_numpy", "full", "is_grad_enabled", "keep", "no_grad", "ones", "rand", "randn",
           "scope", "tensor", "zeros", "grad", "gradcheck", "gradgradcheck", "BackendError",
           "DTypeError", "Error", "FileFormatError", "IndexRangeError", "InvalidArgumentError",
           "NumericError", "OutOfMemoryError", "ShapeError", "StateError"]
