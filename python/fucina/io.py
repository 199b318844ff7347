# SPDX-License-Identifier: MIT
"""Tensor files: safetensors (read and write) and GGUF (read).

    fucina.io.save_safetensors("w.safetensors", {"w": w, "b": b})
    ts = fucina.io.load_safetensors("w.safetensors")       # {"w": Tensor, ...}
    meta, ts = fucina.io.load_gguf("model.gguf")            # (metadata dict, tensors)

Loading maps the file and returns read-only tensors that alias its bytes
(the C library keeps the mapping alive while any of them lives); copy=True
gives owned, writable copies instead. Block-quantized GGUF tensors load in
their block dtype (q4_k, q8_0, ...): fucina's products read them as they are.
Errors raise fucina.Error subclasses carrying the reader's message (a
malformed file is FileFormatError, a missing one an I/O error).
"""
import ctypes
import os

from . import errors
from ._core import Tensor, _ctx_of, _wrap
from ._lib import STRUCT, lib

FC_IO_COPY = 1 << 1
_ERRCAP = 512


def _path(path, what):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError("%s: path must be str, bytes or os.PathLike" % what)
    p = os.fsencode(path)
    if b"\0" in p:
        raise ValueError("%s: path holds a NUL byte" % what)
    return p


def _open(fn, path, what):
    buf = ctypes.create_string_buffer(_ERRCAP)
    opts = STRUCT["fc_io_opts"](errbuf=ctypes.cast(buf, ctypes.c_char_p), errcap=_ERRCAP)
    h = ctypes.c_void_p()
    st = fn(_path(path, what), ctypes.byref(opts), ctypes.byref(h))
    if st != 0:
        raise errors.error_for(st, buf.value.decode("utf-8", "replace")
                               or lib.fc_strerror(st).decode())
    return h


def _names(count, info, handle):
    t = STRUCT["fc_io_tensor"]()
    out = []
    for i in range(count):
        st = info(handle, i, ctypes.byref(t))
        if st != 0:
            raise errors.error_for(st, "tensor %d of the file" % i)
        out.append(t.name.decode("utf-8"))
    return out


def load_safetensors(path, ctx=None, copy=False):
    """{name: Tensor} of a safetensors file, in file order."""
    ctx = _ctx_of(ctx)
    h = _open(lib.fc_safetensors_open, path, "load_safetensors")
    try:
        out = {}
        for name in _names(lib.fc_safetensors_tensor_count(h), lib.fc_safetensors_tensor_info, h):
            out[name] = _wrap(ctx, lib.fc_safetensors_load(ctx._h, h, name.encode(),
                                                           FC_IO_COPY if copy else 0))
        return out
    finally:
        lib.fc_safetensors_close(h)


def safetensors_metadata(path):
    """The file's __metadata__ as a {str: str} dict."""
    h = _open(lib.fc_safetensors_open, path, "safetensors_metadata")
    try:
        out = {}
        k, v = ctypes.c_void_p(), ctypes.c_void_p()
        for i in range(lib.fc_safetensors_meta_count(h)):
            st = lib.fc_safetensors_meta_at(h, i, ctypes.byref(k), ctypes.byref(v))
            if st != 0:
                raise errors.error_for(st, "metadata entry %d" % i)
            out[ctypes.string_at(k.value).decode("utf-8")] = \
                ctypes.string_at(v.value).decode("utf-8")
        return out
    finally:
        lib.fc_safetensors_close(h)


def save_safetensors(path, tensors, metadata=None):
    """Writes {name: Tensor} (atomically: a failed write leaves no file, nor
    changes an existing one) with optional {str: str} metadata."""
    if not isinstance(tensors, dict) or not tensors:
        raise TypeError("save_safetensors: tensors must be a non-empty {name: Tensor} dict")
    names, ts = [], []
    for k, t in tensors.items():
        if not isinstance(k, str) or not isinstance(t, Tensor):
            raise TypeError("save_safetensors: entries must be str -> Tensor")
        names.append(k.encode())
        ts.append(t)
    metadata = metadata or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("save_safetensors: metadata must be {str: str}")
    ctx = ts[0].ctx
    n = len(ts)
    carr = (ctypes.c_char_p * n)(*names)
    tarr = (ctypes.c_void_p * n)(*[t.handle for t in ts])
    mk = (ctypes.c_char_p * max(len(metadata), 1))(*[k.encode() for k in metadata])
    mv = (ctypes.c_char_p * max(len(metadata), 1))(*[v.encode() for v in metadata.values()])
    pp = ctypes.POINTER(ctypes.c_void_p)
    ctx.check(lib.fc_safetensors_save(ctx._h, _path(path, "save_safetensors"),
                                      ctypes.cast(carr, pp), tarr, n, ctypes.cast(mk, pp),
                                      ctypes.cast(mv, pp), len(metadata)))


