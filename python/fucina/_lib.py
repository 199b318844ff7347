# SPDX-License-Identifier: MIT
"""Finds and loads libfucina.so and declares every bound signature.

Search order: the FUCINA_LIB environment variable (a path to the shared
library), the build tree (build/libfucina.so next to python/, so a checkout
works without installing), then the system's search path
(ctypes.util.find_library, for an installed prefix).
"""
import ctypes
import ctypes.util
import os

from . import _bindings

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.normpath(os.path.join(_HERE, "..", ".."))


def _candidates():
    env = os.environ.get("FUCINA_LIB")
    if env:
        yield env
        return  # an explicit choice is never silently replaced by another library
    build = os.environ.get("FUCINA_BUILD_DIR")
    if build:
        yield os.path.join(build, "libfucina.so")
    yield os.path.join(_REPO, "build", "libfucina.so")
    found = ctypes.util.find_library("fucina")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("fucina: libfucina.so not found; set FUCINA_LIB to its path or build it "
                      "(cmake --build build --target fucina). Tried: " + "; ".join(tried))


def _resolve(name):
    if name is None:
        return None
    if name.startswith("POINTER("):
        return ctypes.POINTER(_resolve(name[len("POINTER("):-1]))
    return getattr(ctypes, name)


lib = _load()
for _name, _res, _args, _header in _bindings.SIGNATURES:
    _fn = getattr(lib, _name)
    _fn.restype = _resolve(_res)
    _fn.argtypes = [_resolve(a) for a in _args]


# ---- the option and report structs the wrappers pass by pointer ------------
# Mirrors of include/fucina/tensor.h and autograd.h (layout by ctypes' C rules).
class CtxOpts(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("backend", ctypes.c_int),
                ("disable_pool", ctypes.c_bool), ("seed", ctypes.c_uint64),
                ("allocator", ctypes.c_void_p), ("check_finite", ctypes.c_bool)]


class CtxStats(ctypes.Structure):
    _fields_ = [("bytes_live", ctypes.c_int64), ("bytes_peak", ctypes.c_int64),
                ("pool_bytes", ctypes.c_int64), ("pool_hits", ctypes.c_uint64),
                ("pool_misses", ctypes.c_uint64), ("alloc_calls", ctypes.c_uint64),
                ("free_calls", ctypes.c_uint64), ("tensors_live", ctypes.c_int64)]


class AutogradGradOpts(ctypes.Structure):
    _fields_ = [("retain_graph", ctypes.c_bool), ("allow_unused", ctypes.c_bool),
                ("create_graph", ctypes.c_bool)]


class GradcheckOpts(ctypes.Structure):
    _fields_ = [("eps", ctypes.c_double), ("atol", ctypes.c_double), ("rtol", ctypes.c_double),
                ("check_all_f64", ctypes.c_bool), ("seed", ctypes.c_uint64),
                ("constant_grad_output", ctypes.c_bool)]


class GradcheckReport(ctypes.Structure):
    _fields_ = [("passed", ctypes.c_bool), ("worst_input", ctypes.c_int),
                ("worst_index", ctypes.c_int64), ("analytic", ctypes.c_double),
                ("numeric", ctypes.c_double), ("worst_excess", ctypes.c_double),
                ("checked", ctypes.c_int64)]


# fc_gradcheck_fn / fc_grad_checkpoint_fn
GRADCHECK_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_int, ctypes.c_void_p)
