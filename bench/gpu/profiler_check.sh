#!/usr/bin/env bash
# The profiler's acceptance runs on the GPU machine (issue: CUPTI profiling). Stages (STAGES,
# default all, in this order):
#   build     bash bench/gpu/build_worker.sh (skipped with SKIP_BUILD=1)
#   smoke     opt1 train at 64^3 with every layer: which layers ran, and why not
#   overhead  opt1 train at 128^3, trace on/off pairs (OVERHEAD_PAIRS, default 7): trace overhead
#   char      one preset (CHAR_PRESET, default opt1) at 128^3 with --metrics: the whole metric set
#             on the top-20 kernels + phase ranges, worker wall time to its last record
#   ncu       opt1 forward at 128^3 with --metrics, then Nsight Compute (--clock-control none)
#             on the run's top-10 kernels (a narrow regex over whole demangled names, the function
#             names if that missed one) in NCU_STEPS (default 3, the worker's --metrics-launches)
#             measured steps of the same worker with --no-trace; bench/gpu/ncu_compare.py compares
#             the medians of each kernel's launch over those steps (5 % / 2 points)
#   study     baseline, opt1, opt2, opt12 train at 128^3 with --metrics: phase totals
#   legacy    opt1 forward at 128^3 with --metrics through the legacy Profiling API (the V100 path,
#             also served on Hopper) compared with the range profiler's run of stage ncu
#   gputest   the GPU test suite (ctest -L gpu) in the worker's build tree
# Every stage writes <stage>*.{log,pb,jsonl} to OUT_DIR (default $OUT) and a summary line.
#
#   bash bench/gpu/profiler_check.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out="${1:-${OUT:-profiler-out}}"
mkdir -p "$out"
stages="${STAGES:-build smoke overhead char ncu study}"
[ -d .carry ] && export LD_LIBRARY_PATH="$PWD/.carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
worker="${WORKER:-build-gpu/bin/medprof-worker}"
summary="$out/summary.txt"
say() { echo "$*" | tee -a "$summary"; }
has() { [[ " $stages " == *" $1 "* ]]; }

run_worker() {  # name, args...
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$worker" "$@" --out "$out/$name.pb" 2>"$out/$name.log"
  rc=$?
  t1=$(date +%s.%N)
  "$worker" --decode "$out/$name.pb" >"$out/$name.jsonl" 2>>"$out/$name.log"
  say "$name: exit $rc, wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s; $(grep -E 'done:' "$out/$name.log" | sed 's/.*done:/done:/')"
  python3 - "$out/$name.jsonl" <<'PY' | tee -a "$summary"
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    s = m.get("summary")
    if s:
        for l in s.get("layers", []):
            print(f"  layer {l['layer']}: {'ran' if l.get('ran') else 'NOT run'} {l.get('reason', '')}")
        print(f"  trace_overhead_pct {s.get('trace_overhead_pct', 0):.2f}  metrics_wall_ms {s.get('metrics_wall_ms', 0)}  wall_ms {s.get('wall_ms', 0)}")
    e = m.get("error")
    if e:
        print(f"  ERROR {e.get('kind')}: {e.get('message')}")
PY
  return $rc
}

