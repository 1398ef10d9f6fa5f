#!/usr/bin/env bash
# Issue 9 on a machine with 2 or more GPUs, in one device call: one medprof-agent drives every
# GPU. Like scripts/gpu-node-run.sh it runs the bundled medprof-server (a fresh SQLite file) and
# medprof-agent on loopback with a medprof-worker built there (bench/gpu/build_worker.sh) or
# given (--worker), submits through the medprof CLI, and samples every GPU's utilization
# through NVML (nvidia-smi -lms 500) the whole time. Three studies of the presets x N repeats
# (4 x N jobs, train micro-step, gradient accumulation 1, one attempt each):
#
#   all   the agent sees the N GPUs, --max-jobs N: the time T_N, the utilization, the pinning
#   kill  the same agent; once N workers run, one worker process is SIGKILLed (short runs)
#   one   an agent restricted to GPU 0 (CUDA_VISIBLE_DEVICES=0, --max-jobs 1): the time T_1;
#         run last with what is left of the budget — cut at the deadline, its time so far is a
#         lower bound of T_1, which still proves T_N <= 1.2 x T_1 / N when it holds
#
# Acceptance points (bench/gpu/multi_gpu_summary.py prints PASS, FAIL, SKIPPED or INCONCLUSIVE;
# bench/gpu/multi_gpu_summary_test.py checks its verdicts on made-up 2-GPU inputs):
#   1 one agent registers every GPU (its devices' UUIDs = nvidia-smi's)
#   2 every job of the all-GPU and one-GPU studies succeeded
#   3 each run's stored environment: CUDA_VISIBLE_DEVICES one index whose nvidia-smi UUID is the
#     run's gpu_uuid (results per GPU, no mix-up); N distinct UUIDs in the all-GPU study
#   4 one worker per GPU at a time, N at once: the agent's worker processes, listed every 0.2 s
#     during the all-GPU study, never share a CUDA_VISIBLE_DEVICES and number N at the peak
#   5 every GPU's utilization > 80 % in >= 70 % of the NVML samples between the all-GPU study's
#     submit and its last run's end
#   6 T_N <= 1.2 x T_1 / N (wall time from submit to the last run's end, server timestamps)
#   7 the killed worker's run FAILED with "signal 9", every other job of that study succeeded
#
# OUT_DIR receives (flat names, at most 8 files, what a device call returns):
#   command.txt  the command line, git commit, host, GPUs, date
#   run.log      this script's output: the studies as `medprof watch` followed them, the per-run
#                table (phase, preset, state, CUDA_VISIBLE_DEVICES, GPU UUID, times) and the verdicts
#   summary.txt  the per-run table and the verdicts (also at the end of run.log)
#   runs.json    `medprof run RUN --format json` of every run of the three studies, with "phase"
#                and "error" added (kernel/op/step/metric lists replaced by their counts)
#   util.csv     the raw NVML samples: timestamp (UTC), index, uuid, utilization.gpu
#   logs.txt     the server's and both agents' logs (tails), and the all-GPU study's worker
#                processes as listed every 0.2 s (pid, run, device, CUDA_VISIBLE_DEVICES)
#   medprof.db   the server's SQLite database (medprof.db.gz when over 15 MiB)
#   build.log    the worker build (absent with --worker)
# Exit status: 0 every point PASS, 1 a usage or setup error, 3 a point FAILED, 4 none failed but
# one is INCONCLUSIVE or SKIPPED (e.g. one GPU only). With --tiny (the CPU check: the agent offers
# one `cpu` device) the GPU points are SKIPPED and the exit status is 0 when nothing failed.
#
#   bench/gpu/multi_gpu_check.sh [options] OUT_DIR
#
#   --presets LIST   presets (default baseline,opt1,opt2,opt12)
#   --volume N       cubic volume edge (default 64)
#   --steps N        measured train steps per run of the all and one studies (default 100)
#   --warmup N       warm-up steps (default 3)
#   --kill-steps N   measured steps per run of the kill study (default 20)
#   --gpus N         use the first N GPUs (default every GPU nvidia-smi lists)
#   --tiny           a tiny model on the CPU (16^3, width 8, 1 thread): checks this script's
#                    submit/kill/collect/summary logic where there is no GPU
#   --worker PATH    use this medprof-worker instead of building one (skips build_worker.sh)
#   --bundle DIR     the bundle of scripts/bundle.sh (default .carry/bundle)
#   --deadline-s N   the whole script's budget in seconds (default 560, inside a 10-minute
#                    device call); studies are cancelled when it runs out and the outputs written
#
# On the GPU machine: prepare here with `scripts/make-carry.sh && scripts/bundle.sh --build-dir
# build`, then one device call (kind nvidia-h200-x2, or nvidia-h200-x4; carry [".carry"]):
#
#   bash bench/gpu/multi_gpu_check.sh "$OUT"
#
# The build (bench/gpu/build_worker.sh) takes part of the budget; if the studies are cut, a
# second call on the still-warm machine reuses it (build-gpu/ is kept between calls):
#
#   bash bench/gpu/multi_gpu_check.sh --worker build-gpu/bin/medprof-worker "$OUT"
#
# The worker's LD_LIBRARY_PATH gets .carry/usr/lib/x86_64-linux-gnu (Debian's Abseil) when it
# exists. On 4 GPUs with the defaults, the one-GPU study is the longest (16 jobs in a row): if it is
# cut, lower --steps (e.g. 60) rather than --volume (small volumes leave the GPU idle).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
presets="baseline,opt1,opt2,opt12"
volume=64 steps=100 warmup=3 kill_steps=20 gpus=0 tiny=0 worker="" bundle="${root}/.carry/bundle" deadline_s=560
volume_set=0 steps_set=0 warmup_set=0 kill_steps_set=0
argv_text="$0 $*"
usage() { echo "usage: multi_gpu_check.sh [--presets LIST] [--volume N] [--steps N] [--warmup N] [--kill-steps N] [--gpus N] [--tiny] [--worker PATH] [--bundle DIR] [--deadline-s N] OUT_DIR" >&2; exit 1; }
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets="$2"; shift 2 ;;
    --volume) volume="$2"; volume_set=1; shift 2 ;;
    --steps) steps="$2"; steps_set=1; shift 2 ;;
    --warmup) warmup="$2"; warmup_set=1; shift 2 ;;
    --kill-steps) kill_steps="$2"; kill_steps_set=1; shift 2 ;;
    --gpus) gpus="$2"; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --worker) worker="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --deadline-s) deadline_s="$2"; shift 2 ;;
    -h|--help) sed -n '2,71p' "$0"; exit 0 ;;
    -*) echo "multi_gpu_check.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "${out}" ] || { echo "multi_gpu_check.sh: one OUT_DIR only (got '${out}' and '$1')" >&2; usage; }
       out="$1"; shift ;;
  esac
