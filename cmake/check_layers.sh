#!/usr/bin/env bash
# The symbol half of the layering check (the include half is the per-layer
# include roots of CMakeLists.txt). An include root cannot stop a call
# through a public header: fucina/tensor.h declares fc_to, which the ops
# layer defines, and nothing in the preprocessor keeps exec from calling it.
# This reads the compiled objects instead: every symbol a layer's objects
# use and another layer of the library defines must come from a layer it
# may call. Run after the layers' objects are built (a POST_BUILD step of the
# library); exits 1, naming each offending object and symbol, otherwise 0.
#
#   check_layers.sh NM OBJDIR_ROOT LAYER:ALLOWED,... [...]
#   e.g. check_layers.sh nm build/CMakeFiles core:core exec:core,backend,exec
# where OBJDIR_ROOT/fucina_<layer>.dir holds the layer's objects.
set -euo pipefail
nm_bin="$1"
root="$2"
shift 2
declare -A allowed
layers=()
for spec in "$@"; do
  layer="${spec%%:*}"
  layers+=("$layer")
  allowed[$layer]=",${spec#*:},"
done
defs="$(mktemp)"
trap 'rm -f "$defs"' EXIT
for layer in "${layers[@]}"; do
  find "$root/fucina_$layer.dir" -name '*.o' -print0 |
    xargs -0 -r "$nm_bin" --defined-only --extern-only 2>/dev/null |
    awk -v l="$layer" 'NF >= 3 && $2 ~ /^[TDBRVW]$/ { print $3, l }'
done | sort -u > "$defs"
uses="$(mktemp)"
trap 'rm -f "$defs" "$uses"' EXIT
for layer in "${layers[@]}"; do
  while IFS= read -r obj; do
    "$nm_bin" --undefined-only "$obj" 2>/dev/null |
      awk -v o="${obj#"$root"/}" -v l="$layer" 'NF { print o, l, $NF }'
  done < <(find "$root/fucina_$layer.dir" -name '*.o')
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
