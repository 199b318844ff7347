# SPDX-License-Identifier: MIT
"""Context and Tensor: Python objects that own fucina handles.

A Tensor owns exactly one reference to its fc_tensor and drops it with
fc_release when it is released (release(), the end of a `with` block on it
or on a scope(), or garbage collection). It also keeps alive what its
storage may alias: its Context, and any NumPy array borrowed zero-copy by
it or by a tensor it was computed from (views and graph nodes may share
that memory).

Threads: as in C, a context and its tensors belong to one thread at a
time; a Tensor whose last Python reference goes on another thread is
released there, so share tensors across threads only with that handover
synchronised.

C scopes (fc_scope_begin/end) are not used: they would release references
the Python objects own. scope() gives the same semantics on the Python
side: every Tensor made inside is released at its end unless keep() was
called on it.
"""
import ctypes
import numbers
import weakref

from . import errors
from ._lib import CtxOpts, CtxStats, lib

try:
    import numpy as np
except ImportError:  # NumPy is optional: lists and scalars still work
    np = None

DTYPES = ("bool", "u8", "u16", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")
_NP_NAMES = {"bool": "bool", "u8": "uint8", "u16": "uint16", "i8": "int8", "i16": "int16",
             "i32": "int32", "i64": "int64", "f16": "float16", "f32": "float32",
             "f64": "float64"}


def dtype_code(name):
    if not isinstance(name, str):
        raise TypeError("dtype must be a str such as 'f32', not %s" % type(name).__name__)
    out = ctypes.c_int()
    st = lib.fc_dtype_from_name(name.encode(), ctypes.byref(out))
    if st != 0:
        raise errors.error_for(st, "unknown dtype name %r" % name)
    return out.value


def dtype_name(code):
    return lib.fc_dtype_name(code).decode()


class Context:
    """An fc_ctx. Tensors keep their context alive; it is freed when the
    last of them and the Context object itself are gone."""

    def __init__(self, threads=0, seed=0, check_finite=False):
        if not isinstance(threads, int) or not isinstance(seed, int):
            raise TypeError("Context: threads and seed must be int")
        opts = CtxOpts(threads=threads, seed=seed, check_finite=bool(check_finite))
        self._h = lib.fc_ctx_new(ctypes.byref(opts))
        if not self._h:
            raise errors.InvalidArgumentError(-2, "fc_ctx_new refused threads=%d" % threads)

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib is not None:
            lib.fc_ctx_free(h)

    def check(self, status=None):
        """Raises the context's recorded error (and clears it) when status is
        nonzero, or, with no status, when one is recorded."""
        st = lib.fc_ctx_status(self._h) if status is None else status
        if st == 0:
            return
        msg = lib.fc_ctx_error(self._h).decode("utf-8", "replace")
        if status is not None and lib.fc_ctx_status(self._h) == 0:
            msg = lib.fc_strerror(status).decode()  # the call recorded nothing
        lib.fc_ctx_clear_error(self._h)
        raise errors.error_for(st, msg)

    def stats(self):
        """fc_ctx_get_stats as a dict (tensors_live, bytes_live, ...)."""
        s = CtxStats()
        lib.fc_ctx_get_stats(self._h, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in CtxStats._fields_}

    def set_seed(self, seed):
        if not isinstance(seed, int):
            raise TypeError("set_seed: seed must be int")
        lib.fc_ctx_set_seed(self._h, seed)


_default = None


def default_context():
    """The context used when none is given (made on first use)."""
    global _default
    if _default is None:
        _default = Context()
    return _default


# ---- scopes -----------------------------------------------------------------
_scopes = []  # stack of lists of weak references


class scope:
    """with fucina.scope(): ... releases every Tensor made inside at the end,
    except those passed to keep() (mirrors fc_scope_begin/fc_scope_end)."""

    def __enter__(self):
        _scopes.append([])
        return self

    def __exit__(self, *exc):
        for ref in _scopes.pop():
            t = ref()
            if t is not None and not t._kept:
                t.release()
        return False


def keep(t):
    """Takes t out of every open scope (as fc_keep); returns t."""
    t._kept = True
    return t


def _as_tensor(x, ctx, like=None):
    if isinstance(x, Tensor):
        return x
    return tensor(x, dtype=like.dtype if like is not None else None, ctx=ctx)


class Tensor:
    """A handle to an fc_tensor. Made by fucina.tensor(), the creation
    functions, or ops; never constructed directly."""

    __slots__ = ("_h", "_ctx", "_bases", "_kept", "__weakref__")
    __array_ufunc__ = None  # ndarray op Tensor defers to Tensor's reflected op

    def __init__(self, handle, ctx, bases=()):
        self._h = handle
        self._ctx = ctx
        self._bases = bases
        self._kept = False
        if _scopes:
            _scopes[-1].append(weakref.ref(self))

    # ---- lifetime ----
    def release(self):
        """Drops this tensor's reference now; any later use raises StateError."""
        h, self._h = self._h, None
        # At interpreter exit or in a collected cycle the context may have
        # been finalized first; fc_ctx_free already freed every handle then.
        if h and self._ctx._h:
            lib.fc_release(h)
        self._bases = ()

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            self.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    @property
    def handle(self):
        if not self._h:
            raise errors.StateError(-21, "tensor used after release")
        return self._h

    @property
    def released(self):
        return not self._h

    # ---- results of C calls ----
    def _wrap(self, h, *others):
        return _wrap(self._ctx, h, (self,) + others)

    # ---- queries ----
    @property
    def ctx(self):
        return self._ctx

    @property
    def dtype(self):
        return dtype_name(lib.fc_tensor_dtype(self.handle))

    @property
    def ndim(self):
        return lib.fc_tensor_rank(self.handle)

    @property
    def shape(self):
        p = lib.fc_tensor_shape(self.handle)
        return tuple(p[i] for i in range(lib.fc_tensor_rank(self._h)))

    def numel(self):
        return lib.fc_tensor_numel(self.handle)

    def __len__(self):
        return self.shape[0]

    def is_contiguous(self):
        return bool(lib.fc_tensor_is_contiguous(self.handle))

    def __repr__(self):
        if not self._h:
            return "Tensor(<released>)"
        buf = ctypes.create_string_buffer(64)
        lib.fc_tensor_describe(self._h, buf, 64)
        body = repr(self.tolist()) if self.dtype in _NP_NAMES and self.numel() <= 64 else "..."
        return "Tensor(%s, %s)" % (buf.value.decode(), body)

    def item(self):
        out = ctypes.c_double()
        self._ctx.check(lib.fc_tensor_item(self.handle, ctypes.byref(out)))
        return out.value

    def __float__(self):
        return self.item()

    # ---- NumPy ----
    def numpy(self):
        """A new NumPy array holding a copy of the values (fc_tensor_copy_out)."""
        if np is None:
            raise ImportError("fucina: Tensor.numpy needs NumPy")
        name = self.dtype
        if name not in _NP_NAMES:
            raise errors.DTypeError(-6, "numpy: %s has no NumPy dtype; use .to('f32')" % name)
        out = np.empty(self.shape, dtype=_NP_NAMES[name])
        nbytes = lib.fc_tensor_nbytes(self._h)
        self._ctx.check(lib.fc_tensor_copy_out(out.ctypes.data, nbytes, self._h))
        return out

    def tolist(self):
        if np is not None:
            return self.numpy().tolist()
        n = self.numel()
        idx = (ctypes.c_int64 * 1)()
        flat = self.reshape(n)
        vals = []
        for i in range(n):
            idx[0] = i
            v = ctypes.c_double()
            self._ctx.check(lib.fc_tensor_element(flat.handle, idx, ctypes.byref(v)))
            vals.append(v.value)
        for dim in reversed(self.shape[1:]):  # nest as NumPy's tolist does
            vals = [vals[i:i + dim] for i in range(0, len(vals), dim)]
        return vals

    @property
    def __array_interface__(self):
        """Zero-copy, read-only view for np.asarray(t) when t is contiguous
        (the array keeps t alive); AttributeError otherwise, so NumPy falls
        back to __array__ (a copy)."""
        h = self.handle
        name = self.dtype
        if name not in _NP_NAMES or not lib.fc_tensor_is_contiguous(h):
            raise AttributeError("__array_interface__: not a contiguous NumPy dtype")
        ptr = lib.fc_tensor_data(h)
        if not ptr:
            self._ctx.check()
        return {"version": 3, "shape": self.shape, "typestr": np.dtype(_NP_NAMES[name]).str,
                "data": (ptr, True), "strides": None}

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    # ---- autograd ----
    @property
    def requires_grad(self):
        return bool(lib.fc_tensor_requires_grad(self.handle))

    @requires_grad.setter
    def requires_grad(self, on):
        if not isinstance(on, bool):
            raise TypeError("requires_grad must be a bool")
        self._ctx.check(lib.fc_requires_grad(self.handle, on))

    def requires_grad_(self, on=True):
        self.requires_grad = on
        return self

    @property
    def is_leaf(self):
        return bool(lib.fc_tensor_is_leaf(self.handle))

    @property
    def grad(self):
        """The accumulated gradient (a new Tensor sharing it), or None."""
        g = lib.fc_grad(self.handle)
        if not g:
            return None
        return Tensor(lib.fc_retain(g), self._ctx)

    def zero_grad(self):
        arr = (ctypes.c_void_p * 1)(self.handle)
        lib.fc_zero_grad(arr, 1)

    def backward(self, grad=None, retain_graph=False):
        """fc_backward (grad None: a one-element loss) or fc_backward_with."""
        if grad is None and not retain_graph:
            run_walk(self._ctx, lib.fc_backward, self._ctx._h, self.handle)
            return
        if grad is None:
            grad = ones(self.shape, dtype=self.dtype, ctx=self._ctx)
        grad = _as_tensor(grad, self._ctx, like=self)
        run_walk(self._ctx, lib.fc_backward_with, self._ctx._h, self.handle, grad.handle,
                 bool(retain_graph))

    def register_hook(self, fn):
        """Runs fn(grad) when this tensor's gradient of a backward walk is
        final (fc_grad_hook_add); fn returns None to keep the gradient or a
        Tensor of the same shape and dtype to replace it. An exception in fn
        fails the walk (the backward call raises it; gradients are left as
        a failed backward leaves them). Returns a handle with .remove()."""
        from .autograd import _register_hook
        return _register_hook(self, fn)

    def detach(self):
        return self._wrap(lib.fc_detach(self._ctx._h, self.handle))

    # ---- conversion and layout ----
    def to(self, dtype):
        return self._wrap(lib.fc_to(self._ctx._h, self.handle, dtype_code(dtype)))

    def clone(self):
        return self._wrap(lib.fc_clone(self._ctx._h, self.handle))

    def contiguous(self):
        return self._wrap(lib.fc_contiguous(self._ctx._h, self.handle))

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        arr = _int64_array(shape, "reshape")
        return self._wrap(lib.fc_reshape(self._ctx._h, self.handle, arr, len(shape)))

    def transpose(self, axis0, axis1):
        _check_ints((axis0, axis1), "transpose")
        return self._wrap(lib.fc_transpose(self._ctx._h, self.handle, axis0, axis1))

    def permute(self, *perm):
        if len(perm) == 1 and isinstance(perm[0], (tuple, list)):
            perm = tuple(perm[0])
        _check_ints(perm, "permute")
        if len(perm) != self.ndim:
            raise ValueError("permute: %d axes given for rank %d" % (len(perm), self.ndim))
        arr = (ctypes.c_int * len(perm))(*perm)
        return self._wrap(lib.fc_permute(self._ctx._h, self.handle, arr))

    @property
    def T(self):
        return self.permute(tuple(reversed(range(self.ndim))))

    def squeeze(self, axis):
        _check_ints((axis,), "squeeze")
        return self._wrap(lib.fc_squeeze(self._ctx._h, self.handle, axis))

    def unsqueeze(self, axis):
        _check_ints((axis,), "unsqueeze")
        return self._wrap(lib.fc_unsqueeze(self._ctx._h, self.handle, axis))

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError("too many indices (%d) for rank %d" % (len(key), self.ndim))
        out, axis, drop = self, 0, []
        for k in key:
            if isinstance(k, bool) or not isinstance(k, (numbers.Integral, slice)):
                raise TypeError("index must be int or slice, not %s" % type(k).__name__)
            if isinstance(k, slice):
                start, stop, step = k.start, k.stop, k.step
                step = 1 if step is None else step
                start = 0 if start is None else start
                stop = out.shape[axis] if stop is None else stop
                _check_ints((start, stop, step), "slice")
                out = out._wrap(lib.fc_slice(self._ctx._h, out.handle, axis, start, stop, step))
            else:
                i = int(k)
                dim = out.shape[axis]
                if not -dim <= i < dim:
                    raise IndexError("index %d out of range for axis %d of size %d"
                                     % (i, axis, dim))
                out = out._wrap(lib.fc_narrow(self._ctx._h, out.handle, axis, i % dim, 1))
                drop.append(axis)
            axis += 1
        for a in reversed(drop):  # no rank-0 tensors: a full index leaves shape [1]
            if out.ndim > 1:
                out = out.squeeze(a)
        return out

    # ---- reductions ----
    def _reduce(self, fn, axis, keepdims):
        if axis is None:
            axes = list(range(self.ndim))
        elif isinstance(axis, (tuple, list)):
            axes = list(axis)
        else:
            axes = [axis]
        _check_ints(axes, "reduction axis")
        arr = (ctypes.c_int * len(axes))(*axes)
        return self._wrap(fn(self._ctx._h, self.handle, arr, len(axes), bool(keepdims)))

    def sum(self, axis=None, keepdims=False):
        return self._reduce(lib.fc_sum, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return self._reduce(lib.fc_mean, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return self._reduce(lib.fc_max, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return self._reduce(lib.fc_min, axis, keepdims)

    def softmax(self, axis=-1):
        _check_ints((axis,), "softmax")
        return self._wrap(lib.fc_softmax(self._ctx._h, self.handle, axis))

    def log_softmax(self, axis=-1):
        _check_ints((axis,), "log_softmax")
        return self._wrap(lib.fc_log_softmax(self._ctx._h, self.handle, axis))

    def clamp(self, lo, hi):
        _check_reals((lo, hi), "clamp")
        return self._wrap(lib.fc_clamp(self._ctx._h, self.handle, float(lo), float(hi)))

    def leaky_relu(self, slope=0.01):
        _check_reals((slope,), "leaky_relu")
        return self._wrap(lib.fc_leaky_relu(self._ctx._h, self.handle, float(slope)))

    def gelu(self, tanh_approx=False):
        return self._wrap(lib.fc_gelu(self._ctx._h, self.handle, bool(tanh_approx)))

    # ---- comparisons (bool tensors; == and != stay identity, as for hashing) ----
    def __lt__(self, o):
        return self._binary(o, lib.fc_lt, lib.fc_lt_scalar)

    def __gt__(self, o):
        return self._binary(o, lib.fc_gt, lib.fc_gt_scalar)

    def __le__(self, o):
        return self._binary(o, lib.fc_le, None)

    def __ge__(self, o):
        return self._binary(o, lib.fc_ge, None)

    # ---- arithmetic ----
    def _binary(self, other, fn, fn_scalar):
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            if fn_scalar is None:  # no scalar form in C: a one-element tensor broadcasts
                other = full((1,), other, dtype=self.dtype, ctx=self._ctx)
                return self._wrap(fn(self._ctx._h, self.handle, other.handle))
            return self._wrap(fn_scalar(self._ctx._h, self.handle, float(other)))
        if not isinstance(other, Tensor):
            if np is not None and isinstance(other, np.ndarray):
                other = tensor(other, ctx=self._ctx)
            else:
                return NotImplemented
        return self._wrap(fn(self._ctx._h, self.handle, other.handle), other)

    def __add__(self, o):
        return self._binary(o, lib.fc_add, lib.fc_add_scalar)

    def __sub__(self, o):
        return self._binary(o, lib.fc_sub, lib.fc_sub_scalar)

    def __mul__(self, o):
        return self._binary(o, lib.fc_mul, lib.fc_mul_scalar)

    def __truediv__(self, o):
        return self._binary(o, lib.fc_div, lib.fc_div_scalar)

    def __pow__(self, o):
        return self._binary(o, lib.fc_pow, lib.fc_pow_scalar)

    def __radd__(self, o):
        return self._binary(o, lambda c, a, b: lib.fc_add(c, b, a), lib.fc_add_scalar)

    def __rmul__(self, o):
        return self._binary(o, lambda c, a, b: lib.fc_mul(c, b, a), lib.fc_mul_scalar)

    def __rsub__(self, o):
        return self._binary(o, lambda c, a, b: lib.fc_sub(c, b, a), lib.fc_rsub_scalar)

    def __rtruediv__(self, o):
        if isinstance(o, numbers.Real) and not isinstance(o, bool):
            return self.reciprocal() * float(o)
        return self._binary(o, lambda c, a, b: lib.fc_div(c, b, a), None)

    def __matmul__(self, o):
        if not isinstance(o, Tensor):
            if np is not None and isinstance(o, np.ndarray):
                o = tensor(o, ctx=self._ctx)
            else:
                return NotImplemented
        return self._wrap(lib.fc_matmul(self._ctx._h, self.handle, o.handle), o)

    def __rmatmul__(self, o):
        if np is not None and isinstance(o, np.ndarray):
            return tensor(o, ctx=self._ctx) @ self
        return NotImplemented

    def matmul(self, o):
        return self @ o

    def __neg__(self):
        return self.neg()

    __hash__ = object.__hash__


def _make_unary(cname):
    fn = getattr(lib, "fc_" + cname)

    def op(self):
        return self._wrap(fn(self._ctx._h, self.handle))
    op.__name__ = cname
    op.__doc__ = "fc_%s" % cname
    return op


UNARY = ("neg", "abs", "sign", "square", "sqrt", "rsqrt", "reciprocal", "exp", "log", "log1p",
         "expm1", "sin", "cos", "tanh", "sigmoid", "relu", "silu", "softplus")
for _n in UNARY:
    setattr(Tensor, _n, _make_unary(_n))


def _check_ints(values, what):
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError("%s: expected int, got %s" % (what, type(v).__name__))


def _check_reals(values, what):
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError("%s: expected a real number, got %s" % (what, type(v).__name__))


def _tensors(xs, what):
    xs = list(xs)
    if not xs or not all(isinstance(x, Tensor) for x in xs):
        raise TypeError("%s: expected a non-empty sequence of Tensors" % what)
    return xs, (ctypes.c_void_p * len(xs))(*[x.handle for x in xs])


def concat(xs, axis=0):
    """fc_concat along axis."""
    _check_ints((axis,), "concat")
    xs, arr = _tensors(xs, "concat")
    return _wrap(xs[0]._ctx, lib.fc_concat(xs[0]._ctx._h, arr, len(xs), axis), xs)


def stack(xs, axis=0):
    """fc_stack along a new axis."""
    _check_ints((axis,), "stack")
    xs, arr = _tensors(xs, "stack")
    return _wrap(xs[0]._ctx, lib.fc_stack(xs[0]._ctx._h, arr, len(xs), axis), xs)


def where(cond, a, b):
    """fc_where: a where cond (a bool tensor) is true, else b."""
    for t in (cond, a, b):
        if not isinstance(t, Tensor):
            raise TypeError("where: expected Tensors")
    return _wrap(a._ctx, lib.fc_where(a._ctx._h, cond.handle, a.handle, b.handle), (cond, a, b))


def maximum(a, b):
    if not isinstance(a, Tensor):
        raise TypeError("maximum: a must be a Tensor")
    return a._binary(b, lib.fc_maximum, lib.fc_maximum_scalar)


def minimum(a, b):
    if not isinstance(a, Tensor):
        raise TypeError("minimum: a must be a Tensor")
    return a._binary(b, lib.fc_minimum, lib.fc_minimum_scalar)


def _int64_array(shape, what):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    shape = tuple(shape)
    _check_ints(shape, what)
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


# Nonzero while a Python function runs as a C callback (gradcheck's fn),
# which C calls inside an fc_scope: tensors made then are fc_keep'ed, so the
# Python object stays their only owner and scope_end cannot free one that
# Python still holds (an intermediate the function stored somewhere).
callback_depth = 0
# Exceptions raised by Python callbacks (gradient hooks, checkpointed
# functions) while C ran them: C sees a failed status, and the wrapper that
# started the walk re-raises the first one once C has returned. A hook's
# replacement gradients are held here until then, since C borrows them
# past the callback's return.
pending_exceptions = []
hook_results = []


def run_walk(ctx, fn, *args):
    """Calls a C backward walk fn(*args) and raises what it raised: a
    callback's exception first, else the context's error."""
    del pending_exceptions[:]
    try:
        st = fn(*args)
        if pending_exceptions:
            lib.fc_ctx_clear_error(ctx._h)
            raise pending_exceptions[0]
        ctx.check(st)
    finally:
        del pending_exceptions[:]
        del hook_results[:]


def _wrap(ctx, h, sources=()):
    """A Tensor owning the new reference h, or the context's error raised."""
    if not h:
        ctx.check()
        raise errors.Error(-21, "a call returned NULL without recording an error")
    if callback_depth:
        lib.fc_keep(h)
    bases = ()
    for s in sources:
        if s._bases:
            bases = bases + tuple(b for b in s._bases if all(b is not x for x in bases))
    return Tensor(h, ctx, bases)


# ---- creation -----------------------------------------------------------------
def _ctx_of(ctx):
    if ctx is None:
        return default_context()
    if not isinstance(ctx, Context):
        raise TypeError("ctx must be a fucina.Context")
    return ctx


def tensor(data, dtype=None, requires_grad=False, ctx=None, copy=True):
    """A Tensor from a NumPy array, a nested list or a number.

    copy=True copies (fc_tensor_from_data). copy=False aliases the array's
    memory (fc_tensor_from_borrowed; the tensor keeps the array alive, and
    a read-only array gives read-only storage); it needs a C-contiguous
    array whose dtype is already the one asked for, else TypeError.
    A 0-d array or a number becomes shape [1] (fucina has no rank 0)."""
    ctx = _ctx_of(ctx)
    if isinstance(data, Tensor):
        raise TypeError("tensor: already a Tensor (use .clone() or .to())")
    if dtype is not None and (not isinstance(dtype, str) or dtype not in _NP_NAMES):
        raise TypeError("tensor: dtype must be one of %s, not %r" % (sorted(_NP_NAMES), dtype))
    if np is None:
        raise ImportError("fucina.tensor needs NumPy (use fucina.full / zeros without it)")
    if isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, (list, tuple, numbers.Number)):
        arr = np.asarray(data)
        if dtype is None and arr.dtype == np.float64:
            dtype = "f32"  # Python floats give f32 by default, as torch does
        if dtype is None and arr.dtype.kind in "iu":
            dtype = "i64"
    else:
        raise TypeError("tensor: expected ndarray, list, tuple or number, not %s"
                        % type(data).__name__)
    names = {v: k for k, v in _NP_NAMES.items()}
    if dtype is None:
        if arr.dtype.name not in names:
            raise TypeError("tensor: NumPy dtype %s has no fucina dtype" % arr.dtype)
        dtype = names[arr.dtype.name]
    shape = arr.shape if arr.ndim > 0 else (1,)
    shp = _int64_array(shape, "tensor shape")
    code = dtype_code(dtype)
    if not copy:
        if arr.dtype.name != _NP_NAMES[dtype] or not arr.flags.c_contiguous:
            raise TypeError("tensor(copy=False): needs a C-contiguous %s array, got %s%s"
                            % (_NP_NAMES[dtype], arr.dtype,
                               "" if arr.flags.c_contiguous else " (not C-contiguous)"))
        h = lib.fc_tensor_from_borrowed(ctx._h, code, shp, len(shape),
                                        arr.ctypes.data if arr.size else None,
                                        not arr.flags.writeable)
        t = _wrap(ctx, h)
        t._bases = (arr,)
    else:
        src = np.ascontiguousarray(arr, dtype=_NP_NAMES[dtype])
        t = _wrap(ctx, lib.fc_tensor_from_data(ctx._h, code, shp, len(shape),
                                               src.ctypes.data if src.size else None))
    if requires_grad:
        t.requires_grad = True
    return t


def from_numpy(arr, ctx=None):
    """Zero-copy Tensor over arr (see tensor(copy=False))."""
    if np is None or not isinstance(arr, np.ndarray):
        raise TypeError("from_numpy: expected a NumPy array")
    names = {v: k for k, v in _NP_NAMES.items()}
    if arr.dtype.name not in names:
        raise TypeError("from_numpy: NumPy dtype %s has no fucina dtype" % arr.dtype)
    return tensor(arr, dtype=names[arr.dtype.name], ctx=ctx, copy=False)


def _shaped(fn, shape, dtype, ctx, requires_grad, *extra):
    ctx = _ctx_of(ctx)
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    shp = _int64_array(shape, fn.__name__)
    t = _wrap(ctx, fn(ctx._h, dtype_code(dtype), shp, len(tuple(shape)), *extra))
    if requires_grad:
        t.requires_grad = True
    return t


def zeros(shape, dtype="f32", ctx=None, requires_grad=False):
    return _shaped(lib.fc_zeros, shape, dtype, ctx, requires_grad)


def ones(shape, dtype="f32", ctx=None, requires_grad=False):
    return _shaped(lib.fc_ones, shape, dtype, ctx, requires_grad)


def full(shape, value, dtype="f32", ctx=None, requires_grad=False):
    if not isinstance(value, numbers.Real):
        raise TypeError("full: value must be a real number")
    return _shaped(lib.fc_full, shape, dtype, ctx, requires_grad, float(value))


def rand(shape, dtype="f32", ctx=None, requires_grad=False):
    return _shaped(lib.fc_rand, shape, dtype, ctx, requires_grad)


def randn(shape, dtype="f32", ctx=None, requires_grad=False):
    return _shaped(lib.fc_randn, shape, dtype, ctx, requires_grad)


def arange(start, stop, step=1, dtype="f32", ctx=None):
    for v in (start, stop, step):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError("arange: start, stop and step must be real numbers")
    ctx = _ctx_of(ctx)
    return _wrap(ctx, lib.fc_arange(ctx._h, dtype_code(dtype), float(start), float(stop),
                                    float(step)))


class no_grad:
    """with fucina.no_grad(ctx=None): ops record nothing (fc_no_grad_begin/end)."""

    def __init__(self, ctx=None):
        self._ctx = _ctx_of(ctx)

    def __enter__(self):
        lib.fc_no_grad_begin(self._ctx._h)
        return self

    def __exit__(self, *exc):
        lib.fc_no_grad_end(self._ctx._h)
        return False


def is_grad_enabled(ctx=None):
    return bool(lib.fc_grad_enabled(_ctx_of(ctx)._h))
