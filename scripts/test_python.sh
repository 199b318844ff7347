#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the Python binding's tests (python/tests, pytest) against the shared
# libraries: FUCINA_BUILD_DIR's libfucina.so and libfucina_models.so when
# set, else build/'s, built here (targets fucina and fucina_models_shared
# only) when missing or stale; then the README's Python program and the
# three scripts of examples/python;
# then, without a sanitizer, the tests again at every lower SIMD level of
# this CPU (scripts/cpu_level.sh, the caps of scripts/test_levels.sh). Installs
# python3-pytest and python3-numpy when missing (scripts/deps.sh --python);
# PyTorch (python3-torch, scripts/deps.sh --bench) is optional: without it
# the Hessian-vector-product comparison is skipped.
#   FUCINA_SANITIZE=address scripts/test_python.sh   against build-asan/ (clang,
#   ASan+UBSan), the sanitizer runtime preloaded into the interpreter (leak
#   detection off: the interpreter's own allocations would be reported)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --python
SAN="${FUCINA_SANITIZE:-}"
if [ -z "$SAN" ]; then
  BUILD="${FUCINA_BUILD_DIR:-build}"
  CC_="${CC:-gcc}"
else
  BUILD="${FUCINA_BUILD_DIR:-build-$SAN}"
  CC_="${CC:-clang}"
fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFUCINA_WERROR=ON -DFUCINA_SANITIZE="$SAN" > "$BUILD.configure.log" 2>&1 \
    || { cat "$BUILD.configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" --target fucina fucina_models_shared
# apt installs the modules for Debian's interpreter; a python3 earlier on
# PATH (a pyenv or venv) may lack them, so that one is used only when it has them.
PY="${FUCINA_PYTHON:-python3}"
if ! "$PY" -c 'import numpy, pytest' 2> /dev/null; then PY=/usr/bin/python3; fi
export FUCINA_LIB="$PWD/$BUILD/libfucina.so"
case "$BUILD" in /*) FUCINA_LIB="$BUILD/libfucina.so" ;; esac
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
if [ "$SAN" = address ]; then
  LD_PRELOAD="$("$CC_" -print-file-name=libclang_rt.asan-$(uname -m).so)"
  export LD_PRELOAD
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  # test_train.py links a C program against the sanitized library: the
  # same compiler, with the shared runtime that is preloaded here.
  export FUCINA_TEST_CC="$CC_"
  export FUCINA_TEST_CFLAGS="-fsanitize=address,undefined -shared-libasan -Wl,-rpath,$(dirname "$LD_PRELOAD")"
fi
export PYTHONPATH=python
"$PY" -m pytest python/tests -q -p no:cacheprovider
echo "== the README's Python program =="
sed -n '/^```python$/,/^```$/p' README.md | sed '1d;$d' | "$PY" -
echo "== examples/python =="
"$PY" examples/python/gradcheck_user.py
"$PY" examples/python/newton_cg.py
"$PY" examples/python/generate_gguf.py tests/data/llama/tiny_f32.gguf \
  --ids 1,17,42,5,63,17,8,90,33,2,71,17 --tokens 8
[ -n "$SAN" ] && exit 0
case "$(bash scripts/cpu_level.sh)" in
  avx512) levels=(avx2 portable) ;;
  avx2) levels=(portable) ;;
  *) levels=() ;;
esac
for lv in "${levels[@]}"; do
  case "$lv" in
    avx2) caps=(FUCINA_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell) ;;
    portable) caps=(FUCINA_ISA=portable ONEDNN_MAX_CPU_ISA=SSE41 OPENBLAS_CORETYPE=Nehalem) ;;
  esac
  echo "== python/tests at level $lv (${caps[*]}) =="
  env "${caps[@]}" "$PY" -m pytest python/tests -q -p no:cacheprovider
done
