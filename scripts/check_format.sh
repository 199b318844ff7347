#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The C sources against .clang-format with the pinned formatter
# (clang-format 14, Debian bookworm's clang-format-14: another version
# formats some constructs differently, so the check names its version).
# Generated files (a "do not edit" line in their first lines) are skipped:
# their generator writes them.
#   scripts/check_format.sh         # CI: lists the files that drift, exit 1
#   scripts/check_format.sh --fix   # formats them in place
set -euo pipefail
cd "$(dirname "$0")/.."
CF="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$CF" > /dev/null; then
  bash scripts/deps.sh --format
fi
fix=0
[ "${1:-}" = "--fix" ] && fix=1
bad=()
n=0
while IFS= read -r f; do
  head -5 "$f" | grep -qi "do not edit" && continue
  n=$((n + 1))
  if [ $fix -eq 1 ]; then
    "$CF" -i "$f"
  elif ! "$CF" --dry-run -Werror "$f" > /dev/null 2>&1; then
    bad+=("$f")
  fi
done < <(git ls-files '*.c' '*.h')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} of $n files drift from .clang-format ($("$CF" --version)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check_format: run bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: $n files formatted ($("$CF" --version | sed 's/.*version //'))"
