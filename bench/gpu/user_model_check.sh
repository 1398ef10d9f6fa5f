#!/usr/bin/env bash
# Issue 21's H200 acceptance: Med-DDPM exported to TorchScript from the PyTorch peer
# (bench/gpu/meddpm_eager.py) and run by medprof-worker as a user model (--model FILE) at 128^3,
# next to the built-in Med-DDPM workload, under opt1 and opt12: step times within 10 % and the
# kernel mix within 5 points per category. One device call (~8 min on an H200):
#
#   bash bench/gpu/user_model_check.sh            # results in $OUT (or build-gpu/user-model-out)
#
# Stages (STAGES, default all): build (build_worker.sh: worker alone, PyTorch's libtorch), export
# (the traced peer, 40,226,433 parameters; checked at a second volume), describe (the dry run,
# what each preset did to the module), runs (train micro-steps, grad-accum 1, built-in and user
# model per preset, alternating), compare (user_model_compare.py: table + PASS/FAIL per preset).
# Environment: PRESETS (default "opt1 opt12"), VOLUME (128), STEPS (7), WARMUP (3: TorchScript's
# profiling executor optimises the graph after its first calls).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
stages=" ${STAGES:-build export describe runs compare} "
build="${BUILD_DIR:-build-gpu}"
res="$build/user-model-out"
mkdir -p "$res"
out="${1:-${OUT:-$res}}"
presets="${PRESETS:-opt1 opt12}"
volume="${VOLUME:-128}"
steps="${STEPS:-7}"
warmup="${WARMUP:-3}"
model="$res/meddpm_traced.pt"
worker="$build/bin/medprof-worker"
summary="$res/summary.txt"
say() { echo "$*" | tee -a "$summary"; }
has() { [[ "$stages" == *" $1 "* ]]; }
[ -d .carry ] && export LD_LIBRARY_PATH="$PWD/.carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader | tee -a "$summary"

if has build; then
  t0=$(date +%s)
  BUILD_DIR="$build" bash bench/gpu/build_worker.sh >"$res/build.log" 2>&1 || { tail -40 "$res/build.log"; exit 1; }
  say "build: $(( $(date +%s) - t0 )) s"
fi

if has export; then
  python3 bench/gpu/export_meddpm_torchscript.py --out "$model" 2>"$res/export.err" | tee -a "$summary" ||
    { tail -20 "$res/export.err"; exit 1; }
fi

if has describe; then
  for p in $presets; do
    "$worker" --preset "$p" --model "$model" --volume "$volume" --phase train --grad-accum 1 --describe \
      >"$res/describe-$p.json" 2>"$res/describe-$p.err" || { tail -20 "$res/describe-$p.err"; rc=1; continue; }
    say "describe $p: $(python3 -c "import json;j=json.load(open('$res/describe-$p.json'));print(j['parameters'],'parameters;',j['dry_run']['output'],j['dry_run']['output_dtype'],'| applied:',j['applied']['note'],'| estimated peak',round(j['estimated_peak_memory_gib'],1),'GiB')")"
  done
fi

if has runs; then
  for p in $presets; do
    for kind in builtin user; do
      flags=(--preset "$p" --phase train --grad-accum 1 --volume "$volume" --steps "$steps" --warmup "$warmup")
      [ "$kind" = user ] && flags+=(--model "$model")
      t0=$(date +%s)
      "$worker" "${flags[@]}" --out "$res/$kind-$p.pb" 2>"$res/$kind-$p.log" || { tail -20 "$res/$kind-$p.log"; rc=1; continue; }
      "$worker" --decode "$res/$kind-$p.pb" >"$res/$kind-$p.jsonl"
      say "$kind $p: $(( $(date +%s) - t0 )) s; $(grep -m1 'done:' "$res/$kind-$p.log")"
    done
  done
fi

if has compare && [ $rc = 0 ]; then
  # shellcheck disable=SC2086  # the preset list is meant to split into arguments
  python3 bench/gpu/user_model_compare.py "$res" $presets | tee "$res/compare.md" | tee -a "$summary"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi

if [ "$out" != "$res" ]; then
  mkdir -p "$out"
  tar -czf "$out/user-model-out.tar.gz" --exclude='*.pb' --exclude='*.pt' -C "$build" user-model-out
  cp "$summary" "$out/summary.txt"
fi
exit $rc
