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


# ---- the structs the wrappers pass by pointer (generated from the headers) ----
STRUCT = {}


def _resolve(name):
    if name is None:
        return None
    if name.startswith("POINTER("):
        return ctypes.POINTER(_resolve(name[len("POINTER("):-1]))
    if name.startswith("struct:"):
        return STRUCT[name[len("struct:"):]]
    if "*" in name:
        base, _, n = name.rpartition("*")
        return _resolve(base) * int(n)
    return getattr(ctypes, name)


for _sname, _fields in _bindings.STRUCTS:
    STRUCT[_sname] = type(_sname, (ctypes.Structure,),
                          {"_fields_": [(f, _resolve(t)) for f, t in _fields]})


def _declare(dll, rows):
    for name, res, args, _header in rows:
        fn = getattr(dll, name)
        fn.restype = _resolve(res)
        fn.argtypes = [_resolve(a) for a in args]


lib = _load()
_declare(lib, _bindings.SIGNATURES)

# Short names of the structs the core wrappers use.
CtxOpts = STRUCT["fc_ctx_opts"]
CtxStats = STRUCT["fc_ctx_stats"]
AutogradGradOpts = STRUCT["fc_autograd_grad_opts"]
GradcheckOpts = STRUCT["fc_gradcheck_opts"]
GradcheckReport = STRUCT["fc_gradcheck_report"]
OptimOpts = STRUCT["fc_optim_opts"]
IoTensor = STRUCT["fc_io_tensor"]

_models = []


def models_lib():
    """libfucina_models (the Llama model, LoRA and the tokenizers), loaded on
    first use: FUCINA_MODELS_LIB, else the file beside libfucina, else the
    system's search path. ImportError when it cannot be found."""
    if _models:
        return _models[0]
    cands = []
    env = os.environ.get("FUCINA_MODELS_LIB")
    if env:
        cands.append(env)
    else:
        if os.path.sep in (lib._name or ""):
            cands.append(os.path.join(os.path.dirname(lib._name), "libfucina_models.so"))
        found = ctypes.util.find_library("fucina_models")
        if found:
            cands.append(found)
    tried = []
    for path in cands:
        try:
            dll = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        _declare(dll, _bindings.MODEL_SIGNATURES)
        _models.append(dll)
        return dll
    raise ImportError("fucina: libfucina_models.so not found (build the target "
                      "fucina_models_shared, or set FUCINA_MODELS_LIB). Tried: "
                      + ("; ".join(tried) or "nothing"))


# fc_gradcheck_fn / fc_grad_checkpoint_fn
GRADCHECK_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.c_int, ctypes.c_void_p)
