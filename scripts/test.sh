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
# A skipped test counts as failed (e.g. the real-Slurm tests where Slurm cannot start): ctest
# itself passes a run whose tests were "Not Run"/skipped, so the log is read for them, and a
# GTEST_SKIP inside a passing binary shows only in that binary's XML report, so those are read too.
rm -rf "$build/gtest-xml"
export GTEST_OUTPUT="xml:$build/gtest-xml/"
set +e
ctest --output-on-failure --timeout 900 -LE gpu -j "${MEDPROF_TEST_JOBS:-2}" "$@" 2>&1 | tee "$build/ctest.log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || exit "$rc"
if grep -qE '\*\*\*Skipped|\*\*\*Not Run|Not Run \(Disabled\)' "$build/ctest.log"; then
  echo "test.sh: skipped tests count as failed:" >&2
  grep -E '\*\*\*Skipped|\*\*\*Not Run|Not Run \(Disabled\)' "$build/ctest.log" >&2
  exit 1
fi
if grep -l 'result="skipped"' "$build"/gtest-xml/*.xml >/dev/null 2>&1; then
  echo "test.sh: skipped test cases count as failed:" >&2
  grep -H -o '<testcase name="[^"]*"[^>]*result="skipped"' "$build"/gtest-xml/*.xml >&2
  exit 1
fi
# Fuzzing: each libFuzzer target for MEDPROF_FUZZ_SECONDS (60) from its committed seeds, in a
# clang/ASan build of its own (scripts/fuzz.sh; skipped without clang). Only in the full run
# (no ctest arguments); MEDPROF_FUZZ=0 skips it.
if [ $# -eq 0 ] && [ "${MEDPROF_FUZZ:-1}" != 0 ]; then
  "$root/scripts/fuzz.sh"
fi
