#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that the code the documents show is the code that runs:
- the README's C program is examples/hello.c (without its SPDX line), which
  ctest runs and the consumer test builds against an installed prefix;
- every fenced block of docs/tutorials/*.md preceded by a line
  `<!-- from PATH -->` appears verbatim in PATH (a program ctest runs);
- every relative link of README.md, docs/**/*.md and python/README.md
  names a file or folder that exists;
- docs/ops.md is what scripts/gen_op_index.py writes from FC__OP_LIST.
Prints what disagrees and exits 1; CI runs it (.ci/run).
  python3 scripts/check_docs.py
"""
import glob
import os
import re
import subprocess
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def read(rel):
    with open(os.path.join(REPO, rel), encoding="utf-8") as f:
        return f.read()


def main():
    problems = []
    readme = read("README.md")
    m = re.search(r"```c\n(/\* hello\.c.*?)```\n", readme, flags=re.S)
    hello = read("examples/hello.c")
    hello = hello.split("\n", 1)[1] if hello.startswith("/* SPDX") else hello
    if not m:
        problems.append("README.md: no ```c block starting with /* hello.c")
    elif m.group(1) != hello:
        problems.append("README.md: the C program differs from examples/hello.c")
    checked = 0
    for md in sorted(glob.glob(os.path.join(REPO, "docs", "tutorials", "*.md"))):
        text = open(md, encoding="utf-8").read()
        rel = os.path.relpath(md, REPO)
        for fm in re.finditer(r"<!-- from (\S+) -->\n```\w*\n(.*?)```\n", text, flags=re.S):
            src = fm.group(1)
            if not os.path.exists(os.path.join(REPO, src)):
                problems.append("%s: names %s, which does not exist" % (rel, src))
                continue
            if fm.group(2) not in read(src):
                first = fm.group(2).strip().split("\n")[0]
                problems.append("%s: a block is not in %s verbatim (it starts %r)"
                                % (rel, src, first))
            checked += 1
    docs = ["README.md", "python/README.md"] + [os.path.relpath(p, REPO) for p in
                                              glob.glob(os.path.join(REPO, "docs", "**", "*.md"),
                                                        recursive=True)]
    links = 0
    for rel in docs:
        base = os.path.dirname(rel)
        for lm in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", read(rel)):
            target = lm.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            links += 1
            if not os.path.exists(os.path.join(REPO, base, target)):
                problems.append("%s: link to %s, which does not exist" % (rel, target))
    gen = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gen_op_index.py"),
                          "--check"], capture_output=True, text=True)
    if gen.returncode != 0:
        problems.append((gen.stdout + gen.stderr).strip() or "gen_op_index.py --check failed")
    for p in problems:
        print("check_docs: " + p)
    print("check_docs: README program, %d tutorial blocks, %d links checked, %d problems"
          % (checked, links, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
