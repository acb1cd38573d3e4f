#!/usr/bin/env bash
# Builds kolo's libFuzzer targets (tests/fuzz/fuzz_*.c) with clang, ASan and
# UBSan in BUILD (default build-fuzz) and runs each for SECONDS (default 30)
# over a temporary copy of its seed corpus tests/fuzz/corpus/<name>/, so the
# checkout stays clean.  Fails when any target crashes, leaks, times out
# (-timeout=10 per input), runs out of memory or the sanitizers report;
# the input that did it is kept in BUILD/fuzz-artifacts/.  Prints each
# target's executions and coverage.
#   tests/fuzz/run.sh [SECONDS] [BUILD]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
SECS=${1:-30}
BUILD=${2:-build-fuzz}
JOBS=${JOBS:-$(nproc)}

build() {
  mkdir -p "$BUILD"
  if cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKOLO_CUDA=OFF \
       -DKOLO_TESTS=OFF -DKOLO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$BUILD/configure.log" 2>&1 &&
     cmake --build "$BUILD" -j"$(nproc)" --target kolo_fuzz > "$BUILD/build.log" 2>&1; then
    return 0
  fi
  tail -40 "$BUILD/configure.log" "$BUILD/build.log"
  echo "fuzz: the build in $BUILD failed (logs: $BUILD/configure.log, $BUILD/build.log)"
  return 1
}

# The last "cov: N ft: M" of a libFuzzer log, and its executions.
summary() {
  local log=$1 execs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
  echo "${execs:-?} executions, ${cov:-cov: ?}"
}

# One target: its verdict line in WORK/NAME.verdict, and the log's
# findings in WORK/NAME.failed when it found something.
run_target() {
  local bin=$1 work=$2 name seeds rc
  name=$(basename "$bin")
  name=${name#fuzz_}
  seeds=tests/fuzz/corpus/$name
  mkdir -p "$work/$name"
  if [ -d "$seeds" ]; then cp -r "$seeds/." "$work/$name/"; else echo "fuzz_$name: no seed corpus in $seeds"; fi
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$bin" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/$name-" "$work/$name" > "$work/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "fuzz_$name: ok, $(summary "$work/$name.log"), $(ls "$work/$name" | wc -l) inputs in the corpus" \
      > "$work/$name.verdict"
    return 0
  fi
  mkdir -p "$BUILD/fuzz-artifacts"
  cp "$work/$name"-* "$BUILD/fuzz-artifacts/" 2>/dev/null
  grep -E -A30 'ERROR|runtime error|fuzz property|SUMMARY' "$work/$name.log" | head -60 > "$work/$name.failed"
  echo "fuzz_$name: FAILED (exit $rc), $(summary "$work/$name.log"); input kept in $BUILD/fuzz-artifacts/" \
    > "$work/$name.verdict"
}

build || exit 1
WORK=$(mktemp -d) || exit 1
trap 'rm -rf "$WORK"' EXIT
bins=()
for bin in "$BUILD"/fuzz/fuzz_*; do [ -x "$bin" ] && bins+=("$bin"); done
[ ${#bins[@]} -gt 0 ] || { echo "fuzz: no targets were built in $BUILD/fuzz"; exit 1; }
for bin in "${bins[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
  run_target "$bin" "$WORK" &
done
wait
fail=0
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  name=${name#fuzz_}
  [ -f "$WORK/$name.failed" ] && { cat "$WORK/$name.failed"; fail=1; }
  if [ -f "$WORK/$name.verdict" ]; then cat "$WORK/$name.verdict"; else echo "fuzz_$name: no verdict"; fail=1; fi
done
echo "fuzz: ${#bins[@]} targets, $SECS s each, $JOBS at a time: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
