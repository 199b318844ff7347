#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches the prebuilt llama.cpp / ggml that the npm registry ships, once:
# the CPU libraries of @node-llama-cpp/linux-x64 and the headers of the
# llama.cpp release they were built from (a git bundle inside
# node-llama-cpp), both at version VER, into DIR/v<VER>/:
#   bins/      libllama, libggml, libggml-base and the CPU backend variants
#   include/   ggml's headers (ggml/include)
#   llama/     llama.cpp's headers (include)
#
#   bash scripts/npm_llamacpp.sh DIR [VER]      # VER default 3.22.1 (llama.cpp v0.5.0)
#
# `npm pack` fetches just those two tarballs through the registry client,
# checked against the registry's integrity hashes and with no install
# scripts run (`npm install node-llama-cpp` would also pull its runtime
# dependencies and CUDA / Vulkan builds, none of which is needed). Used by
# bench/qmatvec_vs_ggml.sh and scripts/llamacpp_parity.sh. Exit status 3
# (with the reason on stderr) when the peer cannot be had here: not
# x86-64, no npm or git, or no registry to reach.
set -euo pipefail
DIR="$1"
VER="${2:-3.22.1}"
unavailable() { echo "npm_llamacpp.sh: $*" >&2; exit 3; }
[ "$(uname -m)" = x86_64 ] || unavailable "the npm package holds x86-64 libraries only"
mkdir -p "$DIR" && DIR="$(cd "$DIR" && pwd)"
V="$DIR/v$VER"
if [ -f "$V/bins/libggml-base.so" ] && [ -f "$V/include/ggml.h" ] && [ -f "$V/llama/llama.h" ]; then
  exit 0
fi
command -v npm > /dev/null || unavailable "no npm (apt-get install npm)"
command -v git > /dev/null || unavailable "no git, which unpacks the headers' source bundle"
tmp="$V/tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
echo "npm_llamacpp.sh: fetching node-llama-cpp $VER from the npm registry" >&2
(cd "$tmp" && npm pack --silent --fetch-retries=1 --fetch-timeout=60000 \
  "@node-llama-cpp/linux-x64@$VER" "node-llama-cpp@$VER") > /dev/null \
  || unavailable "npm pack failed (no network or no such version)"
mkdir -p "$tmp/bins" "$tmp/src"
tar xzf "$tmp"/node-llama-cpp-linux-x64-*.tgz -C "$tmp/bins" package/bins/linux-x64
tar xzf "$tmp"/node-llama-cpp-[0-9]*.tgz -C "$tmp/src" package/llama/gitRelease.bundle \
  package/llama/llama.cpp.info.json
git init -q --bare "$tmp/llama.git"
git -C "$tmp/llama.git" fetch -q "$tmp/src/package/llama/gitRelease.bundle" HEAD:release
mkdir -p "$tmp/include"
git -C "$tmp/llama.git" archive release ggml/include include | tar x -C "$tmp/include"
rm -rf "$V/bins" "$V/include" "$V/llama"
mv "$tmp/bins/package/bins/linux-x64" "$V/bins"
mv "$tmp/include/ggml/include" "$V/include"
mv "$tmp/include/include" "$V/llama"
cp "$tmp/src/package/llama/llama.cpp.info.json" "$V/"
rm -rf "$tmp"
