#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sums gcov's line counts of the library's sources by layer.

Reads every object's coverage notes (.gcno, with its .gcda where it ran) under the build folder given (the library's layers and
models/ only: tests, examples and bench are not what is being measured),
asks gcov for its JSON intermediate form, and merges the lines of each
source file across the objects that compiled it (a header's inline code is
counted once per line, run if any object ran it). Prints one line per layer
and the total.
"""
import argparse
import collections
import gzip
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
LAYERS = ["src/core", "src/exec", "src/backend", "src/ag", "src/ops", "src/io",
          "src/dist", "models/llama", "models/tokenizer"]


def layer_of(path):
    rel = os.path.relpath(path, ROOT)
    for layer in LAYERS:
        if rel.startswith(layer + "/"):
            return layer, rel
    return None, rel


def gcov_json(gcda):
    """gcov's JSON for one object file, as a dict (gcov >= 9)."""
    out = subprocess.run(["gcov", "--json-format", "--stdout", gcda],
                         cwd=os.path.dirname(gcda), capture_output=True, check=False)
    if out.returncode != 0 or not out.stdout:
        return None
    data = out.stdout
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data.splitlines()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--json", help="write the table here as JSON too")
    args = ap.parse_args()
    lines = collections.defaultdict(dict)   # rel path -> {line: ran}
    for top, _, files in os.walk(args.build):
        if "/tests" in top or "/examples" in top or "/bench" in top or "/fuzz" in top:
            continue
        for name in files:
            # Every compiled object has a .gcno; one that never ran has no
            # .gcda, and gcov then reports its lines with a count of zero.
            if not name.endswith(".gcno"):
                continue
            doc = gcov_json(os.path.abspath(os.path.join(top, name)))
            if doc is None:
                continue
            cwd = doc.get("current_working_directory", top)
            for f in doc.get("files", []):
                path = f["file"]
                if not os.path.isabs(path):
                    path = os.path.normpath(os.path.join(cwd, path))
                layer, rel = layer_of(path)
                if layer is None:
                    continue
                seen = lines[rel]
                for ln in f.get("lines", []):
                    n = ln["line_number"]
                    seen[n] = seen.get(n, False) or ln["count"] > 0
    table = {}
    for rel, seen in lines.items():
        layer, _ = layer_of(os.path.join(ROOT, rel))
        ran, total = table.get(layer, (0, 0))
        table[layer] = (ran + sum(seen.values()), total + len(seen))
    if not table:
        print("coverage: no gcov data found under", args.build, file=sys.stderr)
        return 1
    print("%-18s %8s %8s %7s" % ("layer", "lines", "run", "cover"))
    all_ran = all_total = 0
    for layer in LAYERS:
        if layer not in table:
            continue
        ran, total = table[layer]
        all_ran += ran
        all_total += total
        print("%-18s %8d %8d %6.1f%%" % (layer, total, ran, 100.0 * ran / max(total, 1)))
    print("%-18s %8d %8d %6.1f%%" % ("total", all_total, all_ran, 100.0 * all_ran / max(all_total, 1)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({k: {"lines": v[1], "run": v[0]} for k, v in table.items()}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
