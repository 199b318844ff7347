#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-builds fucina for aarch64 Linux and runs the whole test suite under
# qemu-user (no arm64 machine needed).
#   scripts/test_aarch64.sh      build-aarch64/, gcc-aarch64-linux-gnu, warnings as errors
# Installs what is missing first: the cross compiler, qemu-user and, through
# dpkg multiarch, Debian's arm64 -dev packages. Idempotent and
# non-interactive; needs root (or sudo) only when something is missing.
#
# oneDNN is left out (-DFUCINA_WITH_ONEDNN=OFF): bookworm has
# libdnnl-dev:arm64, but it cannot be installed beside the host's
# libdnnl-dev (the x86 build's, scripts/deps.sh): both ship
# /usr/include/oneapi/dnnl/dnnl_config.h with different contents although
# the package is marked Multi-Arch: same, so dpkg refuses the second one.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(cmake make pkg-config qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
      libcmocka-dev:arm64 libopenblas-openmp-dev:arm64 zlib1g-dev:arm64
      dataset-fashion-mnist)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "test_aarch64: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD="${FUCINA_BUILD_DIR:-build-aarch64}"
JOBS="$(nproc)"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64-linux-gnu.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUCINA_WERROR=ON -DFUCINA_WITH_ONEDNN=OFF \
      > "$BUILD.configure.log" 2>&1 \
  || { cat "$BUILD.configure.log"; exit 1; }
# Without the emulator ctest would exec arm64 programs directly, which only
# works where binfmt_misc happens to be set up.
grep -q '^FUCINA_QEMU_AARCH64:FILEPATH=/' "$BUILD/CMakeCache.txt" \
  || { echo "test_aarch64: qemu-aarch64 not found (Debian package qemu-user)"; exit 1; }
cmake --build "$BUILD" -j "$JOBS"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
# Tests without a TIMEOUT of their own get half an hour: qemu is slow.
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" --timeout 1800 ${CTEST_ARGS:-}
