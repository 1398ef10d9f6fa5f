#!/usr/bin/env bash
# The whole system on one GPU node, on loopback (issue 6, "A GPU-node path"): builds
# medprof-worker there (bench/gpu/build_worker.sh, PyTorch's own libtorch), starts the bundled
# medprof-server (a fresh SQLite file) and medprof-agent (scripts/bundle.sh made both on Debian),
# submits baseline, opt1, opt2, opt12 and bf16 at 128^3 through the medprof CLI (train micro-step,
# gradient accumulation 1), follows the study with `medprof watch`, and writes to OUT_DIR:
#
#   command.txt   the exact command line, options, git commit, host, GPU, date
#   run.log       this script's own output (the watch lines, the compare table, the checks)
#   compare.json  `medprof compare STUDY --format json`
#   runs.json     `medprof run RUN --format json` for every run of the study (environment,
#                 effective config, summary with the profiler layers; the per-kernel, per-op,
#                 per-step and metric lists are replaced by their counts: they are in the DB)
#   report.html   `medprof report` when the CLI has it
#   medprof.db    the server's SQLite database (one file: a backup taken after the server
#                 stopped; medprof.db.gz instead when it is over 15 MiB)
#   logs.txt      the server's, the agent's and every worker's log (tails)
#   build.log     the worker build (absent with --worker)
#
# Nothing else is written there (flat names; at most 8 files, what a device call returns).
# Exit status: 0 when every run completed, 1 on a usage or setup error, 3 when a run failed.
#
#   scripts/gpu-node-run.sh [options] OUT_DIR
#
#   --presets LIST   presets to submit (default baseline,opt1,opt2,opt12,bf16)
#   --volume N       cubic volume edge (default 128)
#   --steps N        measured train steps per preset (default 5)
#   --warmup N       warm-up steps (default 2)
#   --tiny           a tiny model (16^3, width 8, attention at 8^3, 1 CPU thread, 2 steps after 1
#                    warm-up): the CPU check of this script (tests/deploy) and a GPU smoke test
#   --worker PATH    use this medprof-worker instead of building one (skips build_worker.sh)
#   --bundle DIR     the bundle of scripts/bundle.sh (default .carry/bundle)
#   --metrics        also run the metrics layer (range profiler) in every run
#   --metrics-top-k N  kernels the metrics layer profiles per run (default: the worker's, 20)
#   --model FILE     profile a TorchScript user model instead of Med-DDPM (issue 21): the CLI
#                    uploads it once, the agent fetches it into its cache, every run loads it
#                    (make examples with workloads/examples/make_denoisers.py --out DIR)
#   --deadline-s N   the whole script's budget in seconds (default 560, inside a 10-minute
#                    device call): the study is cancelled when its share runs out, and the
#                    outputs are still written
#
# On the H200 machine, from the repository root, with .carry/ (scripts/make-carry.sh, then
# scripts/bundle.sh) carried along:   bash scripts/gpu-node-run.sh "$OUT"
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
presets="baseline,opt1,opt2,opt12,bf16"
volume=128 steps=5 warmup=2 tiny=0 worker="" bundle="${root}/.carry/bundle" deadline_s=560 metrics=0 top_k="" user_model=""
argv_text="$0 $*"
usage() { echo "usage: gpu-node-run.sh [--presets LIST] [--volume N] [--steps N] [--warmup N] [--tiny] [--metrics [--metrics-top-k N]] [--model FILE] [--worker PATH] [--bundle DIR] [--deadline-s N] OUT_DIR" >&2; exit 1; }
out=""
volume_set=0 steps_set=0 warmup_set=0
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets="$2"; shift 2 ;;
    --volume) volume="$2"; volume_set=1; shift 2 ;;
    --steps) steps="$2"; steps_set=1; shift 2 ;;
    --warmup) warmup="$2"; warmup_set=1; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --worker) worker="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --deadline-s) deadline_s="$2"; shift 2 ;;
    --metrics) metrics=1; shift ;;
    --metrics-top-k) top_k="$2"; shift 2 ;;
    --model) user_model="$2"; shift 2 ;;
    -h|--help) sed -n '2,43p' "$0"; exit 0 ;;
    -*) echo "gpu-node-run.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "${out}" ] || { echo "gpu-node-run.sh: one OUT_DIR only (got '${out}' and '$1')" >&2; usage; }
       out="$1"; shift ;;
  esac
