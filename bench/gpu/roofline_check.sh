#!/usr/bin/env bash
# Issue 17 acceptance on the H200 (docs/metrics.md "Roofline"), one device call:
#   1. ceilings: the worker twice under one fresh MEDPROF_CACHE_DIR (a tiny 32^3 forward): the first
#      run measures (under 5 s; DRAM within 15 % of the datasheet; GEMM rates recorded), the second
#      takes them from the cache.
#   2. per case (default opt1:forward opt12:forward, 128^3): agreement.sh with ROOFLINE=1 — the worker
#      with --metrics on the top-10 kernels, Nsight Compute over ONE measured step of the same worker
#      with the core and the roofline's raw counters (application replay: the bytes depend on the
#      cache state the application left, which medprof's one-pass sessions measure in place);
#      roofline_agree.py ncu (FLOPs and DRAM/L2 bytes of the top-10 kernels within 5 %, per signature on
#      the same launches and per kernel over the step) and conv
#      (the 3x3x3 convolutions' FLOPs within 10 % of 2*N*Cin*Cout*D*H*W*27), beside the per-kernel
#      agreement of the core metrics.
# Everything goes to OUT_DIR; one line per check in OUT_DIR/summary.txt. Also runs
# roofline_metrics.sh (ncu's section files) into OUT_DIR/ncu-roofline-metrics.txt.
#
#   bash bench/gpu/build_worker.sh && bash bench/gpu/roofline_check.sh OUT_DIR [PRESET:PHASE...]
# Environment: as agreement.sh (WORKER, VOLUME, TOP, CHIP, WORKER_TIMEOUT_S, NCU_REPLAY); LEGACY defaults to
# 0 here (1: the legacy Profiling API's run too).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$1; shift
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(opt1:forward opt12:forward)
mkdir -p "$out"
source bench/gpu/env.sh
summary="$out/summary.txt"

bash bench/gpu/roofline_metrics.sh "$out/ncu-roofline-metrics.txt" >/dev/null 2>&1

# 1. Ceilings, measured then cached.
cache=$(mktemp -d)
for i in 1 2; do
  MEDPROF_CACHE_DIR="$cache" "$worker" --preset opt1 --phase forward --volume 32 --base-channels 8 --steps 1 \
    --warmup 1 --overhead-pairs 0 --no-sampling --out "$out/ceilings-$i.pb" 2>"$out/ceilings-$i.log"
  "$worker" --decode "$out/ceilings-$i.pb" >"$out/ceilings-$i.jsonl"
done
python3 bench/gpu/roofline_agree.py ceilings "$out/ceilings-1.jsonl" "$out/ceilings-2.jsonl" >"$out/ceilings.txt" 2>&1
say "ceilings (exit $?): $(grep -E 'measurement|dram|second run' "$out/ceilings.txt" | tr -s ' ' | tr '\n' ';')"
rm -rf "$cache"

# 2. Work and traffic against ncu, and the analytic convolution check: agreement.sh's runs with the
#    roofline counters in its ncu run (one definition of the worker and ncu command lines).
ROOFLINE=1 LEGACY=${LEGACY:-0} bash bench/gpu/agreement.sh "$out" "${cases[@]}"
