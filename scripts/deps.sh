#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages fucina's build, tests, examples and benchmarks
# need, when they are missing (gnuplot-nox draws the trainers' loss curves). Idempotent and non-interactive; needs root
# (or sudo) only when something is actually missing.
#   scripts/deps.sh           build, tests, examples
#   scripts/deps.sh --bench   also Debian's PyTorch, for bench/compare.sh's peers
#   scripts/deps.sh --peers   also npm and git, which fetch the prebuilt llama.cpp
#                             (scripts/npm_llamacpp.sh)
#   scripts/deps.sh --mpi     also Open MPI, for data-parallel training (FUCINA_WITH_MPI)
#   scripts/deps.sh --python  also pytest and NumPy, for the Python binding's tests
#                             (scripts/test_python.sh)
#   scripts/deps.sh --docs    also Doxygen, for the API reference (scripts/api_docs.sh)
#   scripts/deps.sh --format  also clang-format 14, for scripts/check_format.sh
set -euo pipefail
PKGS=(cmake make gcc clang pkg-config libcmocka-dev libopenblas-openmp-dev libdnnl-dev
      zlib1g-dev libclang-rt-14-dev libomp-14-dev llvm-14 dataset-fashion-mnist
      gnuplot-nox)
for flag in "$@"; do
  case "$flag" in
    --bench) PKGS+=(python3-torch python3-numpy) ;;
    # npm may come with another nodejs build (NodeSource's carries its own
    # and conflicts with Debian's npm package): only a missing command is
    # installed.
    --peers)
      PKGS+=(ca-certificates)
      command -v npm > /dev/null || PKGS+=(npm)
      command -v git > /dev/null || PKGS+=(git)
      ;;
    --mpi) PKGS+=(libopenmpi-dev openmpi-bin) ;;
    --python) PKGS+=(python3-pytest python3-numpy) ;;
    --docs) PKGS+=(doxygen) ;;
    --format) PKGS+=(clang-format-14) ;;
    *) echo "deps.sh: unknown option $flag" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
