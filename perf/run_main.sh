#!/usr/bin/env bash
# perf/run_main.sh [KOLO-PERF FLAGS] - what a user of the library needs
# (scripts/setup.sh --user), the library and its tools built in BUILD
# (build), then a checked 4-rank all-reduce sweep, 8 B .. 64 MiB; exits
# non-zero if a call failed or an element was wrong (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
scripts/setup.sh --user
# Without the test suite: GoogleTest is a test package (tests/run_all.sh turns it on).
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_TESTS=OFF > /dev/null
targets=(kolo kolo_static kolo-perf kolo-memcpy-bw)
# libnccl.so.2 is built where kolo has CUDA (nvcc found, or the CPU model).
[ -d "$BUILD/nccl" ] && targets+=(nccl)
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" > /dev/null
exec "$BUILD/bin/kolo-perf" all_reduce -P 4 -b 8 -e 64M -f 4 -n 20 -w 5 -c 1 "$@"