done
[ -n "${out}" ] || usage
for v in "${volume}" "${steps}" "${warmup}" "${kill_steps}" "${gpus}" "${deadline_s}"; do
  [[ "${v}" =~ ^[0-9]+$ ]] || { echo "multi_gpu_check.sh: '${v}' is not a whole number" >&2; usage; }
done
model_flags=()
if [ "${tiny}" = 1 ]; then
  [ "${volume_set}" = 1 ] || volume=16
  [ "${steps_set}" = 1 ] || steps=2
  [ "${warmup_set}" = 1 ] || warmup=1
  # Long enough that the worker is still running when it is found and killed.
  [ "${kill_steps_set}" = 1 ] || kill_steps=30
  model_flags+=(--base-channels 8 --channel-mult "1,2" --attention-ds 2 --threads 1)
fi
# (modes may not survive the copy to the GPU machine)
chmod +x "${bundle}"/bin/* "${bundle}"/libexec/* 2>/dev/null || true
for b in medprof-server medprof-agent medprof host-exec; do
  [ -x "${bundle}/bin/${b}" ] || {
    echo "multi_gpu_check.sh: ${bundle}/bin/${b} is missing: run scripts/bundle.sh on the Debian machine and carry .carry" >&2
    exit 1; }
done

# ---------------------------------------------------------------- the GPUs
gpu_csv="$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null || true)"
gpu_total=$(grep -c '^[0-9]' <<<"${gpu_csv}" || true)
if [ "${tiny}" = 1 ]; then
  mode=cpu n=1
  [ "${gpu_total}" = 0 ] || echo "multi_gpu_check.sh: --tiny: the studies run on the CPU; the ${gpu_total} GPUs are not used" >&2
else
  [ "${gpu_total}" -ge 1 ] || { echo "multi_gpu_check.sh: nvidia-smi lists no GPU (use --tiny for the CPU check)" >&2; exit 1; }
  mode=gpu n=${gpu_total}
  if [ "${gpus}" -gt 0 ]; then
    [ "${gpus}" -le "${gpu_total}" ] || { echo "multi_gpu_check.sh: --gpus ${gpus}, but nvidia-smi lists ${gpu_total}" >&2; exit 1; }
    n=${gpus}
  fi
fi
# The agents get exactly the GPUs this script means; an inherited list would change both.
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
  echo "multi_gpu_check.sh: ignoring the inherited CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}'" >&2
  unset CUDA_VISIBLE_DEVICES
fi
# The all-GPU agent sees every GPU (no CUDA_VISIBLE_DEVICES), or the first N with --gpus N.
all_visible=""
if [ "${mode}" = gpu ] && [ "${n}" -lt "${gpu_total}" ]; then
  all_visible="$(seq -s, 0 $((n - 1)))"
fi

mkdir -p "${out}"
out="$(cd "${out}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/medprof-multi-gpu.XXXXXX")"
exec 3>&1 4>&2
exec > >(tee "${out}/run.log") 2>&1
tee_pid=$!
log() { echo "== $(date -u +%H:%M:%S) $*"; }
now_ms() { date +%s%3N; }
meta() { echo "$1 $2" >>"${work}/meta.txt"; }
: >"${work}/meta.txt"
printf '%s\n' "${gpu_csv}" >"${work}/gpus.csv"
meta mode "${mode}"
meta n "${n}"

pids=()
forget_pid() {
  local keep=() p
  for p in "${pids[@]}"; do [ "${p}" = "$1" ] || keep+=("${p}"); done
  pids=("${keep[@]}")
}
rc_final=1
# Whatever happens: the sampler, agents and server stop (newest first), and the database, the
# samples and the logs land in OUT_DIR before the scratch dir goes.
cleanup() {
  local rc=$?
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  pids=()
  if [ -f "${work}/medprof.db" ]; then
    python3 -c 'import sqlite3, sys; s = sqlite3.connect(sys.argv[1]); d = sqlite3.connect(sys.argv[2]); s.backup(d); d.close(); s.close()' \
      "${work}/medprof.db" "${out}/medprof.db" 2>/dev/null || cp "${work}/medprof.db" "${out}/medprof.db"
    if [ "$(stat -c %s "${out}/medprof.db")" -gt $((15 * 1024 * 1024)) ]; then
      gzip -9 -f "${out}/medprof.db"
    fi
  fi
  [ -s "${work}/util.csv" ] && cp "${work}/util.csv" "${out}/util.csv"
  {
    for f in "${work}"/server.log "${work}"/agent-*.log "${work}/util.err"; do
      [ -s "${f}" ] || continue
      echo "===== $(basename "${f}") (last 300 lines)"
      tail -n 300 "${f}"
    done
    if [ -s "${work}/workers.txt" ]; then
      echo "===== workers.txt (the all-GPU study's workers every 0.2 s: epoch_ms pid run device CUDA_VISIBLE_DEVICES; last 3000 lines)"
      tail -n 3000 "${work}/workers.txt"
    fi
    find "${work}" -type f -name 'worker.stderr' 2>/dev/null | sort | while read -r f; do
      echo "===== ${f#"${work}"/} (last 100 lines)"
      tail -n 100 "${f}"
    done
  } >"${out}/logs.txt"
  rm -rf "${work}"
  ls -l "${out}"
  log "done (exit ${rc}); results in ${out}"
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
  echo "host: $(hostname) ($(. /etc/os-release && echo "${PRETTY_NAME}")), $(nproc) CPUs"
  echo "mode: ${mode}; N = ${n}; presets ${presets} x ${n} repeats; volume ${volume}^3; train; grad-accum 1; steps ${steps} (kill study ${kill_steps}); warmup ${warmup}; model flags: ${model_flags[*]:-(defaults)}"
  echo "bundle: $(head -n 2 "${bundle}/BUNDLE.txt" 2>/dev/null | tr '\n' ' ')"
  if [ "${gpu_total}" -gt 0 ]; then
    nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,power.limit --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: none"
  fi
} >"${out}/command.txt"
cat "${out}/command.txt"

# ---------------------------------------------------------------- the worker
host_ldlp="${LD_LIBRARY_PATH:-}"
[ -d "${root}/.carry/usr/lib/x86_64-linux-gnu" ] &&
  host_ldlp="${root}/.carry/usr/lib/x86_64-linux-gnu${host_ldlp:+:${host_ldlp}}"
if [ -z "${worker}" ]; then
  log "building medprof-worker (bench/gpu/build_worker.sh; log in build.log)"
  start=${SECONDS}
  if ! bash "${root}/bench/gpu/build_worker.sh" >"${out}/build.log" 2>&1; then
    tail -n 40 "${out}/build.log"
    echo "multi_gpu_check.sh: the worker build failed (build.log)" >&2
    exit 1
  fi
  log "worker built in $((SECONDS - start)) s"
  build_dir="${BUILD_DIR:-build-gpu}"
  case "${build_dir}" in /*) ;; *) build_dir="${root}/${build_dir}" ;; esac
  worker="${build_dir}/bin/medprof-worker"
fi
worker="$(cd "$(dirname "${worker}")" && pwd)/$(basename "${worker}")"
[ -x "${worker}" ] || { echo "multi_gpu_check.sh: ${worker} is not an executable" >&2; exit 1; }
# The agent runs with the bundle's libraries; the worker must not (bundle/bin/host-exec).
shim="${work}/bin/medprof-worker"
mkdir -p "${work}/bin"
printf '#!/usr/bin/env bash\nexec %q %q "$@"\n' "${bundle}/bin/host-exec" "${worker}" >"${shim}"
chmod 0755 "${shim}"
export MEDPROF_HOST_LD_LIBRARY_PATH="${host_ldlp}"
# (also loads LibTorch once, so the first study does not pay for a cold page cache alone)
log "worker: $(LD_LIBRARY_PATH="${host_ldlp}" "${worker}" --version 2>&1 | head -n 1)"

# ---------------------------------------------------------------- server, sampler, agents
log "starting medprof-server (SQLite in the scratch dir ${work})"
"${bundle}/bin/medprof-server" --db "${work}/medprof.db" --listen 127.0.0.1:0 2>"${work}/server.log" &
server_pid=$!
pids+=("${server_pid}")
port=""
for _ in $(seq 1 200); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "${work}/server.log" | head -n 1 | sed 's/.*://') || true
  [ -n "${port}" ] && break
  kill -0 "${server_pid}" 2>/dev/null || break
  sleep 0.1
done
[ -n "${port}" ] || { echo "multi_gpu_check.sh: the server did not start; its log:" >&2; cat "${work}/server.log" >&2; exit 1; }
export MEDPROF_SERVER="127.0.0.1:${port}"
cli() { "${bundle}/bin/medprof" "$@"; }

if [ "${mode}" = gpu ]; then
  log "sampling utilization.gpu of every GPU through NVML every 500 ms (util.csv)"
  meta util_t0 "$(date +%s.%N)"
  TZ=UTC nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu --format=csv,noheader,nounits -lms 500 \
    >"${work}/util.csv" 2>"${work}/util.err" &
  pids+=($!)
fi

agent_pid=""
# start_agent NAME VISIBLE MAX_JOBS: one agent at a time (a second would take jobs too).
start_agent() {
  local name="$1" visible="$2" max_jobs="$3"
  local -a envs=()
  [ -n "${visible}" ] && envs=("CUDA_VISIBLE_DEVICES=${visible}")
  log "starting medprof-agent ${name} (CUDA_VISIBLE_DEVICES=${visible:-unset}, --max-jobs ${max_jobs})"
  env "${envs[@]}" "${bundle}/bin/medprof-agent" --server "${MEDPROF_SERVER}" --work-dir "${work}/${name}" \
    --name "${name}" --site multi-gpu --worker "${shim}" --max-jobs "${max_jobs}" 2>"${work}/agent-${name}.log" &
  agent_pid=$!
  pids+=("${agent_pid}")
  for _ in $(seq 1 300); do
    if cli agents 2>/dev/null | grep -q "${name}"; then cli agents; return 0; fi
    kill -0 "${agent_pid}" 2>/dev/null || break
    sleep 0.1
  done
  echo "multi_gpu_check.sh: the agent ${name} did not register; its log:" >&2
  cat "${work}/agent-${name}.log" >&2
  exit 1
}
stop_agent() {
  log "stopping the agent (pid ${agent_pid})"
  kill -TERM "${agent_pid}" 2>/dev/null || true
  wait "${agent_pid}" 2>/dev/null || true
  forget_pid "${agent_pid}"
  agent_pid=""
}

# The agent's workers: "pid run_id device_index CUDA_VISIBLE_DEVICES" ("-" when empty) for each
# child of the agent that carries a MEDPROF_RUN_ID (the shim and host-exec exec, so the worker
# keeps the pid the agent forked). list_workers: once. monitor_workers FILE: every 0.2 s with
# the epoch ms in front, until killed (one process, so that watching costs next to nothing).
workers_py='
import os, sys, time
def workers(agent):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] != agent:
                    continue
            with open(f"/proc/{d}/environ") as f:
                env = dict(kv.split("=", 1) for kv in f.read().split("\0") if "=" in kv)
        except (OSError, IndexError):
            continue
        if "MEDPROF_RUN_ID" in env:
            out.append(" ".join([d, env["MEDPROF_RUN_ID"], env.get("MEDPROF_DEVICE_INDEX", "?"),
                                 env.get("CUDA_VISIBLE_DEVICES") or "-"]))
    return out
if len(sys.argv) == 2:
    print("\n".join(workers(sys.argv[1])))
    sys.exit(0)
with open(sys.argv[2], "a") as f:
    while True:
        now = int(time.time() * 1000)
        for w in workers(sys.argv[1]):
            f.write(f"{now} {w}\n")
        f.flush()
        time.sleep(0.2)
'
list_workers() { python3 -c "${workers_py}" "${agent_pid}" | grep . || true; }
monitor_workers() { exec python3 -c "${workers_py}" "${agent_pid}" "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- the studies
reserve_s=45  # collecting the runs, the summary, the database copy
left_s() { echo $((deadline_s - SECONDS - reserve_s)); }
repeats=${n}
jobs=$(( $(tr ',' '\n' <<<"${presets}" | grep -c .) * repeats ))

# run_study PHASE STEPS CAP_S [kill|monitor]: submit, follow (medprof watch, at most CAP_S),
# collect. monitor: list the agent's workers every 0.2 s into workers.txt ("epoch_ms pid run
# device CUDA_VISIBLE_DEVICES"); kill: once every slot runs a worker, SIGKILL one.
run_study() {
  local phase="$1" st="$2" cap="$3" what="${4:-}"
  [ "${cap}" -ge 10 ] || cap=10
  log "study '${phase}': ${presets} x ${repeats} (${jobs} jobs) at ${volume}^3, ${st} steps after ${warmup} warm-up; at most ${cap} s"
  local submit_ms study watch_rc=0 watch_pid
  submit_ms=$(now_ms)
  cli submit --presets "${presets}" --volume "${volume}" --phase train --grad-accum 1 --steps "${st}" \
    --warmup "${warmup}" --repeats "${repeats}" --max-attempts 1 "${model_flags[@]}" \
    --name "multi-gpu ${phase} N=${n} ${volume}" --format json >"${work}/submit-${phase}.json"
  study=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["study_id"])' "${work}/submit-${phase}.json")
  meta "${phase}.study" "${study}"
  meta "${phase}.submit_ms" "${submit_ms}"
  meta "${phase}.jobs" "${jobs}"
  timeout "${cap}" "${bundle}/bin/medprof" watch "${study}" &
  watch_pid=$!
  if [ "${what}" = monitor ]; then
    local monitor_pid
    monitor_workers "${work}/workers.txt" &
    monitor_pid=$!
    pids+=("${monitor_pid}")
    wait "${watch_pid}" || watch_rc=$?
    kill -TERM "${monitor_pid}" 2>/dev/null || true
    wait "${monitor_pid}" 2>/dev/null || true
    forget_pid "${monitor_pid}"
  elif [ "${what}" = kill ]; then
    # Once every slot runs a worker, SIGKILL the first one listed (by its pid).
    local want=${n} seen pid run dev line killed=0
    while kill -0 "${watch_pid}" 2>/dev/null; do
      mapfile -t seen < <(list_workers)
      if [ "${#seen[@]}" -ge "${want}" ]; then
        line="${seen[0]}"
        read -r pid run dev _ <<<"${line}"
        log "${#seen[@]} workers running (${seen[*]}); SIGKILL to worker pid ${pid} (run ${run}, device ${dev})"
        if kill -KILL "${pid}" 2>/dev/null; then
          meta kill.killed_pid "${pid}"
          meta kill.killed_run "${run}"
          meta kill.killed_device "${dev}"
          meta kill.workers_at_kill "${#seen[@]}"
          killed=1
        fi
        break
      fi
      sleep 0.1
    done
    [ "${killed}" = 1 ] || meta kill.note "the study ended before ${want} workers were seen at once"
  fi
  [ "${what}" = monitor ] || wait "${watch_pid}" || watch_rc=$?
  meta "${phase}.end_ms" "$(now_ms)"
  log "study '${phase}' (${study}): watch ended with exit status ${watch_rc}"
  if [ "${watch_rc}" = 124 ]; then
    meta "${phase}.cut" 1
    echo "multi_gpu_check.sh: study '${phase}' did not end within ${cap} s; cancelling it" >&2
    cli cancel "${study}" --reason "multi_gpu_check.sh deadline" || true
    sleep 2
  fi
  cli runs --study "${study}" --limit 1000 --format json >"${work}/runs-${phase}.json" || true
  python3 - "${work}/runs-${phase}.json" "${phase}" >>"${work}/run-ids.txt" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc.get("runs", []):
    print(sys.argv[2], r.get("run_id"))
EOF
}

: >"${work}/run-ids.txt"
start_agent mgpu-all "${all_visible}" "${n}"
meta all_agent mgpu-all
cli agents --format json >"${work}/agents.json"
t=${SECONDS}
run_study all "${steps}" "$(( $(left_s) - 60 ))" monitor
t_all_s=$((SECONDS - t))
run_study kill "${kill_steps}" "$(( $(left_s) - 30 < t_all_s + 60 ? $(left_s) - 30 : t_all_s + 60 ))" kill
stop_agent
start_agent mgpu-one "$([ "${mode}" = gpu ] && echo 0)" 1
run_study one "${steps}" "$(left_s)"
stop_agent
cli agents --format json >"${work}/agents-end.json" || true

# ---------------------------------------------------------------- collect and judge
log "collecting $(wc -l <"${work}/run-ids.txt") runs (runs.json)"
{
  echo "["
  first=1
  while read -r phase id; do
    [ -n "${id}" ] || continue
    [ "${first}" = 1 ] || echo ","
    first=0
    echo "{\"phase\": \"${phase}\", \"run\": "
    if cli run "${id}" --format json >"${work}/run-one.json"; then cat "${work}/run-one.json"; else echo "{\"run_id\": \"${id}\"}"; fi
    echo "}"
  done <"${work}/run-ids.txt"
  echo "]"
} >"${work}/runs-raw.json"
python3 - "${work}" "${out}/runs.json" <<'EOF'
import json, os, sys
work = sys.argv[1]
errors = {}
for phase in ("all", "kill", "one"):
    try:
        for r in json.load(open(os.path.join(work, f"runs-{phase}.json"))).get("runs", []):
            errors[r.get("run_id")] = r.get("error", "")
    except (OSError, ValueError):
        pass
runs = []
for item in json.load(open(os.path.join(work, "runs-raw.json"))):
    r = item["run"]
    r["phase"] = item["phase"]
    r.setdefault("error", errors.get(r.get("run_id"), ""))
    for key in ("kernels", "ops", "steps", "metrics"):
        if key in r:
            r[key + "_count"] = len(r.pop(key))
    runs.append(r)
json.dump(runs, open(os.path.join(work, "runs.json"), "w"), indent=1)
json.dump(runs, open(sys.argv[2], "w"), indent=1)
EOF
if [ -s "${work}/util.csv" ]; then
  log "NVML samples: $(wc -l <"${work}/util.csv") lines"
fi
set +e
python3 "${here}/multi_gpu_summary.py" "${work}" >"${out}/summary.txt"
rc_final=$?
set -e
cat "${out}/summary.txt"
exit "${rc_final}"
