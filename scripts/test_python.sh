#!/usr/bin/env bash
# Runs the Python binding's tests (python/tests, pytest) against the shared
# library: FUCINA_BUILD_DIR's libfucina.so when set, else build/'s, built
# here (target fucina only) when it is missing or stale. Installs
# python3-pytest and python3-numpy when missing (scripts/deps.sh --python);
# PyTorch (python3-torch, scripts/deps.sh --bench) is optional: without it
# the Hessian-vector-product comparison is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh --python
BUILD="${FUCINA_BUILD_DIR:-build}"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="${CC:-gcc}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFUCINA_WERROR=ON > "$BUILD.configure.log" 2>&1 \
    || { cat "$BUILD.configure.log"; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" --target fucina
# apt installs the modules for Debian's interpreter; a python3 earlier on
# PATH (a pyenv or venv) may lack them, so that one is used only when it has them.
PY="${FUCINA_PYTHON:-python3}"
if ! "$PY" -c 'import numpy, pytest' 2> /dev/null; then PY=/usr/bin/python3; fi
export FUCINA_LIB="$PWD/$BUILD/libfucina.so"
case "$BUILD" in /*) FUCINA_LIB="$BUILD/libfucina.so" ;; esac
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
PYTHONPATH=python "$PY" -m pytest python/tests -q -p no:cacheprovider
