#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The symbol half of the layering check (the include half is the per-layer
# include roots of CMakeLists.txt). An include root cannot stop a call
# through a public header: fucina/tensor.h declares fc_to, which the ops
# layer defines, and nothing in the preprocessor keeps exec from calling it.
# This reads the compiled objects instead: every symbol a layer's objects
# use and another layer of the library defines must come from a layer it
# may call. Run after the layers' objects are built (a POST_BUILD step of the
# library); exits 1, naming each offending object and symbol, otherwise 0.
#
#   check_layers.sh NM +LAYER=ALLOWED,... OBJECT... [+LAYER=ALLOWED,... OBJECT...]
#   e.g. check_layers.sh nm +core=core a.o b.o +exec=core,backend,exec c.o
# The objects are the layers' own (CMake passes $<TARGET_OBJECTS>), so a
# stale object of a deleted source left in the build tree is not read.
set -euo pipefail
nm_bin="$1"
shift
declare -A allowed
declare -A objects
layers=()
layer=""
for arg in "$@"; do
  if [[ "$arg" == +*=* ]]; then
    layer="${arg%%=*}"
    layer="${layer#+}"
    layers+=("$layer")
    allowed[$layer]=",${arg#*=},"
    objects[$layer]=""
  elif [ -n "$layer" ]; then
    objects[$layer]+="$arg"$'\n'
  fi
done
list_objects() { printf '%s' "${objects[$1]}" | sed '/^$/d'; }
defs="$(mktemp)"
uses="$(mktemp)"
trap 'rm -f "$defs" "$uses"' EXIT
for layer in "${layers[@]}"; do
  list_objects "$layer" | tr '\n' '\0' |
    xargs -0 -r "$nm_bin" --defined-only --extern-only 2>/dev/null |
    awk -v l="$layer" 'NF >= 3 && $2 ~ /^[TDBRVW]$/ { print $3, l }'
done | sort -u > "$defs"
for layer in "${layers[@]}"; do
  while IFS= read -r obj; do
    "$nm_bin" --undefined-only "$obj" 2>/dev/null |
      awk -v o="${obj##*/CMakeFiles/}" -v l="$layer" 'NF { print o, l, $NF }'
  done < <(list_objects "$layer")
done > "$uses"
rules=""
for layer in "${layers[@]}"; do rules+="$layer=${allowed[$layer]} "; done
awk -v rules="$rules" '
  BEGIN { n = split(rules, r, " "); for (i = 1; i <= n; i++) { split(r[i], kv, "="); ok[kv[1]] = kv[2] } }
  FNR == NR { owner[$1] = $2; next }
  ($3 in owner) && index(ok[$2], "," owner[$3] ",") == 0 {
    printf "layering: %s (%s) uses %s, defined in the %s layer, which %s may not call\n", $1, $2, $3, owner[$3], $2 > "/dev/stderr"
    bad = 1
  }
  END { exit bad }' "$defs" "$uses"
