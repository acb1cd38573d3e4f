#!/usr/bin/env bash
# check_install.sh [BUILD] - kolo as another project uses it (run_all.sh's
# "install + examples" step; BUILD defaults to build/, already built).
# BUILD on the CUDA model (-DKOLO_CUDA=SIM, which installs nothing): only
# examples/nccl.c, built against BUILD's libnccl.so.2 and run on the model.
# Otherwise:
#  1. `cmake --install` into BUILD/install-staging: the files in place,
#     libkolo.so.1 without a CUDA runtime dependency, no CPU model of the GPU
#  2. README's example is examples/processes.c, and README's build line
#     builds it against BUILD/lib; it runs, piped
#  3. examples/ configured with find_package(kolo) against the staging prefix,
#     built, and run: each exits 0 and prints what it promises
#     ("= V (expect V)" lines); mpirun's through Debian's mpirun
#  4. pkg-config: kolo.pc and kolo_static.pc build and link a program
#  5. a host-only program runs where the CUDA runtime cannot be found (the
#     loader without its cache), and koloMemCuda is refused there in words
# Exit 0 when all hold; each failure is named on a FAIL line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
BUILD=$(realpath "${1:-build}") || exit 2
[ -f "$BUILD/CMakeCache.txt" ] || { echo "check_install: $BUILD is not a configured build" >&2; exit 2; }
PREFIX=$BUILD/install-staging
WORK=$BUILD/package-check
EXAMPLES=$BUILD/examples
fail=0
# (No `| grep -q` below: with pipefail, grep leaving early fails the writer.)
failed() { echo "FAIL: $*"; fail=1; }
rm -rf "$PREFIX" "$WORK" "$EXAMPLES"
mkdir -p "$WORK" || exit 2

# Runs a program with its output piped to WORK/NAME.out (a crash or hang of
# a rank is bounded by KOLO_TIMEOUT_MS, the whole run by timeout).
run() { # name, command...
  local name=$1
  shift
  KOLO_TIMEOUT_MS=60000 timeout -k 5 120 "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
}
# NAME.out holds at least MIN "= V (expect V)" lines and none that differ.
expect_lines() { # name, min
  local good bad
  good=$(grep -cE '= ([^ ,]+) \(expect \1\)' "$WORK/$1.out")
  bad=$(grep -F '(expect' "$WORK/$1.out" | grep -cvE '= ([^ ,]+) \(expect \1\)')
  if [ "$good" -lt "$2" ] || [ "$bad" != 0 ]; then
    failed "$1 printed $good of the $2 expected results, $bad wrong:"
    sed 's/^/    /' "$WORK/$1.out" "$WORK/$1.err" | head -20
    return 1
  fi
  echo "ok: $1 ($good results as expected)"
}
run_example() { # name, min lines, command...
  local name=$1 min=$2 rc
  shift 2
  run "$name" "$@"
  rc=$?
  if [ $rc = 77 ]; then
    echo "SKIP: $name: $(head -1 "$WORK/$name.out")"
  elif [ $rc != 0 ]; then
    failed "$name exited $rc:"
    sed 's/^/    /' "$WORK/$name.out" "$WORK/$name.err" | head -20
  else
    expect_lines "$name" "$min"
  fi
}

