#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The symbol half of models/'s layering: every fc__ symbol (the library's
# internal names) an object of fucina_models uses must be defined by
# fucina_models itself. A prototype copied out of src/ compiles against the
# public include root, and this is what catches it. Exits 1 naming each
# offender.
#   check_public.sh NM OBJECT...
set -euo pipefail
nm_bin="$1"
shift
defs="$("$nm_bin" --defined-only --extern-only "$@" 2>/dev/null | awk 'NF >= 3 { print $3 }' | sort -u)"
bad=0
for obj in "$@"; do
  while read -r sym; do
    if [[ "$sym" == fc__* ]] && ! grep -qxF "$sym" <<<"$defs"; then
      echo "models layering: ${obj##*/} uses $sym, an internal function of the library" >&2
      bad=1
    fi
  done < <("$nm_bin" --undefined-only "$obj" 2>/dev/null | awk 'NF { print $NF }')
done
exit $bad
