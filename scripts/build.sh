#!/usr/bin/env bash
# Configures and builds medprof in ./build (or $MEDPROF_BUILD_DIR). Extra arguments are
# CMake targets (default: everything). Used by demo.sh and test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEDPROF_BUILD_DIR:-$root/build}
jobs=${MEDPROF_JOBS:-$(nproc)}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
fi
if [ $# -gt 0 ]; then
  targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$build" -j "$jobs" "${targets[@]}"
else
  cmake --build "$build" -j "$jobs"
fi