# A build on the CUDA model installs nothing (cmake/kolo_package.cmake), and
# a GPU-less machine skips examples/nccl.c against an installed kolo: here
# the example, unmodified, is built against the model build's libnccl.so.2
# and kolo's nccl.h and runs on the model's devices, where it must pass (its
# "no CUDA device" exit 77 is a failure: the model has devices).
nccl_on_model() {
  local inc rc
  echo "--- the NCCL example on the CUDA model: examples/nccl.c against $BUILD/lib/libnccl.so.2"
  # The toolkit's include dir (cuda_runtime.h): where CMake found its nccl.h.
  inc=$(dirname "$(sed -n 's/^KOLO_TOOLKIT_NCCL_H:FILEPATH=//p' "$BUILD/CMakeCache.txt")")
  if [ ! -f "$BUILD/lib/libnccl.so.2" ] || [ ! -f "$BUILD/lib/libkolo_cudasim.so" ]; then
    failed "$BUILD has no lib/libnccl.so.2 or lib/libkolo_cudasim.so (build its nccl target)"
    return
  fi
  if ! cc -std=c11 -Wall -Wextra -Werror -I"$ROOT/nccl" -I"$inc" examples/nccl.c -o "$WORK/nccl" \
       -L"$BUILD/lib" -lnccl -lkolo_cudasim -Wl,-rpath,"$BUILD/lib" > "$WORK/nccl-cc.log" 2>&1; then
    failed "examples/nccl.c does not build against $BUILD's libnccl.so.2:"
    head -10 "$WORK/nccl-cc.log"
    return
  fi
  readelf -d "$WORK/nccl" | grep 'NEEDED.*\[libnccl\.so\.2\]' > /dev/null || failed "nccl does not load libnccl.so.2"
  run nccl "$WORK/nccl"
  rc=$?
  if [ $rc = 77 ]; then
    failed "nccl exited 77 on the CUDA model, where devices are the model's: $(sed -n '1s/^SKIP: //p' "$WORK/nccl.out")" \
      "(KOLO_SIM_GPUS=${KOLO_SIM_GPUS:-unset, 2})"
  elif [ $rc != 0 ]; then
    failed "nccl exited $rc on the CUDA model:"
    sed 's/^/    /' "$WORK/nccl.out" "$WORK/nccl.err" | head -20
  else
    expect_lines nccl "${KOLO_SIM_GPUS:-2}"
  fi
}
if grep -x 'KOLO_CUDA:STRING=SIM' "$BUILD/CMakeCache.txt" > /dev/null; then
  nccl_on_model
  if [ $fail = 0 ]; then echo "check_install: passed (CUDA model: the NCCL example)"; else echo "check_install: FAILED"; fi
  exit $fail
fi

echo "--- 1. cmake --install into $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" > "$WORK/install.log" 2>&1 || { failed "cmake --install:"; tail -5 "$WORK/install.log"; exit 1; }
for f in include/kolo.h include/kolo_fusion.h lib/libkolo.so lib/libkolo_static.a lib/pkgconfig/kolo.pc \
         lib/pkgconfig/kolo_static.pc lib/cmake/kolo/koloConfig.cmake lib/cmake/kolo/koloConfigVersion.cmake \
         bin/kolo-perf bin/kolo-memcpy-bw share/kolo/models/resnet50.txt share/kolo/plot.py; do
  [ -e "$PREFIX/$f" ] || failed "the install has no $f"
