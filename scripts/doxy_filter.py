#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Doxygen's INPUT_FILTER for the public headers (docs/Doxyfile).

The headers are written for a reader of C, in plain block comments: a
comment right above a declaration documents it, a comment after a field or
an enum member on its line documents that member, and a comment above a run
of declarations with no blank line between them documents the whole run.
This filter tells Doxygen the same thing without touching the headers' text:
  - the file's opening comment (after the SPDX line) becomes the file's page;
  - a block comment directly above code becomes a doc comment (/** ... */);
  - a comment after code on its line becomes a member doc (/**< ... */);
  - a commented run of several declarations becomes a member group whose
    first member's text every member shares (DISTRIBUTE_GROUP_DOC).
Separator comments ("/* ---- context ---- */") and comments followed by a
blank line stay plain. No line is added or removed, so Doxygen's warnings
name the header's own line numbers.
  python3 scripts/doxy_filter.py HEADER   # the filtered text on stdout
"""
import re
import sys

COMMENT = re.compile(r"/\*.*?\*/", re.S)
SEPARATOR = re.compile(r"/\*\s*-{3,}.*-{3,}\s*\*/")


def declarations_after(lines, i):
    """How many declarations (statements ending with ';' or '}' at depth 0,
    or #define lines) follow line i without a blank line, a comment line or
    another preprocessor line between them."""
    count = 0
    for j, depth, ends in statement_depth_walk(lines, i):
        line = lines[j].strip()
        if not line or (depth == 0 and line.startswith("/*")):
            break
        if line.startswith("#") and not line.startswith("#define") and depth == 0 and not ends:
            if j == i or ended_before(lines, i, j):
                break
        if ends:
            count += 1
    return count


def ended_before(lines, i, j):
    """Whether line j starts outside any statement begun at line i."""
    for k, depth, ends in statement_depth_walk(lines, i):
        if k == j - 1:
            return ends or not COMMENT.sub("", lines[k]).strip()
    return True


TYPEDEF = re.compile(r"typedef\s+(?:struct|enum|union)\s+(\w+)\s*\{")


def statement_depth_walk(lines, i):
    """Yields (line index, depth after the line, ends a statement)."""
    depth = 0
    j = i
    mid = False
    while j < len(lines):
        line = lines[j]
        code = COMMENT.sub("", line).split("//")[0]
        if line.lstrip().startswith("#"):
            yield j, depth, depth == 0 and line.lstrip().startswith("#define") and not mid
            j += 1
            continue
        mid = True
        for ch in code:
            if ch in "({[":
                depth += 1
            elif ch in ")}]":
                depth -= 1
        ends = depth == 0 and code.rstrip().endswith((";", "}"))
        if ends:
            mid = False
        yield j, depth, ends
        j += 1


def declaration_starts(lines, i, n):
    """The first lines of the n declarations that start at line i."""
    out = [i]
    for j, depth, ends in statement_depth_walk(lines, i):
        if ends:
            if len(out) == n:
                break
            out.append(j + 1)
    return out[:n]


def declaration_end(lines, i):
    """The last line of the declaration that starts at line i."""
    for j, depth, ends in statement_depth_walk(lines, i):
        if ends:
            return j
    return len(lines) - 1


def filter_text(text):
    lines = text.split("\n")
    out = list(lines)
    # Offsets of every line start, to map comment positions to lines.
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def line_of(pos):
        lo, hi = 0, len(lines)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if starts[mid] <= pos:
                lo = mid
            else:
                hi = mid
        return lo

    edits = []  # (pos, old, new) on the original text
    seen_file_doc = False

    def escape(m):
        # Doxygen reads a backslash as a command and '<' as an HTML tag;
        # the headers mean them literally (regexes, "<state>")
        body = m.group(0)
        for off in range(2, len(body) - 2):
            if body[off] in "\\<":
                edits.append((m.start() + off, body[off], "\\" + body[off]))
    for m in COMMENT.finditer(text):
        body = m.group(0)
        first = line_of(m.start())
        last = line_of(m.end() - 1)
        before = text[starts[first]:m.start()]
        if "SPDX-License-Identifier" in body or body.startswith("/**"):
            continue
        if before.strip():
            # after code on its line: the member's documentation
            if before.strip().startswith("#"):
                continue
            edits.append((m.start(), "/*", "/**<"))
            escape(m)
            continue
        if SEPARATOR.fullmatch(body.strip()):
            continue
        if not seen_file_doc:
            seen_file_doc = True
            edits.append((m.start(), "/*", "/**"))
            edits.append((m.end() - 2, "*/", " @file */"))
            escape(m)
            continue
        nxt = last + 1
        if nxt >= len(lines) or not lines[nxt].strip():
            continue
        if lines[nxt].lstrip().startswith(("/*", "#if", "#endif", "#include", "#else")):
            continue
        n = declarations_after(lines, nxt)
        if n == 0:
            continue
        decl_lines = declaration_starts(lines, nxt, n)
        head = lines[nxt].lstrip()
        typedef = TYPEDEF.match(head)
        if n > 1 and typedef:
            # a type and the functions that use it: the comment documents
            # the type, and each function shares its text
            edits.append((m.start(), "/*", "/**"))
            for k in decl_lines[1:]:
                col = len(lines[k]) - len(lines[k].lstrip())
                edits.append((starts[k] + col, "", "/** @copydoc %s */ " % typedef.group(1)))
        elif n > 1:
            edits.append((m.start(), "/*", "/**@{*/ /**"))
            # the group closes at the start of the line after the run (a
            # blank line, a comment or a directive), not at the end of the
            # run's last line, which may be a #define
            after = declaration_end(lines, decl_lines[-1]) + 1
            if after < len(lines):
                edits.append((starts[after], "", "/**@}*/ "))
            else:
                edits.append((len(text), "", "\n/**@}*/"))
        else:
            edits.append((m.start(), "/*", "/**"))
        escape(m)
    del out
    pieces = []
    prev = 0
    for pos, old, new in sorted(edits, key=lambda e: e[0]):
        assert text.startswith(old, pos), (pos, old)
        pieces.append(text[prev:pos])
        pieces.append(new)
        prev = pos + len(old)
    pieces.append(text[prev:])
    return "".join(pieces)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(filter_text(f.read()))


if __name__ == "__main__":
    main()
