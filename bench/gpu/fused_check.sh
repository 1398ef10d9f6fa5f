#!/usr/bin/env bash
# Issue "fused GroupNorm kernels (opt3)" on the GPU machine, in stages so each device call stays
# under the 10-minute cap while everything runs on one warm machine:
#
#   STAGES="build test worker" bash bench/gpu/fused_check.sh      # call 1 (~8 min)
#   STAGES="peer" bash bench/gpu/fused_check.sh                    # call 2, right after (~6 min)
#
#   build   worker + fused_group_norm_test in build-gpu/ (PyTorch's CUDA libtorch, tests on)
#   test    ctest -L gpu -R fused_group_norm_test: FP64-reference numerics, poisoned outputs,
#           opt3 vs opt1 forward, 50 training steps; then fused_group_norm_bench (the kernels'
#           times next to LibTorch's GroupNorm and a plain SiLU, at the U-Net's 128^3 shapes)
#   worker  workload_bench.sh's medprof rows at 128^3: opt1 opt12 bf16 opt3 bf16+fused, and the
#           kernel mix of opt12 next to opt3 from the worker's own trace
#   peer    the eager peer (opt1 opt12 bf16), then bf16 under torch.compile (compile time printed
#           apart), then the table against the issue's targets and floors
#
# Results accumulate in build-gpu/fused-out/ (ignored, kept between calls on a warm machine) and
# are copied to OUT_DIR (default $OUT) at the end of every call, as fused-out.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
stages=" ${STAGES:-build test worker peer} "
build="${BUILD_DIR:-build-gpu}"
res="$build/fused-out"
mkdir -p "$res"
out="${1:-${OUT:-$res}}"
summary="$res/summary.txt"
say() { echo "$*" | tee -a "$summary"; }
has() { [[ "$stages" == *" $1 "* ]]; }
[ -d .carry ] && export LD_LIBRARY_PATH="$PWD/.carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
presets="${PRESETS:-opt1 opt12 bf16 opt3 bf16+fused}"
rc=0

if has build; then
  t0=$(date +%s)
  { BUILD_DIR="$build" bash bench/gpu/build_worker.sh &&
    cmake -S . -B "$build" -DMEDPROF_BUILD_TESTS=ON &&
    cmake --build "$build" -j "$(nproc)" --target fused_group_norm_test fused_group_norm_bench medprof-worker; } >"$res/build.log" 2>&1
  b=$?
  say "build: exit $b, $(( $(date +%s) - t0 )) s"
  [ $b = 0 ] || { tail -40 "$res/build.log"; rc=1; }
  "$build/bin/medprof-worker" --preset opt3 --describe >"$res/describe-opt3.json" 2>&1
  say "describe opt3: $(python3 -c "import json;j=json.load(open('$res/describe-opt3.json'))['fused_kernels'];print('compiled', j['compiled'], j['unavailable_reason'])" 2>&1)"
fi

if has test && [ $rc = 0 ]; then
  t0=$(date +%s)
  (cd "$build" && ctest -L gpu -R fused_group_norm_test -V) >"$res/test.log" 2>&1
  t=$?
  say "test: exit $t, $(( $(date +%s) - t0 )) s; $(grep -E 'tests passed|tests failed' "$res/test.log")"
  grep -E "forward 32|steps .*mean loss|worst step|FAILED|Failure" "$res/test.log" | tee -a "$summary"
  [ $t = 0 ] || rc=1
  "$build/bin/fused_group_norm_bench" >"$res/kernel_bench.md" 2>&1
  say "kernel micro-benchmark: exit $?"
  tee -a "$summary" <"$res/kernel_bench.md"
fi

if has worker; then
  t0=$(date +%s)
  STAGES=worker SKIP_BUILD=1 PRESETS="$presets" KERNEL_MIX="${KERNEL_MIX:-opt12 opt3}" \
    bash bench/gpu/workload_bench.sh "$res" >"$res/worker.log" 2>&1
  w=$?
  say "worker rows: exit $w, $(( $(date +%s) - t0 )) s"
  grep -E "^== |done:|fused (GroupNorm|upsample|head conv)" "$res/worker.log" | tee -a "$summary"
  [ -f "$res/kernel_mix.md" ] && tee -a "$summary" <"$res/kernel_mix.md"
  [ $w = 0 ] || rc=1
fi

if has peer; then
  t0=$(date +%s)
  STAGES=peer SKIP_BUILD=1 PRESETS="$presets" PEER_COMPILE="${PEER_COMPILE:-bf16}" \
    bash bench/gpu/workload_bench.sh "$res" >"$res/peer.log" 2>&1
  p=$?
  say "peers and table: exit $p, $(( $(date +%s) - t0 )) s"
  [ -f "$res/table.md" ] && tee -a "$summary" <"$res/table.md"
  [ $p = 0 ] || { tail -30 "$res/peer.log"; rc=1; }
fi

if [ "$out" != "$res" ]; then
  mkdir -p "$out"
  tar -czf "$out/fused-out.tar.gz" --exclude='*.pb' -C "$build" fused-out
  cp "$summary" "$out/summary.txt"
fi
exit $rc
