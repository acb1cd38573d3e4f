#!/usr/bin/env bash
# The main job: set up what a user of the library needs (scripts/setup.sh
# --user), build the library and its tools (libkolo.so, libkolo_static.a,
# libnccl.so.2 where built, kolo-perf), and run a 4-rank all-reduce sweep
# (4 forked processes, host memory, float32 sum, 8 B .. 64 MiB by factors of
# 4) with the check of every element.  Exits non-zero if a call failed or an
# element was wrong.  Extra arguments go to kolo-perf (e.g. -d bfloat16 -o max).
#   BUILD=dir perf/run_main.sh     # build directory (default build)
# The tests' packages and suites are tests/run_all.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
scripts/setup.sh --user
# A new build directory is configured without the test suite (GoogleTest is
# a test package); tests/run_all.sh turns it on.
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_TESTS=OFF > /dev/null
targets=(kolo kolo_static kolo-perf kolo-memcpy-bw)
# libnccl.so.2 is built where kolo has CUDA (nvcc found, or the CPU model).
[ -d "$BUILD/nccl" ] && targets+=(nccl)
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" > /dev/null
exec "$BUILD/bin/kolo-perf" all_reduce -P 4 -b 8 -e 64M -f 4 -n 20 -w 5 -c 1 "$@"
