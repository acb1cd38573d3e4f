#!/usr/bin/env bash
# tests/cuda_seed_sweep.sh - the long, offline form of CI's seeded step: the
# seeded set of CUDA cases (tests/cuda_sets.sh) on the CPU model under many
# seeds of its orders (KOLO_SIM_SEED: a block's warps, block placement, small
# pauses), each seed also in the weak-memory mode (KOLO_SIM_WEAK=1: stores
# landing late and out of order).  CI runs 3 seeds; a sweep looks further.
# Stops at the first seed that fails and prints the command that replays it.
#
#   tests/cuda_seed_sweep.sh                        # build-sim, seeds 1..100
#   FIRST=101 COUNT=1000 tests/cuda_seed_sweep.sh build-sim
#   WEAK=0 SET=CUDA_TESTS COUNT=5 tests/cuda_seed_sweep.sh   # every CUDA test, 5 seeds
#
# Environment: FIRST (1), COUNT (100), SET (the name of a set in
# tests/cuda_sets.sh: CUDA_WEAK_TESTS, the seeded set and SIMPLE calls), WEAK
# (1: each seed in both modes; 0: the ordinary mode only), JOBS (ctest -j: 2).
# Exit status: 0 when every seed passed, 1 at the first failure, 2 on bad use.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-build-sim}
FIRST=${FIRST:-1}
COUNT=${COUNT:-100}
SET=${SET:-CUDA_WEAK_TESTS}
WEAK=${WEAK:-1}
JOBS=${JOBS:-2}
. tests/cuda_sets.sh
REGEX=${!SET:-}
[ -n "$REGEX" ] || { echo "cuda_seed_sweep: no set $SET in tests/cuda_sets.sh" >&2; exit 2; }
[ -f "$BUILD/CTestTestfile.cmake" ] || {
  echo "cuda_seed_sweep: $BUILD is not a ctest build dir (build it: scripts/build.sh $BUILD -DKOLO_CUDA=SIM)" >&2
  exit 2
}
modes=(0)
[ "$WEAK" = 0 ] || modes=(0 1)

# run SEED WEAK: the set under that seed and mode; its log in $BUILD.
run() {
  local log="$BUILD/seed-sweep.$1.$2.log"
  KOLO_SIM_SEED=$1 KOLO_SIM_WEAK=$2 CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
    ctest --test-dir "$BUILD" --timeout 300 -j"$JOBS" --output-on-failure -R "$REGEX" > "$log" 2>&1 && rm -f "$log"
}

start=$SECONDS
for ((seed = FIRST; seed < FIRST + COUNT; seed++)); do
  for weak in "${modes[@]}"; do
    if ! run "$seed" "$weak"; then
      echo "cuda_seed_sweep: seed $seed failed (KOLO_SIM_WEAK=$weak): $BUILD/seed-sweep.$seed.$weak.log"
      grep -E "\((Failed|Timeout|SEGFAULT|Subprocess aborted)\)" "$BUILD/seed-sweep.$seed.$weak.log" | head -20
      echo "replay: KOLO_SIM_SEED=$seed KOLO_SIM_WEAK=$weak CUDA_DEVICE_MAX_CONNECTIONS=32 ctest --test-dir $BUILD --output-on-failure -R '<a case above>'"
      exit 1
    fi
  done
  echo "seed $seed: passed (modes: ${modes[*]}; $((SECONDS - start)) s so far)"
done
echo "cuda_seed_sweep: seeds $FIRST..$((FIRST + COUNT - 1)) passed ($SET, weak modes ${modes[*]}, $((SECONDS - start)) s)"
