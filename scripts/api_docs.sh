#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the API reference from the public headers with Doxygen
# (docs/Doxyfile, through scripts/doxy_filter.py) into build/apidocs/html,
# and fails when Doxygen warns: an undocumented public function, type, enum
# or macro, or a comment it cannot parse. Struct fields are the exception:
# many are documented together by their struct's comment rather than one
# by one, so a field without its own comment is not a failure.
#   scripts/api_docs.sh [OUT]     # OUT defaults to build/apidocs
set -euo pipefail
cd "$(dirname "$0")/.."
command -v doxygen > /dev/null || bash scripts/deps.sh --docs
OUT="${1:-build/apidocs}"
rm -rf "$OUT"
mkdir -p "$OUT"
FUCINA_APIDOCS_OUT="$OUT" doxygen docs/Doxyfile
# the warnings that fail the build: all but undocumented struct fields
grep -v -E '\((variable)\) of (struct|union) ' "$OUT/warnings.log" > "$OUT/failures.log" || true
fields=$(grep -c -E '\((variable)\) of (struct|union) ' "$OUT/warnings.log" || true)
pages=$(find "$OUT/html" -name '*.html' | wc -l)
if [ -s "$OUT/failures.log" ]; then
  echo "api_docs: Doxygen warnings ($(wc -l < "$OUT/failures.log")):" >&2
  sed "s|$PWD/||" "$OUT/failures.log" >&2
  exit 1
fi
echo "api_docs: $pages pages in $OUT/html, no warnings ($fields fields documented by their struct's comment)"
