#!/usr/bin/env bash
# Builds medprof-worker and meddpm-export alone on the GPU machine (DESIGN.md "Build
# variants"): PyTorch's own libtorch (CUDA), no gRPC, no tests. Run from anywhere in the repo:
#
#   bash bench/gpu/build_worker.sh                 # -> build-gpu/bin/{medprof-worker,meddpm-export}
#
# Reuse: build-gpu/bin/SOURCES holds a hash of the sources the binaries were built from (the
# top-level CMakeLists.txt, cmake/, proto/, common/, workloads/, agent/). When it matches the
# checkout and both binaries are there — e.g. build-gpu/bin carried to a fresh device machine after
# a call that built it — nothing is built (saves ~2 min of device time); any source change rebuilds.
#
# Environment: BUILD_DIR (default build-gpu), TORCH_DIR (default: PyTorch's cmake prefix),
# JOBS (default nproc). When .carry/ exists (scripts/make-carry.sh: Debian 12's Abseil and
# CLI11 unpacked, since the GPU machine lacks both), its CMake configs come first on the
# search path and its shared libraries are put on the binaries' RPATH.
set -euo pipefail

cd "$(dirname "$0")/../.."
root="$(pwd)"
build="${BUILD_DIR:-build-gpu}"
jobs="${JOBS:-$(nproc)}"
if [ -z "${TORCH_DIR:-}" ]; then
  prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" || {
    echo "build_worker.sh: python3 cannot import torch; set TORCH_DIR=<libtorch>/share/cmake/Torch" >&2; exit 1; }
  TORCH_DIR="${prefix}/Torch"
fi

args=(-DMEDPROF_COMPONENTS=worker "-DTorch_DIR=${TORCH_DIR}" -DMEDPROF_BUILD_TESTS=OFF
      -DMEDPROF_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release)
if [ -d "${root}/.carry" ]; then
  carry="${root}/.carry"
  lib="${carry}/usr/lib/x86_64-linux-gnu"
  args+=("-DCMAKE_PREFIX_PATH=${lib}/cmake;${carry}/usr/share/cmake"
         "-DCMAKE_BUILD_RPATH=${lib}")
  export LD_LIBRARY_PATH="${lib}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
  echo "build_worker.sh: using Abseil and CLI11 from ${carry}"
fi

sources_hash() {
  find CMakeLists.txt cmake proto common workloads agent -type f ! -name '*.pyc' -print0 | sort -z |
    xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}
stamp="${build}/bin/SOURCES"
hash=$(sources_hash)
if [ -x "${build}/bin/medprof-worker" ] && [ -x "${build}/bin/meddpm-export" ] && [ -f "${stamp}" ] &&
   [ "$(cat "${stamp}")" = "${hash}" ]; then
  echo "build_worker.sh: ${build}/bin was built from these sources (${hash:0:12}); nothing to build"
  exit 0
fi

echo "build_worker.sh: cmake -S . -B ${build} ${args[*]}"
cmake -S . -B "${build}" "${args[@]}"
targets=(meddpm-export)
# (not `| grep -q`: with pipefail, grep closing the pipe early fails the pipeline)
if cmake --build "${build}" --target help 2>/dev/null | grep 'medprof-worker' >/dev/null; then
  targets+=(medprof-worker)
else
  echo "build_worker.sh: no medprof-worker target in this tree yet; building meddpm-export only" >&2
fi
cmake --build "${build}" -j "${jobs}" --target "${targets[@]}"
for t in "${targets[@]}"; do
  ls -l "${build}/bin/${t}"
done
echo "${hash}" >"${stamp}"
