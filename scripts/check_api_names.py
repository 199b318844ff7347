#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the public headers against the naming rules of docs/STYLE.md.

Reads every FC_API declaration, enum and macro of include/ and
models/include/ and prints one line per breach (file:line: rule: name).
Exits 1 when there is any. The rules, in brief (docs/STYLE.md has the why):
  names      fc_ + lower-case words; a trailing _ marks an in-place op
  getters    fc_<noun>_<attribute>; fc_<noun>_get_<attribute> only where the
             value comes back through out-parameters or the plain name is a
             type; no suffix forms (..._get, ..._set)
  counts     <thing>_count, never num_<thing>
  defaults   an options initializer is fc_<type>_default() returning fc_<type>
  enums      every enum has a ..._COUNT member (fc_status: FC_STATUS_COUNT)
  sizes      element counts and dimensions are int64_t (or size_t for bytes)
  removed    names this project renamed stay gone (FC_MAX_DIMS, ...)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
HEADER_DIRS = ["include", "models/include"]
# Names renamed or removed when the rules were applied; see CHANGELOG.md.
REMOVED = {
    "FC_MAX_DIMS", "fc_ctx_seed", "fc_ctx_rng_get", "fc_ctx_rng_set", "fc_optim_get_lr",
    "fc_optim_num_params", "fc_optim_num_groups", "fc_ddp_num_buckets",
    "fc_blockq_num_blocks", "fc_gguf_count", "fc_safetensors_count",
    "fc_conv2d_defaults", "fc_conv1d_defaults", "fc_conv_transpose2d_defaults",
    "fc_tensor_copy_to", "fc_dtype_supports_forward_float_math",
    "fc_dtype_supports_quantized_get_rows",
}
# Parameter names that hold element counts or dimensions.
SIZE_PARAM = re.compile(r"^(numel|n_?elems?|length|len|size|dim|dims|rows|cols|n_rows|n_cols)$")


def headers():
    for d in HEADER_DIRS:
        for top, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if f.endswith(".h"):
                    yield os.path.join(top, f)


def strip_comments(text):
    # Keep line numbers: replace comment bodies by as many newlines.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def split_params(params):
    depth, cur, out = 0, "", []
    for ch in params:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def main():
    errors = []
    types = set()
    decls = []   # (path, line, name, ret, params)
    enums = []   # (path, line, name, body)
    macros = []  # (path, line, name)
    for path in headers():
        rel = os.path.relpath(path, ROOT)
        text = strip_comments(open(path, encoding="utf-8").read())
        for m in re.finditer(r"typedef\s+(?:struct|enum|union)\s+\w*\s*(?:\{[^{}]*\})?\s*(\w+)\s*;", text):
            types.add(m.group(1))
        for m in re.finditer(r"\bFC_API\s+([^;{]*?)\b(fc_\w+)\s*\(([^;{]*?)\)\s*(?:FC_\w+\([^)]*\)\s*)*[;{]", text, flags=re.S):
            line = text.count("\n", 0, m.start()) + 1
            decls.append((rel, line, m.group(2), m.group(1).strip(), split_params(m.group(3))))
        # Header-only helpers (static inline) follow the same rules.
        for m in re.finditer(r"\bstatic\s+inline\s+([^;{()]*?)\b(fc_\w+)\s*\(([^;{]*?)\)\s*\{", text, flags=re.S):
            line = text.count("\n", 0, m.start()) + 1
            decls.append((rel, line, m.group(2), m.group(1).strip(), split_params(m.group(3))))
        for m in re.finditer(r"typedef\s+enum\s+\w*\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
            line = text.count("\n", 0, m.start()) + 1
            enums.append((rel, line, m.group(2), m.group(1)))
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)", text, flags=re.M):
            macros.append((rel, text.count("\n", 0, m.start()) + 1, m.group(1)))

    def err(rel, line, rule, name):
        errors.append("%s:%d: %s: %s" % (rel, line, rule, name))

    for rel, line, name, ret, params in decls:
        if name in REMOVED:
            err(rel, line, "removed name is back", name)
        if not re.fullmatch(r"fc_[a-z0-9]+(_[a-z0-9]+)*_?", name):
            err(rel, line, "names are fc_ + lower-case words", name)
        words = name[3:].rstrip("_").split("_")
        if "num" in words:
            err(rel, line, "counts are <thing>_count, not num_<thing>", name)
        if words[-1] in ("get", "set") and len(words) > 1:
            err(rel, line, "getters/setters are fc_<noun>_[set_]<attribute>, not a suffix", name)
        if "get" in words[1:-1] or (len(words) > 1 and words[1] == "get"):
            i = words.index("get")
            noun, attr = "_".join(words[:i]), "_".join(words[i + 1:])
            outs = [p for p in params[1:] if "*" in p and not p.startswith("const")]
            if not outs and ("fc_%s_%s" % (noun, attr)) not in types:
                err(rel, line, "fc_<noun>_get_<attribute> only for out-parameters or a type-named attribute; use fc_<noun>_<attribute>", name)
        if name.endswith("_defaults"):
            err(rel, line, "an options initializer is fc_<type>_default()", name)
        if name.endswith("_default") and params in ([], ["void"]):
            tname = name[: -len("_default")]
            if tname not in types or not ret.endswith(tname):
                err(rel, line, "fc_<type>_default() returns fc_<type>", name)
        for p in params:
            pm = re.match(r"^(?:const\s+)?(\w+)\s+(\w+)$", p)
            if pm and pm.group(1) in ("int", "int32_t", "unsigned", "long") and SIZE_PARAM.match(pm.group(2)):
                err(rel, line, "element counts and dimensions are int64_t (bytes: size_t)", "%s(%s)" % (name, p))
    for rel, line, name, body in enums:
        members = re.findall(r"\b(FC_\w+)", body)
        if name == "fc_status":
            if not any(m == "FC_STATUS_COUNT" for _, _, m in macros):
                err(rel, line, "fc_status needs FC_STATUS_COUNT", name)
            continue
        if not any(m.endswith("_COUNT") for m in members):
            err(rel, line, "every enum ends in a ..._COUNT member", name)
    for rel, line, name in macros:
        if name in REMOVED:
            err(rel, line, "removed name is back", name)
    for e in errors:
        print(e)
    print("check_api_names: %d declarations, %d enums, %d breaches" % (len(decls), len(enums), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
