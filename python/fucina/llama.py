# SPDX-License-Identifier: MIT
"""Llama-architecture models and their tokenizers (libfucina_models).

    m = fucina.llama.Model.load("model.gguf")
    tok = m.tokenizer()                      # the file's tokenizer.* metadata
    ids = tok.encode("Once upon a time", add_special=True)
    out = m.generate(ids, 20)                # greedy; temperature/top_k/top_p/seed
    print(tok.decode(out))
    logits = m.forward([ids])                # Tensor [1, T, vocab], f32

The shapes, dtypes and errors are the C library's (models/include/fucina/
llama.h and tokenizer.h); its library, libfucina_models.so, is loaded on
first use (fucina._lib.models_lib). A model belongs to its Context; close()
(or a `with` block, or garbage collection) frees it; tensors taken from it
stay valid.
"""
import ctypes
import numbers

from . import errors
from ._core import Tensor, _ctx_of, _wrap, tensor
from ._lib import STRUCT, lib, models_lib

FC_TOKENIZE_ADD_SPECIAL = 1 << 0
FC_TOKENIZE_PARSE_SPECIAL = 1 << 1
FC_DECODE_SPECIAL = 1 << 0
FC_ERR_DATA_LENGTH = -19


def _ids(ids, what):
    if isinstance(ids, Tensor):
        raise TypeError("%s: token ids must be a list of ints" % what)
    out = list(ids)
    for i in out:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TypeError("%s: token ids must be ints" % what)
        if not -2 ** 31 <= i < 2 ** 31:
            raise ValueError("%s: token id %d does not fit in int32" % (what, i))
    return out


class Tokenizer:
    """A model file's tokenizer (SPM or byte-level BPE)."""

    def __init__(self, handle, ctx, owner):
        self._h, self._ctx, self._owner = handle, ctx, owner

    @classmethod
    def from_gguf(cls, path, ctx=None):
        """The tokenizer of a GGUF file's tokenizer.* metadata (copied: the
        file is closed before this returns)."""
        from .io import _open
        ctx = _ctx_of(ctx)
        ml = models_lib()
        f = _open(lib.fc_gguf_open, path, "Tokenizer.from_gguf")
        try:
            h = ctypes.c_void_p()
            ctx.check(ml.fc_tokenizer_from_gguf(ctx._h, f, None, ctypes.byref(h)))
        finally:
            lib.fc_gguf_close(f)
        return cls(h.value, ctx, None)

    @property
    def handle(self):
        if not self._h:
            raise errors.StateError(-21, "tokenizer used after close()")
        return self._h

    @property
    def vocab_size(self):
        return models_lib().fc_tokenizer_vocab_size(self.handle)

    @property
    def bos(self):
        return models_lib().fc_tokenizer_bos(self.handle)

    @property
    def eos(self):
        return models_lib().fc_tokenizer_eos(self.handle)

    def encode(self, text, add_special=False, parse_special=False):
        """Token ids of a str (UTF-8) or bytes."""
        if isinstance(text, str):
            data = text.encode("utf-8")
        elif isinstance(text, bytes):
            data = text
        else:
            raise TypeError("encode: text must be str or bytes")
        flags = (FC_TOKENIZE_ADD_SPECIAL if add_special else 0) | \
                (FC_TOKENIZE_PARSE_SPECIAL if parse_special else 0)
        ml = models_lib()
        n = ctypes.c_int64()
        cap = len(data) + 8  # a first guess; the call says how many it needs
        while True:
            buf = (ctypes.c_int32 * cap)()
            st = ml.fc_tokenizer_encode(self._ctx._h, self.handle, data, len(data), flags, buf,
                                        cap, ctypes.byref(n))
            if st == FC_ERR_DATA_LENGTH and n.value > cap:
                lib.fc_ctx_clear_error(self._ctx._h)
                cap = n.value
                continue
            self._ctx.check(st)
            return list(buf[:n.value])

    def decode(self, ids, special=False):
        """The text of ids (bytes that are not valid UTF-8 are replaced)."""
        ids = _ids(ids, "decode")
        ml = models_lib()
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        need = ctypes.c_size_t()
        flags = FC_DECODE_SPECIAL if special else 0
        # First call sizes the text (FC_ERR_DATA_LENGTH with the length needed).
        cap = 64 * max(len(ids), 1)
        while True:
            buf = ctypes.create_string_buffer(cap)
            st = ml.fc_tokenizer_decode(self._ctx._h, self.handle, arr, len(ids), flags, buf,
                                        cap, ctypes.byref(need))
            if st == 0:
                return buf.raw[:need.value].decode("utf-8", "replace")
            if st == FC_ERR_DATA_LENGTH and need.value + 1 > cap:
                lib.fc_ctx_clear_error(self._ctx._h)
                cap = need.value + 1
                continue
            self._ctx.check(st)

    def close(self):
        h, self._h = self._h, None
        if h and self._ctx._h:
            models_lib().fc_tokenizer_free(h)

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            self.close()