done
[ -n "${out}" ] || usage
model_flags=()
[ "${metrics}" = 1 ] && model_flags+=(--metrics)
if [ -n "${top_k}" ]; then
  [ "${metrics}" = 1 ] || { echo "gpu-node-run.sh: --metrics-top-k needs --metrics" >&2; exit 1; }
  model_flags+=(--metrics-top-k "${top_k}")  # the CLI validates the range
fi
if [ -n "${user_model}" ]; then
  [ -f "${user_model}" ] || { echo "gpu-node-run.sh: --model ${user_model}: no such file" >&2; exit 1; }
  model_flags+=(--model "${user_model}")
fi
if [ "${tiny}" = 1 ]; then
  [ "${volume_set}" = 1 ] || volume=16
  [ "${steps_set}" = 1 ] || steps=2
  [ "${warmup_set}" = 1 ] || warmup=1
  # Med-DDPM's shape, smaller; a user model has its own.
  [ -n "${user_model}" ] || model_flags+=(--base-channels 8 --channel-mult "1,2" --attention-ds 2)
  model_flags+=(--cpu-threads 1)
fi
# (modes may not survive the copy to the GPU machine)
chmod +x "${bundle}"/bin/* "${bundle}"/libexec/* 2>/dev/null || true
for b in medprof-server medprof-agent medprof host-exec; do
  [ -x "${bundle}/bin/${b}" ] || {
    echo "gpu-node-run.sh: ${bundle}/bin/${b} is missing: run scripts/bundle.sh on the Debian machine and carry .carry" >&2
    exit 1; }
done

mkdir -p "${out}"
out="$(cd "${out}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/medprof-gpu-node.XXXXXX")"
exec 3>&1 4>&2
exec > >(tee "${out}/run.log") 2>&1
tee_pid=$!
log() { echo "== $(date -u +%H:%M:%S) $*"; }

pids=()
# Whatever happens, the agent and server stop (agent first), and the database and the logs
# land in OUT_DIR before the scratch dir goes.
cleanup() {
  local rc=$?
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  pids=()
  if [ -f "${work}/medprof.db" ]; then
    # One file: SQLite's online backup folds the WAL in (a plain copy if Python lacks sqlite3).
    python3 -c 'import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); s.backup(d); d.close(); s.close()' \
      "${work}/medprof.db" "${out}/medprof.db" 2>/dev/null || cp "${work}/medprof.db" "${out}/medprof.db"
    # A device call returns files of at most 16 MiB.
    if [ "$(stat -c %s "${out}/medprof.db")" -gt $((15 * 1024 * 1024)) ]; then
      gzip -9 -f "${out}/medprof.db"
    fi
  fi
  {
    for f in "${work}/server.log" "${work}/agent.log"; do
      [ -f "${f}" ] || continue
      echo "===== $(basename "${f}") (last 400 lines)"
      tail -n 400 "${f}"
    done
    find "${work}/agent" -type f -name 'worker.stderr' 2>/dev/null | sort | while read -r f; do
      echo "===== ${f#"${work}"/} (last 200 lines)"
      tail -n 200 "${f}"
    done
  } >"${out}/logs.txt"
  rm -rf "${work}"
  ls -l "${out}"
  if [ "${rc}" -eq 0 ]; then
    log "done: every run completed; results in ${out}"
  else
    log "done with failures (exit ${rc}); results and logs in ${out}"
  fi
  # Let tee write the last lines of run.log before the script ends.
  exec 1>&3 2>&4
  wait "${tee_pid}" 2>/dev/null || true
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- command.txt
{
  echo "command: ${argv_text}"
  echo "cwd: $(pwd)"
  echo "git: $(git -C "${root}" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "${root}" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname) ($(. /etc/os-release && echo "${PRETTY_NAME}"))"
  echo "presets: ${presets}; volume ${volume}^3; train; grad-accum 1; steps ${steps}; warmup ${warmup}; model flags: ${model_flags[*]:-(defaults)}"
  echo "bundle: $(head -n 2 "${bundle}/BUNDLE.txt" 2>/dev/null | tr '\n' ' ')"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv,noheader 2>&1 | head -n 4 | tr '\n' ';')"
  else
    echo "gpu: none (no nvidia-smi)"
  fi
} >"${out}/command.txt"
cat "${out}/command.txt"

# ---------------------------------------------------------------- the worker
host_ldlp="${LD_LIBRARY_PATH:-}"
if [ -z "${worker}" ]; then
  log "building medprof-worker (bench/gpu/build_worker.sh; log in build.log)"
  start=${SECONDS}
  if ! bash "${root}/bench/gpu/build_worker.sh" >"${out}/build.log" 2>&1; then
    tail -n 40 "${out}/build.log"
    echo "gpu-node-run.sh: the worker build failed (build.log)" >&2
    exit 1
  fi
  log "worker built in $((SECONDS - start)) s"
  build_dir="${BUILD_DIR:-build-gpu}"
  case "${build_dir}" in /*) ;; *) build_dir="${root}/${build_dir}" ;; esac
  worker="${build_dir}/bin/medprof-worker"
fi
# build_worker.sh's worker links Debian's Abseil from .carry. Its RUNPATH covers only its direct
# dependencies (libabsl_spinlock_wait, a dependency of a dependency, is not found through it), so
# the directory goes on the worker's LD_LIBRARY_PATH whether the worker was built here or given.
[ -d "${root}/.carry/usr/lib/x86_64-linux-gnu" ] &&
  host_ldlp="${root}/.carry/usr/lib/x86_64-linux-gnu${host_ldlp:+:${host_ldlp}}"
worker="$(cd "$(dirname "${worker}")" && pwd)/$(basename "${worker}")"
[ -x "${worker}" ] || { echo "gpu-node-run.sh: ${worker} is not an executable" >&2; exit 1; }
# The agent runs with the bundle's (Debian's) libraries; the worker it starts must not: the shim
# restores the host's LD_LIBRARY_PATH (bundle/bin/host-exec) and execs the real worker.
shim="${work}/bin/medprof-worker"
mkdir -p "${work}/bin"
printf '#!/usr/bin/env bash\nexec %q %q "$@"\n' "${bundle}/bin/host-exec" "${worker}" >"${shim}"
chmod 0755 "${shim}"
export MEDPROF_HOST_LD_LIBRARY_PATH="${host_ldlp}"
log "worker: $(LD_LIBRARY_PATH="${host_ldlp}" "${worker}" --version 2>&1 | head -n 1)"

# ---------------------------------------------------------------- server and agent
log "starting medprof-server (SQLite in the scratch dir ${work})"
"${bundle}/bin/medprof-server" --db "${work}/medprof.db" --listen 127.0.0.1:0 2>"${work}/server.log" &
pids+=($!)
port=""
for _ in $(seq 1 200); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "${work}/server.log" | head -n 1 | sed 's/.*://') || true
  [ -n "${port}" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.1
done
[ -n "${port}" ] || { echo "gpu-node-run.sh: the server did not start; its log:" >&2; cat "${work}/server.log" >&2; exit 1; }
export MEDPROF_SERVER="127.0.0.1:${port}"
cli() { "${bundle}/bin/medprof" "$@"; }

log "starting medprof-agent (server ${MEDPROF_SERVER})"
"${bundle}/bin/medprof-agent" --server "${MEDPROF_SERVER}" --work-dir "${work}/agent" --name gpu-node \
  --site gpu-node --worker "${shim}" 2>"${work}/agent.log" &
pids+=($!)
agent_ok=0
for _ in $(seq 1 300); do
  if cli agents 2>/dev/null | grep -q gpu-node; then agent_ok=1; break; fi
  kill -0 "${pids[1]}" 2>/dev/null || break
  sleep 0.1
done
[ "${agent_ok}" = 1 ] || { echo "gpu-node-run.sh: the agent did not register; its log:" >&2; cat "${work}/agent.log" >&2; exit 1; }
cli agents

# ---------------------------------------------------------------- the study
log "submitting ${presets} at ${volume}^3 (train, grad-accum 1, ${steps} steps after ${warmup} warm-up)"
cli submit --presets "${presets}" --volume "${volume}" --phase train --grad-accum 1 --steps "${steps}" \
  --warmup "${warmup}" "${model_flags[@]}" --name "gpu-node ${volume}" --format json >"${work}/submit.json"
study=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["study_id"])' "${work}/submit.json")
# What is left of the budget, less 40 s for the compare, the report and the database copy.
timeout_s=$((deadline_s - SECONDS - 40))
[ "${timeout_s}" -ge 60 ] || timeout_s=60
log "study ${study}; following it (medprof watch, at most ${timeout_s} s)"
set +e
timeout "${timeout_s}" "${bundle}/bin/medprof" watch "${study}"
watch_rc=$?
set -e
log "watch ended with exit status ${watch_rc}"

rc=0
if [ "${watch_rc}" -ne 0 ]; then
  rc=3
  [ "${watch_rc}" = 124 ] && { echo "gpu-node-run.sh: the study did not end within ${timeout_s} s; cancelling it" >&2; cli cancel "${study}" --reason "gpu-node-run.sh timeout" || true; }
fi
cli compare "${study}" || rc=3
cli compare "${study}" --format json >"${out}/compare.json" || rc=3
cli runs --study "${study}" --format json >"${work}/runs-list.json" || rc=3
python3 - "${work}/runs-list.json" >"${work}/run-ids.txt" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = doc.get("runs", doc) if isinstance(doc, dict) else doc
for r in runs:
    print(r.get("run_id") or r.get("runId"))
EOF
{
  echo "["
  first=1
  while read -r id; do
    [ -n "${id}" ] || continue
    [ "${first}" = 1 ] || echo ","
    first=0
    cli run "${id}" --format json
  done <"${work}/run-ids.txt"
  echo "]"
} >"${work}/runs-full.json" || rc=3
python3 - "${work}/runs-full.json" "${out}/runs.json" <<'EOF' || rc=3
import json, sys
runs = json.load(open(sys.argv[1]))
for r in runs:
    for key in ("kernels", "ops", "steps", "metrics"):
        if key in r:
            r[key + "_count"] = len(r.pop(key))
json.dump(runs, open(sys.argv[2], "w"), indent=1)
EOF

if cli --help 2>&1 | grep -qE '^ *report( |$)'; then
  log "writing report.html (medprof report)"
  report_help="$(cli report --help 2>&1 || true)"
  if grep -q -- '--output' <<<"${report_help}"; then
    cli report "${study}" --output "${out}/report.html" || rc=3
  elif grep -q -- '--out ' <<<"${report_help}"; then
    cli report "${study}" --out "${out}/report.html" || rc=3
  else
    cli report "${study}" >"${out}/report.html" || rc=3
  fi
else
  log "this medprof has no 'report' command; no report.html"
fi

# ---------------------------------------------------------------- the checks
python3 - "${out}/runs.json" "${presets}" <<'EOF' || rc=3
import json, sys
runs = json.load(open(sys.argv[1]))
wanted = sys.argv[2].split(",")
by = {}
bad = []
for doc in runs:
    run = doc.get("run", doc)
    cfg = run.get("config") or run.get("effective") or {}
    preset = run.get("preset") or cfg.get("preset") or "?"
    state = str(run.get("state", "?"))
    summary = doc.get("summary") or run.get("summary") or {}
    layers = summary.get("layers") or doc.get("layers") or []
    median = summary.get("step_ms_median") or summary.get("stepMsMedian")
    by[preset] = median
    print(f"run {run.get('run_id', '?')}: {preset:9s} {state:24s} median step "
          f"{median if median is not None else '-'} ms; layers: "
          + (", ".join(f"{l.get('layer', l.get('name', '?'))}={'on' if l.get('ran') or l.get('enabled') else 'off'}"
                       + (f" ({l.get('reason')[:70]})" if l.get('reason') else "") for l in layers) or "none recorded"))
    if not state.upper().endswith(("SUCCEEDED", "COMPLETED")):
        bad.append(f"{preset} ended {state}")
    if not layers:
        bad.append(f"{preset}: no profiler layers recorded")
for p in wanted:
    if p not in by:
        bad.append(f"{p}: no run")
def check(text, ok):
    print(f"check: {text}: {'yes' if ok else 'NO'}")
b, o1, o2 = by.get("baseline"), by.get("opt1"), by.get("opt2")
if b and o1:
    check(f"opt1 faster than baseline ({o1:.1f} < {b:.1f} ms)", o1 < b)
if o1 and o2:
    check(f"opt2 slower than opt1 ({o2:.1f} > {o1:.1f} ms)", o2 > o1)
for line in bad:
    print("FAILED:", line)
sys.exit(1 if bad else 0)
EOF

exit "${rc}"
