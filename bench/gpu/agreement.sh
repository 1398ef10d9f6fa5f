#!/usr/bin/env bash
# Agreement of the metrics layer with Nsight Compute and between the two counter APIs, per case
# (issue: per-kernel metrics on every configuration). A case is PRESET:PHASE (forward|train; train
# is the micro-step forward + backward + Adam, --grad-accum 1). For each case, at 128^3:
#   1. medprof: the worker with --metrics on the top-10 kernels (range profiler; --steps 3)
#   2. legacy:  the same through the legacy Profiling API (--counter-api legacy)
#   3. ncu:     Nsight Compute (--clock-control none --cache-control none) over ONE measured step
#               of the same worker (--no-trace --no-sampling), every launch of the run's top-10
#               kernels (a narrow regex over whole demangled names). Kernels ncu missed or failed
#               on are profiled again, one ncu run each under --replay-mode application, and that
#               is recorded.
#   4. bench/gpu/ncu_agree.py: (a) per signature, (b) per kernel; medprof vs ncu and legacy vs range.
#   5. with ROOFLINE=1: the same ncu run also reads the roofline's raw counters (roofline_agree.py
#      metrics), and roofline_agree.py compares the top kernels' FLOPs and DRAM/L2 bytes (ncu) and the
#      3x3x3 convolutions' FLOPs with 2*N*Cin*Cout*D*H*W*27 (conv) — issue 17's check on the same runs.
# Everything goes to OUT_DIR/<preset>-<phase>-*; one line per case in OUT_DIR/summary.txt.
#
#   bash bench/gpu/agreement.sh OUT_DIR CASE...      e.g. ... out opt12:forward opt1:train
# Environment: WORKER (default build-gpu/bin/medprof-worker), VOLUME (128), TOP (10), LEGACY (1: also
# run the legacy Profiling API; 0: skip it), WORKER_TIMEOUT_S (300: a worker run is stopped after it), NCU_REPLAY
# (application | kernel: ncu's replay mode for the first run, env.sh says why application is the default),
# ROOFLINE (0; 1: step 5), CHIP (gh100; ga100 or gv100: the roofline counters of those chips).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$1; shift
mkdir -p "$out"
source bench/gpu/env.sh
volume=${VOLUME:-128}
top=${TOP:-10}
summary="$out/summary.txt"
metrics=$(python3 bench/gpu/ncu_compare.py metrics /dev/null)
[ "${ROOFLINE:-0}" = 1 ] && metrics="$metrics,$(python3 bench/gpu/roofline_agree.py metrics --chip "${CHIP:-gh100}")"

run_worker() {  # file-prefix, preset, phase, extra args...
  local name=$1 preset=$2 phase=$3; shift 3
  local accum=() t0 rc
  [ "$phase" = train ] && accum=(--grad-accum 1)
  t0=$(date +%s.%N)
  timeout -k 10 "${WORKER_TIMEOUT_S:-300}" "$worker" --preset "$preset" --phase "$phase" "${accum[@]}" --volume "$volume" --steps 3 --warmup 2 --metrics \
    --metrics-top-k "$top" --overhead-pairs 0 "$@" --out "$out/$name.pb" 2>"$out/$name.log"
  rc=$?
  "$worker" --decode "$out/$name.pb" >"$out/$name.jsonl" 2>>"$out/$name.log"
  local measured measured_rc
  measured=$(python3 bench/gpu/ncu_agree.py count "$out/$name.jsonl"); measured_rc=$?
  say "$name: exit $rc, $(python3 -c "import time; print(f'{time.time()-$t0:.1f}')") s; $measured"
  # A run without metric rows: the worker's own warnings and last lines say why.
  [ "$measured_rc" = 0 ] ||
    { grep -iE 'warn|error|fail' "$out/$name.log" | tail -6; tail -3 "$out/$name.log"; } | cut -c1-300 | sed 's/^/    /' | tee -a "$summary"
}

