#!/usr/bin/env bash
# A real single-node Slurm for tests (Debian's slurm-wlm 22.05 + munge; ../shared/spec/slurm-ci.md
# has what was seen working on machines like the CI machine, docs/deploy.md §7 what is tested).
#
#   tests/slurm/cluster.sh start DIR [GPUS]   # munged, slurmctld, slurmd; everything under DIR
#   tests/slurm/cluster.sh stop DIR           # jobs cancelled, daemons ended by their pid files
#
# `start` wipes DIR, writes DIR/etc/slurm.conf (its own ports, state, spool and log dirs; two
# partitions named like the sites', `h100` (default) and `gpu-shared`; GRES gpu:GPUS backed by
# character devices DIR/dev/nvidiaN made as copies of /dev/null), starts munged with its own key
# and socket, then slurmctld and slurmd as root without systemd, and waits until the node is
# idle (MaxTime 48 h as on both sites, so the scripts' own 4 h limit is accepted). It prints
# `export SLURM_CONF=...` (also in DIR/env) for the client commands.
# `stop` is safe to call twice and on a half-started cluster.
#
# Exit status 77 when Slurm cannot start here (not root, a program missing): the caller reports
# that as a skip with the message printed on stderr. Any other failure: 1, with the log tail.
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }
cannot() { echo "cluster.sh: cannot start a Slurm here: $*" >&2; exit 77; }

# TERM, then KILL after 5 s, the process whose pid is in file $1 (if any).
stop_pidfile() {
  local f=$1 pid
  [ -s "${f}" ] || return 0
  pid=$(cat "${f}")
  if kill -TERM "${pid}" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${f}"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {
  local dir=$1 gpus=${2:-4}
  [ "$(id -u)" -eq 0 ] || cannot "slurmctld/slurmd must start as root (this is uid $(id -u))"
  for p in munged munge unmunge slurmctld slurmd sbatch sinfo scontrol python3 runuser; do
    command -v "${p}" >/dev/null || cannot "${p} is not installed (scripts/install-deps.sh installs it)"
  done
  id munge >/dev/null 2>&1 || cannot "no munge user (the munge package creates it)"
  local host
  host=$(hostname -s)
  getent hosts "${host}" >/dev/null || echo "127.0.1.1 ${host}" >>/etc/hosts
  rm -rf "${dir}"
  mkdir -p "${dir}"/{etc,state,spool,log,dev,run}
  dir=$(cd "${dir}" && pwd)

  # munged: its own key, socket, pid, seed and log, as the munge user (it refuses lax
  # permissions: its directory owned by munge, 0755 so that clients reach the socket).
  install -d -m 0755 -o munge -g munge "${dir}/munge"
  dd if=/dev/urandom of="${dir}/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "${dir}/munge/munge.key" && chmod 0400 "${dir}/munge/munge.key"
  chmod 0755 "${dir}"
  local sock="${dir}/munge/munge.socket"
  runuser -u munge -- munged --key-file="${dir}/munge/munge.key" --socket="${sock}" \
    --pid-file="${dir}/munge/munged.pid" --seed-file="${dir}/munge/munged.seed" \
    --log-file="${dir}/munge/munged.log" || die "munged did not start: $(tail -5 "${dir}/munge/munged.log" 2>/dev/null)"
  cp "${dir}/munge/munged.pid" "${dir}/run/munged.pid"
  munge -n -S "${sock}" | unmunge -S "${sock}" >/dev/null || die "munge -n | unmunge failed"

  local n node
  for n in $(seq 0 $((gpus - 1))); do mknod -m 666 "${dir}/dev/nvidia${n}" c 1 3; done
  node=$(slurmd -C | head -1)
  cat >"${dir}/etc/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh for one test run.
ClusterName=medprof-ci
SlurmctldHost=${host}
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${sock}
CredType=cred/munge
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
ReturnToService=2
GresTypes=gpu
KillWait=30
MinJobAge=600
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool
SlurmctldPidFile=${dir}/run/slurmctld.pid
SlurmdPidFile=${dir}/run/slurmd.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd.log
${node} Gres=gpu:${gpus} State=UNKNOWN
PartitionName=h100 Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP
PartitionName=gpu-shared Nodes=ALL MaxTime=2-00:00:00 State=UP
EOF
  local files
  files=$(seq -s, -f "${dir}/dev/nvidia%g" 0 $((gpus - 1)))
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s\n' "${host}" "${files}" >"${dir}/etc/gres.conf"
  printf 'export SLURM_CONF=%s\n' "${dir}/etc/slurm.conf" >"${dir}/env"
  export SLURM_CONF="${dir}/etc/slurm.conf"

  slurmctld -f "${SLURM_CONF}" || die "slurmctld did not start: $(tail -5 "${dir}/log/slurmctld.log")"
  slurmd -f "${SLURM_CONF}" || die "slurmd did not start: $(tail -5 "${dir}/log/slurmd.log")"
  local state=""
  for _ in $(seq 200); do
    state=$(sinfo -h -n "${host}" -o %T 2>/dev/null | head -1 || true)
    [ "${state}" = idle ] && break
    sleep 0.1
  done
  [ "${state}" = idle ] || die "node ${host} is '${state}', not idle after 20 s; slurmd log: $(tail -5 "${dir}/log/slurmd.log")"
  cat "${dir}/env"
}

stop() {
  local dir=$1
  [ -d "${dir}" ] || return 0
  if [ -f "${dir}/etc/slurm.conf" ]; then
    export SLURM_CONF="${dir}/etc/slurm.conf"
    local pids job
    # Job processes first (scancel alone would wait KillWait), then the jobs themselves.
    for job in $(squeue -h -o %A 2>/dev/null || true); do
      pids=$(scontrol listpids "${job}" 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}' || true)
      [ -z "${pids}" ] || kill -KILL ${pids} 2>/dev/null || true
      scancel "${job}" 2>/dev/null || true
    done
  fi
  stop_pidfile "${dir}/run/slurmd.pid"
  stop_pidfile "${dir}/run/slurmctld.pid"
  stop_pidfile "${dir}/run/munged.pid"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: $0 start DIR [GPUS]"; start "$2" "${3:-4}" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 start DIR [GPUS] | stop DIR" ;;
esac