if has build && [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  bash bench/gpu/build_worker.sh >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  say "build: $(( $(date +%s) - t0 )) s"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader | tee -a "$summary"

if has smoke; then
  run_worker smoke --preset opt1 --phase train --grad-accum 1 --volume 64 --steps 3 --warmup 1 --metrics \
    --overhead-pairs 2
fi
if has overhead; then
  run_worker overhead --preset opt1 --phase train --grad-accum 1 --volume 128 --steps 5 --warmup 2 \
    --overhead-pairs "${OVERHEAD_PAIRS:-7}"
  grep -E 'trace overhead' "$out/overhead.log" | tee -a "$summary"
fi
if has char; then
  run_worker char --preset "${CHAR_PRESET:-opt1}" --phase train --grad-accum 1 --volume 128 --steps 3 --warmup 2 \
    --metrics --metrics-top-k 20 --overhead-pairs 2
  grep -E 'metrics layer' "$out/char.log" | tee -a "$summary"
  # Completeness: every top-20 kernel (by trace time) with every metric any kernel has, and the phases.
  python3 - "$out/char.jsonl" <<'PY' | tee -a "$summary"
import json, sys
kernels, metrics = {}, {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    for k in m.get("kernels", {}).get("kernels", []):
        if not k["name"].startswith("["):
            kernels[k["name"]] = kernels.get(k["name"], 0) + int(k.get("total_ns", 0))
    for v in m.get("metrics", {}).get("values", []):
        metrics.setdefault(v.get("scope", ""), set()).add(v["name"])
top = sorted(kernels, key=lambda n: -kernels[n])[:20]
names = set().union(*(metrics.get("kernel:" + n, set()) for n in top)) if top else set()
names = {n for n in names if not n.startswith(("launch.", "pcsamp."))}
short = [n for n in top if not names <= metrics.get("kernel:" + n, set())]
print(f"char: {len(top)} top kernels, {len(names)} metric names, {len(top) - len(short)} with every one")
for n in short:
    print(f"  missing on {n[:80]}: {sorted(names - metrics.get('kernel:' + n, set()))[:8]}")
print("char: phase ranges with counters: " + ", ".join(sorted(s[6:] for s in metrics if s.startswith("phase:") and "sm_cycles" in metrics[s])))
PY
fi
if has ncu; then
  run_worker ncu-medprof --preset opt1 --phase forward --volume 128 --steps 3 --warmup 2 --metrics \
    --metrics-top-k 10 --overhead-pairs 0
  metrics=$(python3 bench/gpu/ncu_compare.py metrics "$out/ncu-medprof.jsonl")
  # As many measured steps as the worker's metrics layer profiles each kernel's launch in
  # (--metrics-launches, default 3): both sides then take the median of the same launch over steps.
  ncu_steps=${NCU_STEPS:-3}
  run_ncu() {  # name-base, regex: ncu over the worker's measured steps -> $out/ncu.csv
    say "ncu kernels ($1 names, $ncu_steps steps): $2"
    local t0 rc
    t0=$(date +%s)
    ncu --clock-control none --cache-control "${NCU_CACHE:-none}" --csv --page raw --print-kernel-base demangled \
      --nvtx --nvtx-include "medprof_measured_step" --kernel-name-base "$1" --kernel-name "$2" --metrics "$metrics" \
      --log-file "$out/ncu.log" \
      "$worker" --preset opt1 --phase forward --volume 128 --steps "$ncu_steps" --warmup 2 --no-trace --no-sampling \
        --overhead-pairs 0 --out "$out/ncu-worker.pb" >"$out/ncu.csv" 2>"$out/ncu-worker.log"
    rc=$?
    # Some ncu versions write the CSV report into --log-file instead of stdout.
    if ! grep -q '^"' "$out/ncu.csv"; then grep '^"' "$out/ncu.log" >"$out/ncu.csv"; fi
    say "ncu: exit $rc, $(( $(date +%s) - t0 )) s, $(grep -c '^"' "$out/ncu.csv") csv lines"
  }
  # First the narrow regex over whole demangled names (only the top kernels' own instantiations);
  # if ncu did not profile every top kernel in every step with it, the function names (every
  # instantiation of each function: ~360 launches per step, ~90 s a step).
  run_ncu demangled "$(python3 bench/gpu/ncu_compare.py regex "$out/ncu-medprof.jsonl" --top 10 --demangled)"
  if ! python3 bench/gpu/ncu_compare.py covered "$out/ncu-medprof.jsonl" "$out/ncu.csv" --top 10 --steps "$ncu_steps" | tee -a "$summary"; then
    mv "$out/ncu.csv" "$out/ncu-narrow.csv"
    run_ncu function "$(python3 bench/gpu/ncu_compare.py regex "$out/ncu-medprof.jsonl" --top 10)"
  fi
  python3 bench/gpu/ncu_compare.py compare "$out/ncu-medprof.jsonl" "$out/ncu.csv" --top 10 --steps "$ncu_steps" | tee "$out/ncu-compare.txt" | tail -3 | tee -a "$summary"
fi
if has study; then
  for p in ${STUDY_PRESETS:-baseline opt1 opt2 opt12}; do
    run_worker "study-$p" --preset "$p" --phase train --grad-accum 1 --volume 128 --steps 2 --warmup 1 --metrics \
      --metrics-top-k 20 --overhead-pairs 0
  done
  python3 - "$out" ${STUDY_PRESETS:-baseline opt1 opt2 opt12} <<'PY' | tee -a "$summary"
import json, sys
out, presets = sys.argv[1], sys.argv[2:]
rows = {}
for p in presets:
    vals = {}
    try:
        for line in open(f"{out}/study-{p}.jsonl"):
            m = json.loads(line)
            for v in m.get("metrics", {}).get("values", []):
                vals[(v["scope"], v["name"])] = v.get("value", 0.0)
    except FileNotFoundError:
        pass
    rows[p] = vals
def tot(p, name):
    return sum(rows[p].get((f"phase:{ph}", name), 0.0) for ph in ("fwd", "bwd"))
def share(p, cats):
    return sum(rows[p].get(("run", f"share.{c}"), 0.0) for c in cats)
print(f"{'preset':9s} {'SM cycles fwd+bwd':>18s} {'warp inst fwd+bwd':>18s} {'tensor% fwd':>11s} {'layout+elem':>11s}")
for p in presets:
    print(f"{p:9s} {tot(p, 'sm_cycles'):18.4g} {tot(p, 'warp_instructions'):18.4g} "
          f"{rows[p].get(('phase:fwd', 'tensor_pipe_pct'), 0.0):11.2f} {share(p, ['layout', 'elementwise']):11.3f}")
PY
fi
if has legacy; then
  run_worker legacy --preset opt1 --phase forward --volume 128 --steps 3 --warmup 2 --metrics \
    --metrics-top-k 10 --overhead-pairs 0 --counter-api legacy
  grep -E 'metrics layer' "$out/legacy.log" | tee -a "$summary"
  python3 bench/gpu/ncu_compare.py runs "$out/legacy.jsonl" "$out/ncu-medprof.jsonl" --top 10 | tee "$out/legacy-compare.txt" | tail -3 | tee -a "$summary"
fi
if has gputest; then
  t0=$(date +%s)
  { cmake -S . -B "${BUILD_DIR:-build-gpu}" -DMEDPROF_BUILD_TESTS=ON &&
    cmake --build "${BUILD_DIR:-build-gpu}" -j "$(nproc)" --target worker_gpu_test medprof-worker &&
    (cd "${BUILD_DIR:-build-gpu}" && ctest -L gpu --output-on-failure); } >"$out/gputest.log" 2>&1
  say "gputest: exit $?, $(( $(date +%s) - t0 )) s; $(grep -E 'tests passed|tests failed' "$out/gputest.log")"
fi
say "done"