done
soname=$(readelf -d "$PREFIX/lib/libkolo.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libkolo.so.1 ] || failed "libkolo.so's SONAME is '$soname', not libkolo.so.1"
ls "$PREFIX"/lib/libkolo.so.1.*.* > /dev/null 2>&1 || failed "no lib/libkolo.so.1.x.y"
if ldd "$PREFIX/lib/libkolo.so" | grep cudart > /dev/null; then failed "libkolo.so depends on the CUDA runtime:"; ldd "$PREFIX/lib/libkolo.so"; fi
[ -z "$(find "$PREFIX" -name '*cudasim*')" ] || failed "the install holds the CPU model of the GPU (cudasim)"
echo "installed: $(find "$PREFIX" -type f | wc -l) files; SONAME $soname; no libcudart in ldd"

echo "--- 2. README's example and build line"
sed -n '/^```c$/,/^```$/p' README.md | sed '1d;$d' > "$WORK/example.c"
diff -u examples/processes.c "$WORK/example.c" > "$WORK/readme.diff" ||
  { failed "README's example differs from examples/processes.c:"; head -20 "$WORK/readme.diff"; }
line=$(grep -m1 '^cc example.c ' README.md)
if [ -z "$line" ]; then
  failed "README has no 'cc example.c ...' build line"
else
  line=${line//example.c/$WORK/example.c}
  line=${line//-o example/-o $WORK/example}
  line=${line//build\/lib/${BUILD#"$ROOT/"}/lib}
  if (eval "$line") > "$WORK/readme-cc.log" 2>&1; then
    run_example readme-example 4 "$WORK/example"
  else
    failed "README's build line failed: $line"
    head -5 "$WORK/readme-cc.log"
  fi
fi

echo "--- 3. examples/ against the installed package (find_package(kolo))"
if cmake -S examples -B "$EXAMPLES" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     > "$WORK/examples-cmake.log" 2>&1 &&
   cmake --build "$EXAMPLES" -j"$(nproc)" > "$WORK/examples-build.log" 2>&1; then
  grep "kolo examples:" "$WORK/examples-cmake.log" | sed 's/^-- //'
  run_example processes 4 "$EXAMPLES/processes"
  run_example threads 4 "$EXAMPLES/threads"
  run_example fusion 6 "$EXAMPLES/fusion"
  run_example fusion_sketch 8 "$EXAMPLES/fusion_sketch"
  if [ -x "$EXAMPLES/processes_static" ]; then
    run_example processes_static 4 "$EXAMPLES/processes_static"
    readelf -d "$EXAMPLES/processes_static" | grep 'libkolo\.so' > /dev/null && failed "processes_static loads libkolo.so"
  else
    failed "processes_static was not built (kolo::kolo_static not found)"
  fi
  objdump -T "$EXAMPLES/processes" | grep -E '\(KOLO_1\) +koloAllReduce$' > /dev/null ||
    failed "processes does not bind koloAllReduce at version KOLO_1"
  secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  port=$((20000 + RANDOM % 20000))
  run_example mpirun 2 mpirun -np 2 --oversubscribe --allow-run-as-root \
    -x KOLO_ROOT=127.0.0.1:$port -x KOLO_SECRET="$secret" -x KOLO_TIMEOUT_MS=60000 "$EXAMPLES/mpirun_allreduce"
  if [ -x "$EXAMPLES/nccl" ]; then
    run_example nccl 1 "$EXAMPLES/nccl"
  else
    echo "SKIP: nccl: this kolo has no NCCL layer yet (no kolo::nccl)"
  fi
else
  failed "examples/ did not configure or build against the install:"
  grep -hE -A5 "Error|error" "$WORK/examples-cmake.log" "$WORK/examples-build.log" | head -30
fi

echo "--- 4. pkg-config"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config's words are flags
if cc examples/processes.c -o "$WORK/pc-shared" $(pkg-config --cflags --libs kolo) -Wl,-rpath,"$PREFIX/lib" &&
   cc examples/processes.c -o "$WORK/pc-static" $(pkg-config --cflags --libs kolo_static) &&
   cc tests/package/cuda_refused.c -o "$WORK/cuda_refused" $(pkg-config --cflags --libs kolo) -Wl,-rpath,"$PREFIX/lib"
then
  run_example pkg-config-kolo 4 "$WORK/pc-shared"
  run_example pkg-config-kolo_static 4 "$WORK/pc-static"
else
  failed "a program did not build with pkg-config's kolo / kolo_static flags"
fi

echo "--- 5. without a CUDA runtime: the loader without its cache, nor LD_LIBRARY_PATH"
ldso=$(readelf -l "$EXAMPLES/processes" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')
hide=("$ldso" --inhibit-cache --library-path /nonexistent)
# The control: a program that needs libcudart.so starts normally, and not so.
cudart=$(sed -n 's/^CUDA_cudart_LIBRARY:FILEPATH=//p' "$BUILD/CMakeCache.txt")
if [ -n "$cudart" ] && [ -f "$cudart" ]; then
  if cc tests/package/needs_cudart.c -o "$WORK/needs_cudart" "$cudart" && "$WORK/needs_cudart" &&
     ! "${hide[@]}" "$WORK/needs_cudart" 2> "$WORK/needs_cudart.err"; then
    echo "control: a program linked to $(basename "$cudart") does not start there: $(head -c 120 "$WORK/needs_cudart.err")"
  else
    failed "the control did not start normally, or did start without the loader cache: libcudart is not hidden"
  fi
else
  echo "control skipped: this build found no CUDA runtime (CUDA_cudart_LIBRARY)"
fi
if [ -n "$ldso" ] && [ -x "$EXAMPLES/processes" ]; then
  ldd "$EXAMPLES/processes" | grep cudart > /dev/null && failed "processes needs a CUDA runtime: $(ldd "$EXAMPLES/processes" | grep cudart)"
  run_example no-cudart-processes 4 "${hide[@]}" "$EXAMPLES/processes"
  if [ -x "$WORK/cuda_refused" ]; then
    run cuda-refused "${hide[@]}" "$WORK/cuda_refused"
    rc=$?
    if [ $rc = 77 ]; then
      cat "$WORK/cuda-refused.out"
    elif [ $rc = 0 ] && grep -E "libcuda\.so\.1|this build of kolo has none" "$WORK/cuda-refused.out" > /dev/null; then
      echo "ok: $(cat "$WORK/cuda-refused.out")"
    else
      failed "koloMemCuda without CUDA: exit $rc, and the refusal must say what is missing:"
      sed 's/^/    /' "$WORK/cuda-refused.out" "$WORK/cuda-refused.err" | head -5
    fi
  fi
else
  failed "no examples/processes to run without a CUDA runtime"
fi

if [ $fail = 0 ]; then echo "check_install: passed"; else echo "check_install: FAILED"; fi
exit $fail
