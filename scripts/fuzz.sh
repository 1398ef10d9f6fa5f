#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang + ASan/UBSan and runs each from its committed
# seed corpus (fuzz/corpus/<target>/) for a fixed time. Any crash, leak or sanitizer report
# fails the script; the reproducer is left in $out/<target>/ (crash-*, leak-*, timeout-*).
#
#   scripts/fuzz.sh                 # every target, 60 s each (MEDPROF_FUZZ_SECONDS)
#   scripts/fuzz.sh ncu_csv_fuzzer  # one target
#
# Skips (exit 0, saying so) when clang's libFuzzer runtime is missing. CI runs it from
# scripts/test.sh (ctest entry `fuzz_smoke`); the build is server+client only, no LibTorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${MEDPROF_FUZZ_SECONDS:-60}
build=${MEDPROF_FUZZ_BUILD_DIR:-$root/build-fuzz}
out=${MEDPROF_FUZZ_OUT:-$build/findings}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(worker_stream_fuzzer ncu_csv_fuzzer config_fuzzer request_fuzzer)

if ! command -v clang++ >/dev/null || ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long){return 0;}' |
     clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz.sh: clang++ with -fsanitize=fuzzer is not available (install clang: scripts/install-deps.sh); skipped"
  exit 0
fi

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEDPROF_BUILD_FUZZERS=ON \
  -DMEDPROF_COMPONENTS=server -DMEDPROF_WITH_TORCH=OFF -DMEDPROF_WITH_CUDA=OFF -DMEDPROF_BUILD_TESTS=OFF \
  -DMEDPROF_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "${MEDPROF_BUILD_JOBS:-2}" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_container_overflow=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target: its seeds copied to a scratch corpus (which grows; the committed seeds stay as
# they are), then `seconds` of fuzzing. Writes $out/<target>/{log.txt,result}.
fuzz_one() {
  local t=$1 corpus
  corpus=$(mktemp -d)
  cp -r "$root/fuzz/corpus/$t/." "$corpus/" 2>/dev/null || true
  rm -rf "${out:?}/$t" && mkdir -p "$out/$t"
  if "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
       -artifact_prefix="$out/$t/" -print_final_stats=1 "$corpus" 2>"$out/$t/log.txt"; then
    echo "ok $(grep -E '^stat::number_of_executed_units' "$out/$t/log.txt" | awk '{print $2}') runs," \
         "corpus $(find "$root/fuzz/corpus/$t" -type f | wc -l) -> $(find "$corpus" -type f | wc -l)" >"$out/$t/result"
  else
    echo "FAILED" >"$out/$t/result"
  fi
  rm -rf "$corpus"
}

# Targets run MEDPROF_FUZZ_PARALLEL (2) at a time: the CI machine has 2 cores.
parallel=${MEDPROF_FUZZ_PARALLEL:-2}
echo "fuzzing ${#targets[@]} target(s), ${seconds} s each, ${parallel} at a time"
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n; running=$((running - 1)); fi
done
wait
status=0
for t in "${targets[@]}"; do
  result=$(cat "$out/$t/result" 2>/dev/null || echo FAILED)
  echo "$t: $result"
  if [ "$result" = FAILED ]; then
    echo "!! $t found a problem; reproducer (crash-*, leak-*, timeout-*) and log in $out/$t/"
    tail -40 "$out/$t/log.txt"
    status=1
  fi
done
exit $status
