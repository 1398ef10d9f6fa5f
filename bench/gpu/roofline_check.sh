#!/usr/bin/env bash
# Issue 17 acceptance on the H200 (docs/metrics.md "Roofline"), one device call:
#   1. ceilings: the worker twice under one fresh MEDPROF_CACHE_DIR (a tiny 32^3 forward): the first
#      run measures (under 5 s; DRAM within 15 % of the datasheet; GEMM rates recorded), the second
#      takes them from the cache.
#   2. per case (default opt1:forward opt12:forward, 128^3): the worker with --metrics on the top-10
#      kernels, and Nsight Compute over ONE measured step of the same worker with the raw counters
#      the roofline is made of (--cache-control none --clock-control none and application replay,
#      as agreement.sh: the bytes depend on the cache state the application left, which medprof's
#      one-pass sessions measure in place);
#      roofline_agree.py ncu (FLOPs and DRAM/L2 bytes of the top-10 kernels within 5 %) and conv
#      (the 3x3x3 convolutions' FLOPs within 10 % of 2*N*Cin*Cout*D*H*W*27).
# Everything goes to OUT_DIR; one line per check in OUT_DIR/summary.txt. Also runs
# roofline_metrics.sh (ncu's section files) into OUT_DIR/ncu-roofline-metrics.txt.
#
#   bash bench/gpu/build_worker.sh && bash bench/gpu/roofline_check.sh OUT_DIR [PRESET:PHASE...]
# Environment: WORKER (default build-gpu/bin/medprof-worker), VOLUME (128), TOP (10), CHIP (gh100; ga100
# or gv100 for the counters those chips have), WORKER_TIMEOUT_S (300: a worker or ncu run is stopped after it),
# NCU_REPLAY (application | kernel; env.sh).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$1; shift
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(opt1:forward opt12:forward)
mkdir -p "$out"
source bench/gpu/env.sh
volume=${VOLUME:-128}
top=${TOP:-10}
summary="$out/summary.txt"
limit=${WORKER_TIMEOUT_S:-300}

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

# 2. Work and traffic against ncu, and the analytic convolution check.
metrics=$(python3 bench/gpu/roofline_agree.py metrics --chip "${CHIP:-gh100}")
for spec in "${cases[@]}"; do
  preset=${spec%%:*}; phase=${spec##*:}; c="$preset-$phase"
  accum=(); [ "$phase" = train ] && accum=(--grad-accum 1)
  say "== $c"
  timeout -k 10 "$limit" "$worker" --preset "$preset" --phase "$phase" "${accum[@]}" --volume "$volume" --steps 3 --warmup 2 --metrics \
    --metrics-top-k "$top" --overhead-pairs 0 --out "$out/$c-medprof.pb" 2>"$out/$c-medprof.log"
  say "  medprof: exit $?; $(grep -E 'metrics layer \(.*work' "$out/$c-medprof.log" | head -1 | sed 's/.*metrics layer/metrics layer/')"
  "$worker" --decode "$out/$c-medprof.pb" >"$out/$c-medprof.jsonl"
  regex=$(python3 bench/gpu/ncu_compare.py regex "$out/$c-medprof.jsonl" --top "$top" --demangled)
  timeout -k 10 "$limit" ncu --clock-control none --cache-control none --csv --page raw --print-kernel-base demangled \
    --nvtx --nvtx-include "medprof_measured_step" --kernel-name-base demangled --kernel-name "$regex" \
    --metrics "$metrics" --replay-mode "$ncu_replay" --log-file "$out/$c-ncu.csv.log" \
    "$worker" --preset "$preset" --phase "$phase" "${accum[@]}" --volume "$volume" --steps 1 --warmup 2 \
      --no-trace --no-sampling --overhead-pairs 0 --out "$out/$c-ncu-worker.pb" >"$out/$c-ncu.csv" 2>"$out/$c-ncu-worker.log"
  rc=$?
  grep -q '^"' "$out/$c-ncu.csv" || grep '^"' "$out/$c-ncu.csv.log" >"$out/$c-ncu.csv"
  say "  ncu: exit $rc, $(( $(grep -c '^"' "$out/$c-ncu.csv") - 2 )) launches, $(grep -c '==ERROR==' "$out/$c-ncu.csv.log") errors"
  python3 bench/gpu/roofline_agree.py ncu "$out/$c-medprof.jsonl" "$out/$c-ncu.csv" --top "$top" >"$out/$c-vs-ncu.txt" 2>&1
  say "  vs ncu (exit $?): $(grep '^level' "$out/$c-vs-ncu.txt")"
  python3 bench/gpu/roofline_agree.py conv "$out/$c-medprof.jsonl" --top "$top" >"$out/$c-conv.txt" 2>&1
  say "  conv (exit $?): $(grep '^level' "$out/$c-conv.txt")"
  gzip -f "$out/$c-medprof.jsonl" "$out/$c-ncu.csv"
done
say "done"
