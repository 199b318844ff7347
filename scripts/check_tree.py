#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tree hygiene checks over the files git tracks (a CI stage):
  - every source file (C, Python, shell, CMake) names its licence with an
    SPDX-License-Identifier line near its top (LICENSE: MIT);
  - no file holds an absolute path of a development machine (one under
    the work, root or home folders at the file system's root): the project
    must build and read the same from any checkout.
With --fix-spdx, adds the missing SPDX lines (after a shebang or a C
comment's first line is not split: the line goes first, or second after
a shebang). Exits 1 when a check fails.
"""
import re
import subprocess
import sys

SOURCE = re.compile(r"(\.(c|h|py|sh|cmake)|/CMakeLists\.txt|^CMakeLists\.txt|^\.ci/run)$")
DATA = ("tests/data/",)
MACHINE_PATH = re.compile(r"(?<![\w.])/(work|root|home)/[\w.-]")
SPDX = "SPDX-License-Identifier: MIT"


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def spdx_line(path):
    return ("/* %s */" if path.endswith((".c", ".h")) else "# %s") % SPDX


def main():
    fix = "--fix-spdx" in sys.argv
    bad = []
    for path in tracked():
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                bad.append("%s:%d: an absolute machine path: %s" % (path, n, line.strip()[:80]))
        if not SOURCE.search(path) or path.startswith(DATA):
            continue
        if SPDX in "\n".join(text.splitlines()[:3]):
            continue
        if not fix:
            bad.append("%s:1: no '%s' line in its first three lines" % (path, SPDX))
            continue
        lines = text.splitlines(keepends=True)
        at = 1 if lines and lines[0].startswith("#!") else 0
        lines.insert(at, spdx_line(path) + "\n")
        open(path, "w", encoding="utf-8").write("".join(lines))
    for b in bad:
        print(b)
    print("check_tree: %d problems" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