run_ncu() {  # case, preset, phase, csv, regex, extra ncu args...
  local c=$1 preset=$2 phase=$3 csv=$4 regex=$5; shift 5
  local accum=() t0 rc
  [ "$phase" = train ] && accum=(--grad-accum 1)
  t0=$(date +%s)
  ncu --clock-control none --cache-control none --csv --page raw --print-kernel-base demangled \
    --nvtx --nvtx-include "medprof_measured_step" --kernel-name-base demangled --kernel-name "$regex" \
    --metrics "$metrics" "$@" --log-file "$csv.log" \
    "$worker" --preset "$preset" --phase "$phase" "${accum[@]}" --volume "$volume" --steps 1 --warmup 2 \
      --no-trace --no-sampling --overhead-pairs 0 --out "$out/$c-ncu-worker.pb" >"$csv" 2>"$out/$c-ncu-worker.log"
  rc=$?
  if ! grep -q '^"' "$csv"; then grep '^"' "$csv.log" >"$csv"; fi
  say "  ncu $(basename "$csv"): exit $rc, $(( $(date +%s) - t0 )) s, $(( $(grep -c '^"' "$csv") - 2 )) launches; $(grep -c '==ERROR==' "$csv.log") ncu errors"
  grep '==ERROR==' "$csv.log" | sort | uniq -c | head -5 | sed 's/^/    /' | tee -a "$summary"
}

for spec in "$@"; do
  preset=${spec%%:*}; phase=${spec##*:}; c="$preset-$phase"
  say "== $c"
  run_worker "$c-medprof" "$preset" "$phase"
  [ "${LEGACY:-1}" = 1 ] && run_worker "$c-legacy" "$preset" "$phase" --counter-api legacy
  regex=$(python3 bench/gpu/ncu_compare.py regex "$out/$c-medprof.jsonl" --top "$top" --demangled)
  run_ncu "$c" "$preset" "$phase" "$out/$c-ncu.csv" "$regex" --replay-mode "$ncu_replay"
  csvs="$out/$c-ncu.csv"
  # Kernels with no launch in the export: one ncu run each (its regex only), application replay.
  python3 bench/gpu/ncu_compare.py covered "$out/$c-medprof.jsonl" "$out/$c-ncu.csv" --top "$top" --steps 1 \
    >"$out/$c-covered.txt" 2>&1
  i=0
  while read -r name; do
    i=$((i + 1))
    say "  not covered by the first ncu run, retried alone under application replay: ${name:0:90}"
    one=$(python3 - "$name" <<'PY'
import sys
sys.path.insert(0, "bench/gpu")
from ncu_compare import demangled_pattern
print("regex:" + demangled_pattern(sys.argv[1]))
PY
)
    run_ncu "$c" "$preset" "$phase" "$out/$c-ncu-app$i.csv" "$one" --replay-mode application
    csvs="$csvs,$out/$c-ncu-app$i.csv"
  done < <(python3 - "$out/$c-medprof.jsonl" "$out/$c-ncu.csv" "$top" <<'PY'
import sys
sys.path.insert(0, "bench/gpu")
import ncu_agree
run = ncu_agree.load_run(sys.argv[1])
have = {k for (k, _, _, _) in ncu_agree.load_ncu(sys.argv[2])} if open(sys.argv[2]).read().count('"') else set()
for name in run["top"][: int(sys.argv[3])]:
    if ncu_agree.norm(name) not in have:
        print(name)
PY
)
  python3 bench/gpu/ncu_agree.py ncu "$out/$c-medprof.jsonl" "$csvs" --top "$top" >"$out/$c-vs-ncu.txt" 2>&1
  say "  vs ncu (exit $?): $(grep -E '^level' "$out/$c-vs-ncu.txt" | tr '\n' ' ')"
  if [ "${ROOFLINE:-0}" = 1 ]; then
    python3 bench/gpu/roofline_agree.py ncu "$out/$c-medprof.jsonl" "$csvs" --top "$top" >"$out/$c-roofline-vs-ncu.txt" 2>&1
    say "  roofline vs ncu (exit $?): $(grep '^level' "$out/$c-roofline-vs-ncu.txt")"
    python3 bench/gpu/roofline_agree.py conv "$out/$c-medprof.jsonl" --top "$top" >"$out/$c-conv.txt" 2>&1
    say "  conv (exit $?): $(grep '^level' "$out/$c-conv.txt")"
  fi
  [ -s "$out/$c-legacy.jsonl" ] || { say "  legacy: no decoded run (LEGACY=${LEGACY:-1}; $c-legacy.log says why when it ran)"; continue; }
  python3 bench/gpu/ncu_agree.py runs "$out/$c-legacy.jsonl" "$out/$c-medprof.jsonl" --top "$top" \
    >"$out/$c-legacy-vs-range.txt" 2>&1
  say "  legacy vs range (exit $?): $(grep -E '^level' "$out/$c-legacy-vs-range.txt" | tr '\n' ' ')"
done
say "done"
