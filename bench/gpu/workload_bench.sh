#!/usr/bin/env bash
# The workload benchmark (issue: Med-DDPM in LibTorch): on the GPU machine, builds the worker,
# runs it at 128^3, batch 1, for every preset — train micro-step (gradient accumulation 1, so
# every step is forward + L1 loss + backward + Adam, the peer's work) and forward — then runs
# the PyTorch eager peer (bench/gpu/meddpm_eager.py, a copy of shared/peer) right after on the
# same GPU, and prints one table: preset, phase, medprof ms, eager ms, ratio, peak GiB of each.
#
#   bash bench/gpu/workload_bench.sh [OUT_DIR]      (default $OUT, else bench-out/)
#
# Environment: PRESETS (default "baseline opt1 opt2 opt12 bf16"), VOLUME (default 128),
# SKIP_BUILD=1 to reuse build-gpu/. Worker logs and results land in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-${OUT:-bench-out}}"
mkdir -p "$out"
presets="${PRESETS:-baseline opt1 opt2 opt12 bf16}"
volume="${VOLUME:-128}"
[ "${SKIP_BUILD:-0}" = 1 ] || bash bench/gpu/build_worker.sh >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"; exit 1; }
[ -d .carry ] && export LD_LIBRARY_PATH="$PWD/.carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
worker=build-gpu/bin/medprof-worker
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader | tee "$out/gpu.txt"
date -u +%Y-%m-%dT%H:%M:%SZ | tee "$out/date.txt"

for p in $presets; do
  case "$p" in baseline|opt2) train_steps=3 ;; *) train_steps=7 ;; esac
  echo "== medprof-worker $p train"
  "$worker" --preset "$p" --phase train --grad-accum 1 --volume "$volume" --steps "$train_steps" --warmup 2 \
    --out "$out/$p-train.pb" 2>"$out/$p-train.log" || { tail -20 "$out/$p-train.log"; exit 1; }
  grep 'done:' "$out/$p-train.log"
  echo "== medprof-worker $p forward"
  "$worker" --preset "$p" --phase forward --volume "$volume" --steps 7 --warmup 2 \
    --out "$out/$p-forward.pb" 2>"$out/$p-forward.log" || { tail -20 "$out/$p-forward.log"; exit 1; }
  grep 'done:' "$out/$p-forward.log"
done

echo "== PyTorch eager peer"
PYTHONUNBUFFERED=1 python3 bench/gpu/meddpm_eager.py --configs "$(echo $presets | tr ' ' ',')" \
  --volume "$volume" --out "$out" | tee "$out/peer.txt"
python3 bench/gpu/bench_table.py "$out" $presets | tee "$out/table.md"
