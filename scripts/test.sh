#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs every test but `gpu`.
#   scripts/test.sh            # unit + integration
#   scripts/test.sh -L unit    # extra arguments go to ctest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build=${MEDPROF_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure --timeout 900 -LE gpu -j "${MEDPROF_TEST_JOBS:-2}" "$@"
# Fuzzing: each libFuzzer target for MEDPROF_FUZZ_SECONDS (60) from its committed seeds, in a
# clang/ASan build of its own (scripts/fuzz.sh; skipped without clang). Only in the full run
# (no ctest arguments); MEDPROF_FUZZ=0 skips it.
if [ $# -eq 0 ] && [ "${MEDPROF_FUZZ:-1}" != 0 ]; then
  "$root/scripts/fuzz.sh"
fi
