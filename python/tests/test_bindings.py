# SPDX-License-Identifier: MIT
import ctypes
import os
import subprocess
import sys

import fucina._bindings as b
from fucina._lib import lib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python", "tools"))
import gen_bindings  # noqa: E402


def test_every_exported_function_is_bound_or_listed_with_a_reason():
    decls, _, _ = gen_bindings.parse_headers(os.path.join(REPO, "include", "fucina"))
    mdecls, _, _ = gen_bindings.parse_headers(os.path.join(REPO, "models", "include", "fucina"))
    declared = {d[0] for d in decls + mdecls}
    declared |= {name for name, _ in gen_bindings.parse_structs(
        [os.path.join(REPO, "include", "fucina"), os.path.join(REPO, "models", "include", "fucina")])}
    bound = {s[0] for s in b.SIGNATURES + b.MODEL_SIGNATURES} | {name for name, _ in b.STRUCTS}
    assert len(declared) > 300
    assert bound.isdisjoint(b.NOT_BOUND)
    assert declared == bound | set(b.NOT_BOUND)
    for name, why in b.NOT_BOUND.items():
        assert len(why) > 10, name


def test_generated_table_is_up_to_date():
    script = os.path.join(REPO, "python", "tools", "gen_bindings.py")
    r = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_bound_symbol_resolves_with_its_signature():
    for name, res, args, _ in b.SIGNATURES:
        fn = getattr(lib, name)
        assert len(fn.argtypes) == len(args), name


def test_signatures_of_known_functions():
    rows = {s[0]: s for s in b.SIGNATURES}
    assert rows["fc_add"][1:3] == ("c_void_p", ["c_void_p", "c_void_p", "c_void_p"])
    assert rows["fc_tensor_shape"][1] == "POINTER(c_int64)"
    assert rows["fc_sum"][2] == ["c_void_p", "c_void_p", "POINTER(c_int)", "c_int", "c_bool"]
    assert rows["fc_status_name"][1:3] == ("c_char_p", ["c_int"])
    assert lib.fc_status_name(-3) == b"FC_ERR_SHAPE_MISMATCH"
    assert lib.fc_tensor_shape.restype is ctypes.POINTER(ctypes.c_int64)


def test_generator_on_a_synthetic_header(tmp_path):
    (tmp_path / "x.h").write_text(
        "#define FC_API __attribute__((visibility(\"default\")))\n"
        "typedef enum fc_mode { FC_MODE_A, FC_MODE_B } fc_mode;\n"
        "typedef int (*fc_cb)(void *user);\n"
        "#define FC_N 3\n"
        "typedef struct fc_pair { int a, b; } fc_pair;\n"
        "typedef struct fc_box { fc_pair p; const char *name; int64_t d[FC_N]; char s[4];\n"
        "                        void *(*fn)(void *u, size_t n); fc_mode m; } fc_box;\n"
        "typedef struct fc_odd { union { int i; float f; } u; } fc_odd;\n"
        "FC_API fc_odd fc_odd_default(void);\n"
        "/* FC_API int fc_in_a_comment(void); */\n"
        "FC_API fc_tensor *fc_op(fc_ctx *ctx, const int64_t *shape,\n"
        "                        int rank, fc_mode mode); // trailing\n"
        "FC_API void fc_take(fc_tensor *const *xs, const int64_t size[2], fc_cb fn);\n"
        "FC_API fc_pair fc_pair_default(void);\n"
        "FC_API fc_status fc_fail(fc_ctx *ctx, const char *fmt, ...)\n"
        "#if defined(__GNUC__)\n    __attribute__((format(printf, 2, 3)))\n#endif\n    ;\n"
        "FC_API const char *fc_name(fc_mode m);\n")
    text = gen_bindings.generate(str(tmp_path))
    ns = {}
    exec(text, ns)
    rows = {s[0]: s[1:3] for s in ns["SIGNATURES"]}
    assert rows == {
        "fc_op": ("c_void_p", ["c_void_p", "POINTER(c_int64)", "c_int", "c_int"]),
        "fc_take": (None, ["POINTER(c_void_p)", "POINTER(c_int64)", "c_void_p"]),
        "fc_name": ("c_char_p", ["c_int"]),
        "fc_pair_default": ("struct:fc_pair", []),
    }
    structs = dict(ns["STRUCTS"])
    assert structs["fc_pair"] == [("a", "c_int"), ("b", "c_int")]
    assert structs["fc_box"] == [("p", "struct:fc_pair"), ("name", "c_char_p"), ("d", "c_int64*3"),
                                 ("s", "c_char*4"), ("fn", "c_void_p"), ("m", "c_int")]
    assert set(ns["NOT_BOUND"]) == {"fc_odd", "fc_odd_default", "fc_fail"}
    assert "union" in ns["NOT_BOUND"]["fc_odd"]
    assert "by value" in ns["NOT_BOUND"]["fc_odd_default"]
    assert "variadic" in ns["NOT_BOUND"]["fc_fail"]
