# shellcheck shell=bash
# Sourced by the GPU bench scripts after they cd to the repository root: Debian's Abseil and CLI11
# from .carry/ (scripts/make-carry.sh) on the library path, the worker that build_worker.sh made
# (WORKER overrides), ncu's replay mode (NCU_REPLAY overrides), and say(): a line to stdout and to "$summary" (set by the script).
[ -d .carry ] && export LD_LIBRARY_PATH="$PWD/.carry/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# shellcheck disable=SC2034  # used by the scripts that source this file
worker="${WORKER:-build-gpu/bin/medprof-worker}"
# Nsight Compute's replay mode for the comparisons (NCU_REPLAY=kernel overrides): application
# replay measures each launch in the cache state the application left, as medprof's one-pass
# sessions do (bench/results/h100-agreement-2026-12-06.md).
# shellcheck disable=SC2034
ncu_replay="${NCU_REPLAY:-application}"
# shellcheck disable=SC2154  # summary: set by the sourcing script before it calls say
say() { echo "$*" | tee -a "$summary"; }