# fc_gguf_type numbering
_GGUF_INTS = {0, 1, 2, 3, 4, 5, 10, 11}
_GGUF_FLOATS = {6, 12}
_GGUF_BOOL, _GGUF_STRING, _GGUF_ARRAY = 7, 8, 9


def _gguf_value(v):
    t = lib.fc_gguf_value_type(v)
    if t in _GGUF_INTS:
        if t == 10:
            out = ctypes.c_uint64()
            st = lib.fc_gguf_value_uint(v, ctypes.byref(out))
        else:
            out = ctypes.c_int64()
            st = lib.fc_gguf_value_int(v, ctypes.byref(out))
    elif t in _GGUF_FLOATS:
        out = ctypes.c_double()
        st = lib.fc_gguf_value_float(v, ctypes.byref(out))
    elif t == _GGUF_BOOL:
        out = ctypes.c_bool()
        st = lib.fc_gguf_value_bool(v, ctypes.byref(out))
    elif t == _GGUF_STRING:
        s, n = ctypes.c_void_p(), ctypes.c_size_t()
        st = lib.fc_gguf_value_string(v, ctypes.byref(s), ctypes.byref(n))
        if st != 0:
            raise errors.error_for(st, "GGUF string value")
        return ctypes.string_at(s.value, n.value).decode("utf-8", "replace") if n.value else ""
    elif t == _GGUF_ARRAY:
        et, cnt = ctypes.c_int(), ctypes.c_uint64()
        st = lib.fc_gguf_array_info(v, ctypes.byref(et), ctypes.byref(cnt))
        if st != 0:
            raise errors.error_for(st, "GGUF array value")
        if et.value in (_GGUF_STRING, _GGUF_ARRAY):
            return [_gguf_value(lib.fc_gguf_array_item(v, i)) for i in range(cnt.value)]
        if et.value in _GGUF_FLOATS:
            getter, cls = lib.fc_gguf_array_float, ctypes.c_double
        elif et.value == 10:
            getter, cls = lib.fc_gguf_array_uint, ctypes.c_uint64
        else:
            getter, cls = lib.fc_gguf_array_int, ctypes.c_int64
        out, vals = cls(), []
        for i in range(cnt.value):
            st = getter(v, i, ctypes.byref(out))
            if st != 0:
                raise errors.error_for(st, "GGUF array element %d" % i)
            vals.append(bool(out.value) if et.value == _GGUF_BOOL else out.value)
        return vals
    else:
        raise errors.FileFormatError(-12, "GGUF value of unknown type %d" % t)
    if st != 0:
        raise errors.error_for(st, "GGUF value of type %d" % t)
    return out.value


def load_gguf(path, ctx=None, copy=False, tensors=True):
    """(metadata, {name: Tensor}) of a GGUF file; tensors=False reads the
    metadata only (and gives an empty dict)."""
    ctx = _ctx_of(ctx)
    h = _open(lib.fc_gguf_open, path, "load_gguf")
    try:
        meta = {}
        for i in range(lib.fc_gguf_kv_count(h)):
            meta[lib.fc_gguf_kv_key(h, i).decode("utf-8")] = _gguf_value(lib.fc_gguf_kv_value(h, i))
        out = {}
        if tensors:
            for name in _names(lib.fc_gguf_tensor_count(h), lib.fc_gguf_tensor_info, h):
                out[name] = _wrap(ctx, lib.fc_gguf_load(ctx._h, h, name.encode(),
                                                        FC_IO_COPY if copy else 0))
        return meta, out
    finally:
        lib.fc_gguf_close(h)


__all__ = ["load_safetensors", "save_safetensors", "safetensors_metadata", "load_gguf"]
