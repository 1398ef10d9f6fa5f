#!/usr/bin/env bash
# Starts N medprof agents under Slurm as one job array of N tasks, one agent per task, each with
# its own env file (its own --name and token, as every agent that runs at the same time needs):
#
#   deploy/slurm/fleet.sh N SCRIPT [SBATCH_OPTION...]
#   deploy/slurm/fleet.sh 4 deploy/slurm/stampede3-h100.sbatch -A myproj
#
# Task i (1..N) reads $MEDPROF_ENV_FILE with %a replaced by i (default
# $HOME/.medprof/agent-%a.env, so agent-1.env ... agent-N.env); every one must exist before
# anything is submitted. On whole-node partitions (Stampede3 h100) each task gets a node of its
# own; on shared ones (Expanse gpu-shared) add --exclusive for one agent per node. Prints the
# array's job id; `scancel ID` stops the whole fleet (each agent drains). docs/deploy.md §4d.
set -euo pipefail

usage() { echo "usage: $0 N SCRIPT [SBATCH_OPTION...]  (N: 1..1000 agents)" >&2; exit 1; }
[ $# -ge 2 ] || usage
n=$1 script=$2
shift 2
[[ "${n}" =~ ^[0-9]+$ ]] && [ "${n}" -ge 1 ] && [ "${n}" -le 1000 ] || {
  echo "fleet.sh: N: '${n}' is not a number of agents (allowed 1..1000)" >&2; exit 1; }
[ -r "${script}" ] || { echo "fleet.sh: SCRIPT: cannot read '${script}'" >&2; exit 1; }
pattern="${MEDPROF_ENV_FILE:-${HOME}/.medprof/agent-%a.env}"
[[ "${pattern}" == *%a* ]] || {
  echo "fleet.sh: MEDPROF_ENV_FILE='${pattern}' must contain %a (one env file per agent)" >&2; exit 1; }
for i in $(seq 1 "${n}"); do
  f="${pattern//%a/${i}}"
  [ -r "${f}" ] || { echo "fleet.sh: agent ${i} of ${n}: ${f} is missing (copy deploy/config/slurm-agent.env, set its --name and token file)" >&2; exit 1; }
done
# sbatch passes this environment on (no --export on TACC), so each task sees the pattern.
export MEDPROF_ENV_FILE="${pattern}"
sbatch --parsable --array="1-${n}" --job-name=medprof-fleet "$@" "${script}"