class Model:
    """An fc_llama. Make it with Model.load(path)."""

    def __init__(self, handle, ctx):
        self._h, self._ctx = handle, ctx

    @classmethod
    def load(cls, path, ctx=None, trainable=False, no_mmap=False):
        """Reads a GGUF file (mapped; trainable=True copies f32 weights into
        parameters that require grad)."""
        ctx = _ctx_of(ctx)
        if not isinstance(path, str):
            raise TypeError("Model.load: path must be a str")
        ml = models_lib()
        opts = STRUCT["fc_llama_load_opts"](io_flags=1 if no_mmap else 0,
                                            trainable=bool(trainable))
        h = ctypes.c_void_p()
        ctx.check(ml.fc_llama_load(ctx._h, path.encode(), ctypes.byref(opts), ctypes.byref(h)))
        return cls(h.value, ctx)

    @classmethod
    def load_hf(cls, directory, ctx=None, trainable=False, no_mmap=False):
        """Reads a Hugging Face checkpoint directory (config.json and
        model.safetensors or its shards; fc_llama_load_hf). The tokenizer
        (tokenizer.json) is not read here."""
        ctx = _ctx_of(ctx)
        if not isinstance(directory, str):
            raise TypeError("Model.load_hf: directory must be a str")
        ml = models_lib()
        opts = STRUCT["fc_llama_load_opts"](io_flags=1 if no_mmap else 0,
                                            trainable=bool(trainable))
        h = ctypes.c_void_p()
        ctx.check(ml.fc_llama_load_hf(ctx._h, directory.encode(), ctypes.byref(opts),
                                      ctypes.byref(h)))
        return cls(h.value, ctx)

    @property
    def handle(self):
        if not self._h:
            raise errors.StateError(-21, "model used after close()")
        return self._h

    @property
    def config(self):
        """The model's sizes as a dict (fc_llama_config's fields)."""
        cfg = STRUCT["fc_llama_config"]
        p = ctypes.cast(models_lib().fc_llama_get_config(self.handle), ctypes.POINTER(cfg))
        return {f: getattr(p.contents, f) for f, _ in cfg._fields_}

    def tensor_names(self):
        ml = models_lib()
        return [ml.fc_llama_tensor_name(self.handle, i).decode()
                for i in range(ml.fc_llama_tensor_count(self.handle))]

    def tensor(self, name):
        """A tensor of the model by its GGUF name (a new reference)."""
        t = models_lib().fc_llama_tensor(self.handle, name.encode())
        if not t:
            raise KeyError(name)
        return Tensor(lib.fc_retain(t), self._ctx)

    def parameters(self):
        """The tensors that require grad (trainable=True at load)."""
        ml = models_lib()
        n = ml.fc_llama_params(self.handle, None, 0)
        arr = (ctypes.c_void_p * max(n, 1))()
        ml.fc_llama_params(self.handle, arr, n)
        return [Tensor(lib.fc_retain(arr[i]), self._ctx) for i in range(n)]

    def forward(self, ids):
        """Logits [B, T, vocab] f32 of ids ([B, T] or [T] ints, or an
        integer Tensor); recorded when a parameter requires grad."""
        t = ids if isinstance(ids, Tensor) else tensor(ids, dtype="i32", ctx=self._ctx)
        return _wrap(self._ctx, models_lib().fc_llama_forward(self._ctx._h, self.handle,
                                                              t.handle), (t,))

    def generate(self, prompt, n_new, temperature=0.0, top_k=0, top_p=0.0, seed=0,
                 stop_token=-1):
        """n_new tokens after prompt (a list of ids) with a fresh cache;
        temperature 0 is greedy. Stops early at stop_token (>= 0)."""
        prompt = _ids(prompt, "generate")
        if not prompt:
            raise ValueError("generate: empty prompt")
        if isinstance(n_new, bool) or not isinstance(n_new, numbers.Integral) or n_new < 0:
            raise TypeError("generate: n_new must be an int >= 0")
        opts = STRUCT["fc_llama_sample_opts"](temperature=float(temperature), top_k=int(top_k),
                                              top_p=float(top_p), seed=int(seed))
        p = (ctypes.c_int32 * len(prompt))(*prompt)
        out = (ctypes.c_int32 * max(n_new, 1))()
        n = ctypes.c_int64()
        self._ctx.check(models_lib().fc_llama_generate(
            self._ctx._h, self.handle, p, len(prompt), n_new, int(stop_token),
            ctypes.byref(opts), out, ctypes.byref(n)))
        return list(out[:n.value])

    def tokenizer(self):
        """The tokenizer stored in the model's GGUF file."""
        ml = models_lib()
        h = ctypes.c_void_p()
        self._ctx.check(ml.fc_tokenizer_from_gguf(self._ctx._h, ml.fc_llama_gguf(self.handle),
                                                  None, ctypes.byref(h)))
        return Tokenizer(h.value, self._ctx, self)

    def close(self):
        h, self._h = self._h, None
        if h and self._ctx._h:
            models_lib().fc_llama_free(h)

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
