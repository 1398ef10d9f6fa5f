#!/usr/bin/env bash
# The demo: on a fresh Debian 12 machine, installs dependencies, builds, starts a server with an
# embedded SQLite file and one local agent on 127.0.0.1, submits the study's four presets
# (baseline, opt1, opt2, opt12) at a small volume, prints the comparison table, and stops
# everything it started. The worker runs on the GPU when there is one, else on the CPU.
#
#   scripts/demo.sh [--volume N] [--steps N] [--warmup N] [--out DIR] [--skip-install]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
volume=32 steps=3 warmup=1 out="$root/demo-out" install=1
while [ $# -gt 0 ]; do
  case "$1" in
    --volume) volume=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-install) install=0; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "demo.sh: unknown option '$1' (allowed: --volume N, --steps N, --warmup N, --out DIR, --skip-install)" >&2; exit 1 ;;
  esac
done

[ "$install" = 1 ] && "$root/scripts/install-deps.sh"
echo "== building medprof"
"$root/scripts/build.sh" medprof-server medprof-agent medprof-worker medprof
bin=${MEDPROF_BUILD_DIR:-$root/build}/bin

mkdir -p "$out"
rm -f "$out/medprof.db" "$out/medprof.db-wal" "$out/medprof.db-shm"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== starting medprof-server (db $out/medprof.db)"
"$bin/medprof-server" --db "$out/medprof.db" --listen 127.0.0.1:0 2>"$out/server.log" &
pids+=($!)
port=""
for _ in $(seq 1 100); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$out/server.log" | head -n1 | sed 's/.*://') || true
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "demo.sh: the server did not start; its log:" >&2; cat "$out/server.log" >&2; exit 2; }
export MEDPROF_SERVER=127.0.0.1:$port

echo "== starting medprof-agent (work dir $out/agent)"
"$bin/medprof-agent" --server "$MEDPROF_SERVER" --work-dir "$out/agent" --name demo-agent \
  --worker "$bin/medprof-worker" 2>"$out/agent.log" &
pids+=($!)

echo "== submitting baseline, opt1, opt2, opt12 at ${volume}^3 (train micro-step, ${steps} steps after ${warmup} warm-up)"
set +e
# --attention-ds 8: the published model's attention level (16^3 at 128^3). At a small volume,
# Med-DDPM's own rule (attention where the map is 16 wide) would move attention to a level with
# far more tokens and change the model; the demo keeps the published 40,226,433-parameter net.
"$bin/medprof" submit --presets baseline,opt1,opt2,opt12 --volume "$volume" --steps "$steps" \
  --warmup "$warmup" --grad-accum 1 --attention-ds 8 --name demo --wait --format json >"$out/study.json"
rc=$?
set -e
study=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["study_id"])' "$out/study.json" 2>/dev/null || true)
if [ -z "$study" ]; then
  echo "demo.sh: submission failed (exit $rc); server log: $out/server.log, agent log: $out/agent.log" >&2
  exit "$rc"
fi
echo "== comparison for study $study"
"$bin/medprof" compare "$study"
"$bin/medprof" compare "$study" --format json >"$out/compare.json"
echo "(JSON in $out/compare.json; logs in $out/)"
exit "$rc"
