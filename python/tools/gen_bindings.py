#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generates python/fucina/_bindings.py from the public headers.

Every FC_API declaration of include/fucina/*.h becomes one row of SIGNATURES
(name, restype, argtypes as ctypes names), or, when ctypes cannot call it
as declared, one row of NOT_BOUND with the reason. Handles, struct
pointers and callbacks are all void pointers here: the wrappers in
python/fucina pass ctypes objects (byref, CFUNCTYPE instances) through them.
The declarations of models/include/fucina/*.h (libfucina_models) go to
MODEL_SIGNATURES the same way. Every `typedef struct NAME { ... } NAME;` of
both becomes a row of STRUCTS (its fields as ctypes names, in order), so
the option structs the wrappers pass by pointer follow the headers' layout
instead of a copy of it that could drift.

  python3 python/tools/gen_bindings.py            rewrite _bindings.py
  python3 python/tools/gen_bindings.py --check    exit 1 when it is stale
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(REPO, "python", "fucina", "_bindings.py")

SCALARS = {
    "void": None, "bool": "c_bool", "int": "c_int", "unsigned": "c_uint",
    "float": "c_float", "double": "c_double", "size_t": "c_size_t",
    "int8_t": "c_int8", "uint8_t": "c_uint8", "int16_t": "c_int16", "uint16_t": "c_uint16",
    "int32_t": "c_int32", "uint32_t": "c_uint32", "int64_t": "c_int64", "uint64_t": "c_uint64",
}


def header_defines(path):
    """Integer #defines of a header (array sizes of struct fields)."""
    with open(path, encoding="utf-8") as f:
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r"^\s*#\s*define\s+(\w+)\s+\(?(\d+)\)?\s*(?:/\*.*)?$", f.read(),
                            flags=re.M)}


def header_text(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)  # join continued preprocessor lines
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)  # FC_API's own #define
    return re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)


def parse_headers(include_dir):
    """Returns (decls, enums, fnptrs): decls is a list of (name, return type,
    [parameter types] or None for varargs, header) in header order."""
    decls, enums, fnptrs = [], set(), set()
    for fname in sorted(os.listdir(include_dir)):
        if not fname.endswith(".h"):
            continue
        text = header_text(os.path.join(include_dir, fname))
        for m in re.finditer(r"typedef\s+enum\s+\w*\s*\{[^}]*\}\s*(\w+)\s*;", text):
            enums.add(m.group(1))
        for m in re.finditer(r"typedef\s+[^;]*?\(\s*\*\s*(\w+)\s*\)\s*\(", text):
            fnptrs.add(m.group(1))
        for m in re.finditer(r"\bFC_API\s+([^;{]*?\))\s*(?=;|__attribute__|#)", text, flags=re.S):
            decl = " ".join(m.group(1).split())
            head, _, params = decl.partition("(")
            params = params[:-1].strip()
            hm = re.match(r"(.*?)(\w+)\s*$", head)
            rtype, name = hm.group(1).strip(), hm.group(2)
            if params == "void" or params == "":
                plist = []
            elif "..." in params:
                plist = None
            else:
                plist = []
                for p in params.split(","):
                    p = p.strip()
                    am = re.match(r"(.*?)\b\w+\s*\[\s*\w*\s*\]$", p)
                    if am:  # an array parameter ("int64_t size[2]") is a pointer
                        p = am.group(1) + " *"
                    elif re.search(r"[\w*]\s*\b\w+$", p) and len(p.replace("*", " ").split()) > 1:
                        p = re.sub(r"\s*\b\w+\s*$", "", p)  # drop the parameter name
                    plist.append(p)
            decls.append((name, rtype, plist, fname))
    return decls, enums, fnptrs


def parse_structs(include_dirs):
    """[(name, body)] of every typedef'd struct with a body, header order."""
    out = []
    for d in include_dirs:
        for fname in sorted(os.listdir(d)):
            if fname.endswith(".h"):
                text = header_text(os.path.join(d, fname))
                for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{", text):
                    depth, i = 1, m.end()
                    while depth and i < len(text):  # the body's closing brace
                        depth += {"{": 1, "}": -1}.get(text[i], 0)
                        i += 1
                    nm = re.match(r"\s*(\w+)\s*;", text[i:])
                    if nm:
                        out.append((nm.group(1), text[m.end():i - 1]))
    return out


def struct_fields(body, enums, fnptrs, defines, known):
    """[(field, ctypes name)] of a struct body: a scalar, pointer or enum
    is its ctypes name, an array "ctype*N", a nested struct "struct:NAME",
    a function pointer c_void_p. ValueError names what cannot be mirrored."""
    fields = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fm = re.match(r".*\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", decl)
        if fm:  # a function pointer member
            fields.append((fm.group(1), "c_void_p"))
            continue
        if "{" in decl or "union" in decl.split():
            raise ValueError("has a nested union or struct body")
        first = decl.split(",")[0]
        dm = re.match(r"(.*?)(\**)\s*(\w+)\s*(\[\s*(\w+)\s*\])?$", first)
        base = dm.group(1).strip()
        for i, d in enumerate(decl.split(",")):
            dm = re.match(r"(.*?)(\**)\s*(\w+)\s*(\[\s*(\w+)\s*\])?$", d.strip()
                          if i else d)
            stars = dm.group(2)
            name = dm.group(3)
            ctype = (base if i else dm.group(1).strip()) + " " + stars
            words = [w for w in ctype.replace("*", " ").split() if w not in ("const", "struct")]
            ct = ctype_of(ctype, enums, fnptrs, known)
            if dm.group(5):
                n = dm.group(5)
                n = int(n) if n.isdigit() else defines.get(n)
                if n is None:
                    raise ValueError("array size %s is not a known #define" % dm.group(5))
                ct = "%s*%d" % (ct, n)
            fields.append((name, ct))
    return fields


def ctype_of(ctype, enums, fnptrs, structs=()):
    """The ctypes name for a C type, or raises ValueError with the reason.
    A struct of `structs` (the mirrored ones) passed or returned by value is
    "struct:NAME"; a plain char (a struct's char array) is c_char."""
    t = " ".join(ctype.replace("*", " * ").split())
    stars = t.count("*")
    base = " ".join(w for w in t.split() if w not in ("const", "*"))
    if stars == 0:
        if base in SCALARS:
            return SCALARS[base]
        if base in enums:
            return "c_int"
        if base in fnptrs:
            return "c_void_p"
        if base == "char":
            return "c_char"
        if base in structs:
            return "struct:" + base
        raise ValueError("passes or returns the struct %s by value" % base)
    if stars == 1:
        if base == "char":
            return "c_char_p"
        if base in SCALARS and base != "void":
            return "POINTER(%s)" % SCALARS[base]
        if base in enums:
            return "POINTER(c_int)"
        return "c_void_p"
    return "POINTER(c_void_p)"


def bind(decls, enums, fnptrs, structs, bound, unbound):
    for name, rtype, plist, fname in decls:
        if plist is None:
            unbound.append((name, "variadic (C varargs cannot be declared to ctypes)"))
            continue
        try:
            res = ctype_of(rtype, enums, fnptrs, structs)
            args = [ctype_of(p, enums, fnptrs, structs) for p in plist]
        except ValueError as e:
            unbound.append((name, str(e)))
            continue
        bound.append((name, res, args, fname))


def generate(include_dir, models_dir=None):
    decls, enums, fnptrs = parse_headers(include_dir)
    mdecls = []
    dirs = [include_dir]
    if models_dir:
        mdecls, menums, mfnptrs = parse_headers(models_dir)
        enums |= menums
        fnptrs |= mfnptrs
        dirs.append(models_dir)
    bound, mbound, unbound = [], [], []
    defines = {}
    for d in dirs:
        for fname in sorted(os.listdir(d)):
            if fname.endswith(".h"):
                defines.update(header_defines(os.path.join(d, fname)))
    structs, known = [], set()
    for sname, body in parse_structs(dirs):
        try:
            structs.append((sname, struct_fields(body, enums, fnptrs, defines, known)))
            known.add(sname)
        except ValueError as e:
            unbound.append((sname, "struct " + str(e)))
    bind(decls, enums, fnptrs, known, bound, unbound)
    bind(mdecls, enums, fnptrs, known, mbound, unbound)
    lines = [
        "# SPDX-License-Identifier: MIT",
        "# Generated by python/tools/gen_bindings.py from include/fucina/*.h and",
        "# models/include/fucina/*.h: do not edit.",
        "# (name, restype, argtypes, header); ctypes names resolved by fucina._lib.",
        "SIGNATURES = [",
    ]
    for name, res, args, fname in bound:
        lines.append("    (%r, %r, [%s], %r)," % (name, res, ", ".join(repr(a) for a in args), fname))
    lines.append("]")
    lines.append("")
    lines.append("# The same for libfucina_models (models/include/fucina).")
    lines.append("MODEL_SIGNATURES = [")
    for name, res, args, fname in mbound:
        lines.append("    (%r, %r, [%s], %r)," % (name, res, ", ".join(repr(a) for a in args), fname))
    lines.append("]")
    lines.append("")
    lines.append("# (struct, [(field, ctypes name, 'T*N' an array, 'struct:S' a nested struct)]).")
    lines.append("STRUCTS = [")
    for sname, fields in structs:
        lines.append("    (%r, [%s])," % (sname, ", ".join("(%r, %r)" % f for f in fields)))
    lines.append("]")
    lines.append("")
    lines.append("# Declared but deliberately not bound, with the reason.")
    lines.append("NOT_BOUND = {")
    for name, why in unbound:
        lines.append("    %r: %r," % (name, why))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    text = generate(os.path.join(REPO, "include", "fucina"),
                    os.path.join(REPO, "models", "include", "fucina"))
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("gen_bindings: %s is stale; rerun the script" % OUT, file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
