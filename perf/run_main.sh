#!/usr/bin/env bash
# The main job: set up, build, and run a 4-rank all-reduce sweep (4 forked
# processes, host memory, float32 sum, 8 B .. 64 MiB by factors of 4) with the
# check of every element.  Exits non-zero if a call failed or an element was
# wrong.  Extra arguments go to kolo-perf (e.g. -d bfloat16 -o max).
#   BUILD=dir perf/run_main.sh     # build directory (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
scripts/setup.sh
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$BUILD" -j"$(nproc)" --target kolo-perf > /dev/null
exec "$BUILD/bin/kolo-perf" all_reduce -P 4 -b 8 -e 64M -f 4 -n 20 -w 5 -c 1 "$@"
