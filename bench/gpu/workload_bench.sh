#!/usr/bin/env bash
# The workload benchmark (issue: Med-DDPM in LibTorch): on the GPU machine, builds the worker,
# runs it at 128^3, batch 1, for every preset — train micro-step (gradient accumulation 1, so
# every step is forward + L1 loss + backward + Adam, the peer's work) and forward — then runs
# the PyTorch eager peer (bench/gpu/meddpm_eager.py, a copy of shared/peer) right after on the
# same GPU, and prints one table: preset, phase, medprof ms, eager ms, ratio, peak GiB of each.
#
#   bash bench/gpu/workload_bench.sh [OUT_DIR]      (default $OUT, else bench-out/)
#
# Environment: PRESETS (default "baseline opt1 opt2 opt12 bf16"; a token PRESET+fused runs
# `--preset PRESET --fused`, e.g. bf16+fused; +notrace adds --no-trace: the CUPTI trace layer off,
# as the peers run, e.g. opt3+notrace), VOLUME (default 128), SKIP_BUILD=1 to reuse
# build-gpu/, PEER_COMPILE (peer configurations to run again under torch.compile after the eager
# peer, e.g. "bf16"; each compiles for about 140 s, printed apart), KERNEL_MIX (tokens whose
# train runs get a kernel-mix table from the worker's own trace, e.g. "opt12 opt3").
# STAGES (default "worker peer"): "worker" runs medprof's rows, "peer" the peers and the table,
# so a caller can split the two across device calls on the same machine (10-minute cap).
# Worker logs and results land in OUT_DIR.
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

stages=" ${STAGES:-worker peer} "
[[ "$stages" == *" worker "* ]] && for p in $presets; do
  case "$p" in baseline|opt2) train_steps=3 ;; *) train_steps=7 ;; esac
  flags=(--preset "${p%%+*}")
  [[ "$p" == *+fused* ]] && flags+=(--fused)
  [[ "$p" == *+notrace* ]] && flags+=(--no-trace)
  echo "== medprof-worker ${flags[*]} train"
  "$worker" "${flags[@]}" --phase train --grad-accum 1 --volume "$volume" --steps "$train_steps" --warmup 2 \
    --out "$out/$p-train.pb" 2>"$out/$p-train.log" || { tail -20 "$out/$p-train.log"; exit 1; }
  grep 'done:' "$out/$p-train.log"
  echo "== medprof-worker ${flags[*]} forward"
  "$worker" "${flags[@]}" --phase forward --volume "$volume" --steps 7 --warmup 2 \
    --out "$out/$p-forward.pb" 2>"$out/$p-forward.log" || { tail -20 "$out/$p-forward.log"; exit 1; }
  grep 'done:' "$out/$p-forward.log"
done

if [[ "$stages" == *" worker "* ]] && [ -n "${KERNEL_MIX:-}" ]; then
  jsonl=()
  for p in ${KERNEL_MIX}; do
    "$worker" --decode "$out/$p-train.pb" >"$out/$p-train.jsonl"
    jsonl+=("$out/$p-train.jsonl")
  done
  echo; echo "kernel mix, train micro-step (the worker's CUPTI trace):"
  python3 bench/gpu/kernel_mix.py "${jsonl[@]}" | tee "$out/kernel_mix.md"
fi

[[ "$stages" == *" peer "* ]] || exit 0
# The peer knows the study's presets and bf16; opt3 and the +fused rows are compared with its
# bf16 (eager and compiled) in the table.
peer_cfgs=$(for p in $presets; do case "$p" in baseline|opt1|opt2|opt12|bf16) echo "$p" ;; esac; done | sort -u | paste -sd,)
[ -n "$peer_cfgs" ] || peer_cfgs=bf16
echo "== PyTorch eager peer ($peer_cfgs)"
PYTHONUNBUFFERED=1 python3 bench/gpu/meddpm_eager.py --configs "$peer_cfgs" \
  --volume "$volume" --out "$out" | tee "$out/peer.txt"
if [ -n "${PEER_COMPILE:-}" ]; then
  echo "== PyTorch peer under torch.compile (${PEER_COMPILE}); first_call_s is the compile time"
  PYTHONUNBUFFERED=1 python3 bench/gpu/meddpm_eager.py --configs "$(echo "${PEER_COMPILE}" | tr ' ' ',')" \
    --volume "$volume" --compile | tee -a "$out/peer.txt"
fi
# shellcheck disable=SC2086  # the preset list is meant to split into arguments
python3 bench/gpu/bench_table.py "$out" $presets | tee "$out/table.md"
