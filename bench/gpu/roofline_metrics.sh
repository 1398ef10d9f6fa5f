#!/usr/bin/env bash
# Which counters Nsight Compute's roofline sections use on this GPU (issue 17): prints the installed
# ncu's version, its roofline section files, and --query-metrics for every counter medprof's
# roofline reads (agent/profiler/metric_catalog.cc, docs/metrics.md "Roofline"), so the choices
# marked PENDING there (tensor-path ops = FLOPs; the L1 counter on GH100) can be settled.
#
#   bash bench/gpu/roofline_metrics.sh OUT_FILE
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-roofline-metrics.txt}
{
  echo "== ncu"; ncu --version
  echo "== GPU"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  sections=$(dirname "$(readlink -f "$(command -v ncu)")")/sections
  [ -d "$sections" ] || sections=$(ls -d /usr/local/cuda*/nsight-compute*/sections /opt/nvidia/nsight-compute/*/sections 2>/dev/null | head -1)
  echo "== section files in $sections"
  for f in "$sections"/*Roofline*.section; do echo "---- $f"; cat "$f"; done
  echo "== ncu --list-sets / --list-sections (roofline)"
  ncu --list-sections | grep -i roofline
  echo "== --query-metrics (chip of device 0), the counters medprof reads"
  ncu --query-metrics --query-metrics-mode all 2>/dev/null |
    grep -E 'sm__ops_path_tensor|smsp__sass_thread_inst_executed_op_[fhd](add|mul|fma)_pred_on|l1tex__m_xbar2l1tex_read_bytes|l1tex__lsu_writeback_active|l1tex__t_bytes|lts__t_bytes|dram__bytes|inst_executed_pipe_tensor'
} 2>&1 | tee "$out"
