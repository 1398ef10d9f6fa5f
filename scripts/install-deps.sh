#!/usr/bin/env bash
# Installs every build and test dependency of medprof from the distribution's packages.
# Used by README.md, .ci/run and the Apptainer definitions: one list, one place.
#
#   scripts/install-deps.sh            # everything (build + tests + tools)
#   scripts/install-deps.sh --runtime  # only what the binaries need at run time
#   scripts/install-deps.sh --no-libtorch  # everything but the distribution's (CPU) LibTorch:
#                                          # the Apptainer images build against PyTorch's own
#
# Supports Debian 12 and Ubuntu 24.04 (same gRPC 1.51 / protobuf 3.21). Needs root (or sudo).
set -euo pipefail

mode=full
libtorch=1
for arg in "$@"; do
  case "${arg}" in
    --runtime) mode=runtime ;;
    --full) ;;
    --no-libtorch) libtorch=0 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown option '${arg}' (allowed: --runtime, --full, --no-libtorch)" >&2; exit 1 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps.sh: run as root or install sudo" >&2; exit 1; }
  SUDO=sudo
fi

. /etc/os-release
case "${ID}:${VERSION_ID}" in
  debian:12|ubuntu:24.04) ;;
  *) echo "install-deps.sh: untested distribution ${ID} ${VERSION_ID}; continuing" >&2 ;;
esac

build_pkgs=(
  build-essential cmake pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3 libssl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libcli11-dev nlohmann-json3-dev libbenchmark-dev libabsl-dev
  prometheus-cpp-dev libtorch-dev libopenblas0-pthread
)
# Test tools. clang + libclang-rt-dev (libFuzzer, ASan, UBSan runtimes): scripts/fuzz.sh.
# systemd: systemd-analyze verifies deploy/systemd/ (tests/deploy).
# chromium: headless, renders the HTML report in tests/report (DevTools protocol on a pipe).
# tmux: a real pseudo-terminal whose screen the progress test reads (tests/integration).
# npm (Debian's, unless a Node.js with its own npm is installed: the two conflict): fetches the
# speedscope trace viewer (below) that tests/report opens chrome-trace exports in.
# munge slurmctld slurmd slurm-client: the single-node Slurm of tests/slurm (cluster.sh starts
# it as root without systemd; Debian's packages are Slurm 22.05, munge 0.5.15).
# python3-torch (with LibTorch only): scripts the example TorchScript user models the worker's
# tests load (workloads/examples/make_denoisers.py, the ctest fixture torchscript_models).
test_pkgs=(shellcheck python3 python3-torch systemd chromium tmux clang libclang-rt-dev munge slurmctld slurmd slurm-client)
runtime_pkgs=(libgrpc++1.51 libsqlite3-0 libopenblas0-pthread)
if [ "${libtorch}" = 0 ]; then
  kept=()
  for p in "${build_pkgs[@]}"; do [ "${p}" = libtorch-dev ] || kept+=("${p}"); done
  build_pkgs=("${kept[@]}")
  kept=()
  for p in "${test_pkgs[@]}"; do [ "${p}" = python3-torch ] || kept+=("${p}"); done
  test_pkgs=("${kept[@]}")
fi

export DEBIAN_FRONTEND=noninteractive
stamp=/var/lib/apt/periodic/medprof-update-stamp
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ]; then
  $SUDO apt-get update -q
  $SUDO mkdir -p "$(dirname "$stamp")" && $SUDO touch "$stamp"
fi
if [ "$mode" = runtime ]; then
  $SUDO apt-get install -y -q --no-install-recommends "${runtime_pkgs[@]}"
else
  $SUDO apt-get install -y -q --no-install-recommends "${build_pkgs[@]}" "${test_pkgs[@]}"
  # speedscope, pinned: a static web app that runs from file:// with no network
  # (tests/report/trace_viewer_test.cc looks for it here, or in $MEDPROF_SPEEDSCOPE_DIR).
  tools=/opt/medprof-test-tools
  if [ ! -f "$tools/node_modules/speedscope/dist/release/index.html" ]; then
    command -v npm >/dev/null || $SUDO apt-get install -y -q --no-install-recommends npm
    $SUDO mkdir -p "$tools"
    $SUDO npm install --prefix "$tools" --no-audit --no-fund speedscope@1.25.0
  fi
fi
