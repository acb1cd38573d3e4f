#!/usr/bin/env bash
# Configures and builds kolo into build/ (or $1), extra CMake args after it.
# Keeps the compiler output in $BUILD/build.log (CUDA register/spill report).
# KOLO_BUILD_TARGETS (space-separated) builds those targets only.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}; shift || true
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > /dev/null || exit 1
mkdir -p "$BUILD"
targets=()
[ -n "${KOLO_BUILD_TARGETS:-}" ] && read -r -a targets <<< "$KOLO_BUILD_TARGETS" && targets=(--target "${targets[@]}")
if ! cmake --build "$BUILD" -j"$(nproc)" "${targets[@]}" > "$BUILD/build.log" 2>&1; then
  grep -E -B2 -A8 "error" "$BUILD/build.log" | head -80
  echo "build failed: see $BUILD/build.log"
  exit 1
fi
echo "built $BUILD ($(grep -c 'ptxas info' "$BUILD/build.log" || true) ptxas report lines)"
