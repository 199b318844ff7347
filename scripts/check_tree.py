#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tree hygiene checks over the files git tracks (a CI stage):
  - every source file (C, Python, shell, CMake) names its licence with an
    SPDX-License-Identifier line near its top (LICENSE: MIT);
  - every commit subject since SUBJECTS_SINCE is at most 72 characters
    (the detail goes in the body); skipped in a clone without that commit;
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
# The rule holds from this commit on; older history is left as it is.
SUBJECTS_SINCE = "007c39f"
SUBJECT_MAX = 72


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
    have = subprocess.run(["git", "cat-file", "-e", SUBJECTS_SINCE + "^{commit}"],
                          capture_output=True).returncode == 0
    if have:
        log = subprocess.run(["git", "log", "--format=%h %s", SUBJECTS_SINCE + "..HEAD"],
                             capture_output=True, check=True, text=True).stdout
        for entry in log.splitlines():
            sha, _, subject = entry.partition(" ")
            if len(subject) > SUBJECT_MAX:
                bad.append("commit %s: subject of %d characters (at most %d): %s"
                           % (sha, len(subject), SUBJECT_MAX, subject))
    for b in bad:
        print(b)
    print("check_tree: %d problems" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
