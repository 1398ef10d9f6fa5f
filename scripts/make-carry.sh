#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with Debian 12's Abseil and CLI11, unpacked with dpkg -x, for a
# GPU machine that has LibTorch, CUDA, protobuf, spdlog, fmt and nlohmann-json but neither
# Abseil nor CLI11 (DESIGN.md, "Build variants"). bench/gpu/build_worker.sh picks .carry/ up.
#
#   scripts/make-carry.sh            # on the Debian 12 machine, before sending the tree
#
# Packages: libabsl-dev (headers, CMake config, .so links), libabsl20220623 (the shared
# libraries the worker loads at run time), libcli11-dev (header-only). Needs apt-get download
# (a Debian/Ubuntu package index; run `apt-get update` first on a fresh machine).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
carry="${root}/.carry"
packages=(libabsl-dev libabsl20220623 libcli11-dev)

command -v apt-get >/dev/null || { echo "make-carry.sh: apt-get not found (run on Debian 12)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
(cd "${tmp}" && apt-get download "${packages[@]}") || {
  echo "make-carry.sh: apt-get download ${packages[*]} failed (try: apt-get update)" >&2; exit 1; }

rm -rf "${carry}"
mkdir -p "${carry}"
for deb in "${tmp}"/*.deb; do
  dpkg -x "${deb}" "${carry}"
  echo "make-carry.sh: unpacked $(basename "${deb}")"
done

lib="${carry}/usr/lib/x86_64-linux-gnu"
for f in "${lib}/cmake/absl/abslConfig.cmake" "${carry}/usr/share/cmake/CLI11/CLI11Config.cmake"; do
  [ -f "${f}" ] || { echo "make-carry.sh: expected ${f} is missing" >&2; exit 1; }
done
runtime=("${lib}"/libabsl_base.so.*.*)
[ -f "${runtime[0]}" ] || { echo "make-carry.sh: no libabsl runtime libraries in ${lib}" >&2; exit 1; }
echo "make-carry.sh: ${carry} holds $(du -sh "${carry}" | cut -f1): $(basename "${runtime[0]}"), CLI11 headers"
