#!/usr/bin/env bash
# Where the legacy Profiling API stops on a train step (issue: per-kernel metrics, point 4): runs
# the worker's metrics layer through --counter-api legacy on one train micro-step case with debug
# logs (each profiled launch, its correlation id and the launching thread), and if the worker is
# still running after STALL_S seconds, records every thread's stack (gdb if present, else
# /proc/PID/task/*/{comm,wchan,stack}) before stopping it.
#
#   bash bench/gpu/legacy_train_probe.sh OUT_DIR [PRESET] [extra worker args...]
# Environment: WORKER (default build-gpu/bin/medprof-worker), STALL_S (60), VOLUME (128).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=$1; preset=${2:-opt1}; shift; [ $# -gt 0 ] && shift
mkdir -p "$out"
source bench/gpu/env.sh
log="$out/$preset-train-legacy-probe.log"
"$worker" --preset "$preset" --phase train --grad-accum 1 --volume "${VOLUME:-128}" --steps 3 --warmup 2 \
  --metrics --metrics-top-k 10 --overhead-pairs 0 --counter-api legacy --log-level debug "$@" \
  --out "$out/$preset-train-legacy-probe.pb" 2>"$log" &
pid=$!
t0=$(date +%s)
while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt "${STALL_S:-60}" ]; do sleep 1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "probe: worker still running after ${STALL_S:-60} s; last profiled launches:"
  grep -E 'metrics layer: profil' "$log" | tail -4
  stacks="$out/$preset-train-legacy-stacks.txt"
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$pid" -batch -ex 'set pagination off' -ex 'thread apply all bt 30' >"$stacks" 2>&1
  else
    for t in /proc/"$pid"/task/*; do
      echo "== $(basename "$t") $(cat "$t/comm") wchan=$(cat "$t/wchan" 2>/dev/null)"
      cat "$t/stack" 2>/dev/null
    done >"$stacks"
  fi
  echo "probe: stacks in $stacks ($(wc -l <"$stacks") lines)"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  echo "probe: exit killed after $(( $(date +%s) - t0 )) s"
else
  wait "$pid"; rc=$?
  echo "probe: worker exit $rc after $(( $(date +%s) - t0 )) s"
  grep -E 'metrics layer: [0-9]+ kernels|metrics layer \(legacy' "$log" | tail -8
fi
