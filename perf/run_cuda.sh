#!/usr/bin/env bash
# perf/run_cuda.sh - the whole GPU check of kolo in one command on an H100 or
# H200 (sm_90), within 10 minutes: build, the GPU probe, the CUDA runtime's
# rules, the CUDA tests, compute-sanitizer, the benchmarks and a summary.
# docs/dev/gpu-check.md says what each step does, the budgets, the
# environment and the exit status (0 passed, 1 failed, 2 no usable GPU).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD

BUILD=${BUILD:-build-sm90}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD  # ctest runs inside it
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc)}
KIT=${KIT:-$ROOT/.gpukit}
GPU=${GPU:-0}
NRANKS=${NRANKS:-8}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
LAT_ITERS=${LAT_ITERS:-1000}
LAT_WARMUP=${LAT_WARMUP:-100}
export KOLO_TIMEOUT_MS=${KOLO_TIMEOUT_MS:-20000}
# A hardware queue per stream: with fewer, a rank's work can wait behind
# another rank's spinning kernel (docs/dev/gpu-check.md).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
ALLOW_NO_GPU=${ALLOW_NO_GPU:-0}
TOTAL_BUDGET=${TOTAL_BUDGET:-570}
BUDGET_BUILD=${BUDGET_BUILD:-240}
BUDGET_GPU=${BUDGET_GPU:-30}
BUDGET_RULES=${BUDGET_RULES:-60}
BUDGET_TESTS=${BUDGET_TESTS:-210}
BUDGET_SANITIZER=${BUDGET_SANITIZER:-30}
BUDGET_MEMCHECK=${BUDGET_MEMCHECK:-60}
BUDGET_RACECHECK=${BUDGET_RACECHECK:-60}
BUDGET_SYNCCHECK=${BUDGET_SYNCCHECK:-60}
BUDGET_PRIMS=${BUDGET_PRIMS:-60}
BUDGET_ALLREDUCE=${BUDGET_ALLREDUCE:-90}
BUDGET_LATENCY=${BUDGET_LATENCY:-30}
BUDGET_CHANNELS=${BUDGET_CHANNELS:-40}
CHANNELS=${CHANNELS:-'2 4 8 16'}  # KOLO_NCHANNELS of the channels step
# The tests: each binary once, its cases in one process (TESTS_VIA=binary:
# a CUDA context per binary, not per case, as ctest's 1.3 s per case spent
# the budget at 166 of 466 on an H200), or one ctest entry per case.
TESTS_VIA=${TESTS_VIA:-binary}
TESTS_FILTER=${TESTS_FILTER:-'Cuda*:AllTypesOps/CudaReduceTest.*:FusionCuda.*:LLFormat.*-CudaRules*'}
TESTS_REGEX=${TESTS_REGEX:-'^(Cuda|AllTypesOps/CudaReduceTest\.|FusionCuda\.|LLFormat\.)'}
TESTS_EXCLUDE='^CudaRules'  # the rules step runs test_cuda_runtime_rules
TEST_BINARIES=(test_e2e_cuda test_e2e_cuda_algos test_cuda_reduce test_cuda_plan test_fusion test_ll_format
  test_cuda_runtime_rules)
TEST_JOBS=${TEST_JOBS:-1}
# Small cases for the sanitizers (docs/dev/gpu-check.md).
SAN_CASES=(
  CudaThreads/CudaProtocolSwitch.AroundLLThreshold/AllReduce_2ranks
  CudaThreads/CudaProtocolSwitch.AroundLLThreshold/Broadcast_3ranks
  CudaThreads/CudaProtocolSwitch.AroundLLThreshold/SendRecv_2ranks
  CudaThreads/CudaGraph.CaptureReplayAllReduce/2ranks
  CudaThreads/CudaGrid.SmallCounts/AllReduce_2ranks_onethread
)
SAN_FILTER=${SAN_FILTER:-$(IFS=:; echo "${SAN_CASES[*]}")}
SAN_ERROR_RC=86  # compute-sanitizer's exit status when it found errors
OUT=${OUT:-$(mktemp -d -t kolo-cuda.XXXXXX)}
WORK=$BUILD/run_cuda  # raw outputs of this run; $OUT gets at most 7 files
P=$BUILD/bin/kolo-perf
S=$((256 << 20))
DEADLINE=$((SECONDS + TOTAL_BUDGET))

# ---- steps: budgets, bounded commands, results ---------------------------
ROWS=()
declare -A ROW_STATUS ROW_SECS ROW_NOTE ROW_MORE  # ROW_MORE: lines under the row
STEP='' STEP_T0=0 STEP_END=0

# begin_step NAME BUDGET: prints the step's header and sets its end, at most
# BUDGET seconds from now and never past the deadline.  Fails, recording the
# step as not run, when no time is left.
begin_step() {
  STEP=$1 STEP_T0=$SECONDS STEP_END=$((SECONDS + $2))
  local budget="budget $2 s"
  if [ "$STEP_END" -gt "$DEADLINE" ]; then
    STEP_END=$DEADLINE
    budget="budget $((STEP_END - SECONDS)) s: what is left of the total $TOTAL_BUDGET s"
  fi
  echo
  echo "==== $STEP ($budget)"
  if [ "$STEP_END" -le "$SECONDS" ]; then
    end_step FAIL "not run: the total budget of $TOTAL_BUDGET s was spent"
    return 1
  fi
}

# end_step STATUS NOTE: records the current step and prints its time.
end_step() {
  record "$STEP" "$1" $((SECONDS - STEP_T0)) "$2"
  echo "==== $STEP: $1 in $((SECONDS - STEP_T0)) s${2:+: $2}"
}

# record NAME STATUS SECONDS NOTE: one row of the summary.
record() {
  ROWS+=("$1")
  ROW_STATUS[$1]=$2 ROW_SECS[$1]=$3 ROW_NOTE[$1]=$4
}

# bounded CMD...: CMD, killed (with its process group) at the step's end;
# exit status 124 when it ran out of time or none was left.
bounded() {
  local left=$((STEP_END - SECONDS))
  [ "$left" -gt 0 ] || return 124
  timeout -k 10 "$left" "$@"
  local rc=$?
  [ "$rc" -eq 137 ] && rc=124  # killed by -k after ignoring the TERM
  return "$rc"
}

# ---- build -----------------------------------------------------------------
# The kit's GoogleTest, built and installed under $BUILD once (seconds);
# prints the folder of its GTestConfig.cmake.
kit_gtest() {
  local prefix=$BUILD/gtest-kit gen=()
  command -v ninja > /dev/null && gen=(-G Ninja)
  if [ ! -f "$prefix/installed" ]; then
    echo "# building the kit's GoogleTest into $prefix" >&2
    bounded cmake -S "$KIT/googletest" -B "$prefix/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
      -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >> "$WORK/build.log" 2>&1 &&
      bounded cmake --build "$prefix/build" -j "$JOBS" >> "$WORK/build.log" 2>&1 &&
      bounded cmake --install "$prefix/build" >> "$WORK/build.log" 2>&1 || return
    touch "$prefix/installed"
  fi
  echo "$prefix/lib/cmake/GTest"
}

# The kit's libibverbs, where it loads here: sets IB_ARGS for CMake and puts
# it on LD_LIBRARY_PATH (it needs libnl at link and run time).  Otherwise
# CMake looks for a system one (none: no ib provider).
IB_ARGS=()
kit_ibverbs() {
  local lib=$KIT/ibverbs/lib missing
  IB_ARGS=(-U 'KOLO_IBVERBS_*')  # forget an earlier run's choice
  [ -e "$lib/libibverbs.so.1" ] || return 0
  missing=$(command -v ldd > /dev/null && LD_LIBRARY_PATH=$lib ldd "$lib/libibverbs.so.1" 2>&1 |
    grep -m 1 'not found' | sed 's/^[[:space:]]*//')
  [ -z "$missing" ] || { echo "# the kit's libibverbs does not load here: $missing"; return 0; }
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  IB_ARGS=(-DKOLO_IBVERBS_LIB="$lib/libibverbs.so" -DKOLO_IBVERBS_INCLUDE="$KIT/ibverbs/include")
}

# configure_kolo: cmake for sm_90 with the tests; sets BUILD_NOTE (generator,
# jobs, what came from where).
BUILD_NOTE=
configure_kolo() {
  local args=(-DKOLO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKOLO_TESTS=ON -DCMAKE_BUILD_TYPE="$BUILD_TYPE")
  local gtest_from="system GoogleTest" gtest_dir rc
  # The generator of an existing build folder cannot change.
  if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja > /dev/null; then args+=(-G Ninja); fi
  if [ -d "$KIT/googletest" ]; then
    gtest_dir=$(kit_gtest) || { rc=$?; echo "# the kit's GoogleTest did not build"; return "$rc"; }
    args+=(-DGTest_DIR="$gtest_dir")
    gtest_from="GoogleTest from $(basename "$KIT")"
  fi
  kit_ibverbs
  args+=("${IB_ARGS[@]}")
  echo "# cmake -S . -B $BUILD ${args[*]}"
  bounded cmake -S . -B "$BUILD" "${args[@]}" >> "$WORK/build.log" 2>&1 || return
  local ib
  ib=$(sed -n 's/.*kolo: ibverbs net provider \(ON\|OFF\).*/\1/p' "$WORK/build.log" | tail -n 1)
  case "$ib:${IB_ARGS[0]}" in
    ON:-U) ib="ibverbs: system" ;;
    ON:*) ib="ibverbs from $(basename "$KIT")" ;;
    *) ib="no ibverbs (ib provider not built)" ;;
  esac
  BUILD_NOTE="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD/CMakeCache.txt"), $JOBS jobs, $BUILD_TYPE, sm_90; $gtest_from; $ib"
}

step_build() {
  begin_step build "$BUDGET_BUILD" || return
  : > "$WORK/build.log"
  local rc
  configure_kolo
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "# cmake --build $BUILD --target kolo-perf ${TEST_BINARIES[*]}"
    bounded cmake --build "$BUILD" -j "$JOBS" --target kolo-perf "${TEST_BINARIES[@]}" >> "$WORK/build.log" 2>&1
    rc=$?
  fi
  cp "$WORK/build.log" "$OUT/build.log"
  if [ "$rc" -eq 0 ]; then
    end_step PASS "$BUILD_NOTE"
    return
  fi
  grep -E -B2 -A8 'error|Error|not found|NOTFOUND' "$WORK/build.log" | tail -n 60
  if [ "$rc" -eq 124 ]; then
    end_step FAIL "timed out (build.log)"
  elif [ ! -d "$KIT/googletest" ] && grep -q 'Could NOT find GTest' "$WORK/build.log"; then
    end_step FAIL "no GoogleTest here: run perf/gpu_kit.sh on the dev machine and carry $(basename "$KIT")"
  else
    end_step FAIL "see build.log"
  fi
}

# ---- gpu -------------------------------------------------------------------
# A CUDA program that says in one line whether device $1 can run kolo (exit
# 0 yes, 1 no).  Built for nvcc's default target (PTX included), so that it
# runs, and reports, on any GPU.
write_probe() {
  cat > "$WORK/gpu_probe.cu" << 'EOF'
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void touch(int *p) { *p = 42; }
static int fail(const char *what, cudaError_t e) {
  printf("%s: %s\n", what, cudaGetErrorString(e));
  return 1;
}
int main(int argc, char **argv) {
  int dev = argc > 1 ? atoi(argv[1]) : 0, n = 0, h = 0, drv = 0, rt = 0, *d = nullptr;
  cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return fail("cudaGetDeviceCount", e);
  if (dev < 0 || dev >= n) {
    printf("device %d asked for, %d present\n", dev, n);
    return 1;
  }
  if ((e = cudaGetDeviceProperties(&p, dev)) != cudaSuccess) return fail("cudaGetDeviceProperties", e);
  if ((e = cudaSetDevice(dev)) != cudaSuccess) return fail("cudaSetDevice", e);
  if ((e = cudaMalloc(&d, sizeof *d)) != cudaSuccess) return fail("cudaMalloc", e);
  touch<<<1, 1>>>(d);
  if ((e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost)) != cudaSuccess) return fail("kernel, copy back", e);
  if ((e = cudaFree(d)) != cudaSuccess) return fail("cudaFree", e);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("%s, compute capability %d.%d, %d SMs, %.1f GiB, driver %d.%d, runtime %d.%d", p.name, p.major,
         p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, drv / 1000, drv % 1000 / 10,
         rt / 1000, rt % 1000 / 10);
  if (h != 42) {
    printf(": the kernel did not write\n");
    return 1;
  }
  if (p.major < 9) {
    printf(": kolo is built for sm_90\n");
    return 1;
  }
  printf("\n");
  return 0;
}
EOF
}

GPU_OK=0
step_gpu() {
  begin_step gpu "$BUDGET_GPU" || return
  local nvcc line rc
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2> /dev/null)
  write_probe
  if ! bounded "${nvcc:-nvcc}" -O2 -o "$WORK/gpu_probe" "$WORK/gpu_probe.cu" > "$WORK/gpu_probe.txt" 2>&1; then
    cat "$WORK/gpu_probe.txt"
    end_step FAIL "the probe did not compile"
    return
  fi
  line=$(bounded "$WORK/gpu_probe" "$GPU" 2>&1)
  rc=$?
  line=$(echo "$line" | tail -n 1)
  echo "# device $GPU: $line"
  if [ "$rc" -eq 0 ]; then
    GPU_OK=1
    end_step PASS "$line"
  else
    echo "run_cuda: no usable GPU (device $GPU: ${line:-exit status $rc}): kolo is built; tests, sanitizers and benchmarks need one"
    end_step SKIP "no usable GPU: ${line:-exit status $rc}"
  fi
}

# ---- rules -----------------------------------------------------------------
run_rules() { # LABEL QUEUES FILTER: test_cuda_runtime_rules, its output appended to rules.txt
  echo "######## test_cuda_runtime_rules --gtest_filter=$3, CUDA_DEVICE_MAX_CONNECTIONS=$2 ($1)" >> "$WORK/rules.txt"
  bounded env CUDA_DEVICE_MAX_CONNECTIONS="$2" "$BUILD/bin/test_cuda_runtime_rules" --gtest_filter="$3" \
    --gtest_color=no 2>&1 | tee -a "$WORK/rules.txt"
  return "${PIPESTATUS[0]}"
}

step_rules() {
  begin_step rules "$BUDGET_RULES" || return
  local rc1 rc2 passed failed skipped observed differ note
  : > "$WORK/rules.txt"
  run_rules "CUDA's default" 8 '*'
  rc1=$?
  run_rules "this run's" "$CUDA_DEVICE_MAX_CONNECTIONS" 'CudaRulesStreams.*'
  rc2=$?
  cp "$WORK/rules.txt" "$OUT/rules.txt"
  # GoogleTest's "[  PASSED  ] N tests." lines, one per run, summed
  read -r passed failed skipped <<< "$(awk '/^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[,.]/ { n[$2] += $4 }
    END { print n["PASSED"] + 0, n["FAILED"] + 0, n["SKIPPED"] + 0 }' "$WORK/rules.txt")"
  observed=$(grep -c '^\[ RULE ' "$WORK/rules.txt")
  differ=$(grep -c '^\[ RULE .*: DIFFERS$' "$WORK/rules.txt")
  note="$passed passed, $failed failed, $skipped skipped; $observed observed: $((observed - differ)) as the model, $differ differ"
  ROW_MORE[rules]=$(grep '^\[ RULE .*: DIFFERS$' "$WORK/rules.txt" | sed 's/^\[ RULE *\] /differs: /' | head -n 6)
  if [ "$rc1" -eq 124 ] || [ "$rc2" -eq 124 ]; then
    end_step FAIL "$note; timed out (rules.txt)"
  elif [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$passed" -gt 0 ] && [ "$skipped" -eq 0 ]; then
    end_step PASS "$note (rules.txt)"
  elif [ "$GPU_OK" != 1 ] && [ "$rc1" -eq 0 ] && [ "$passed" -eq 0 ]; then
    end_step SKIP "no usable GPU: $note"
  else
    end_step FAIL "$note (rules.txt)"
  fi
}

# ---- tests -----------------------------------------------------------------
# Counts in ctest's output FILE, one line per finished test ("  3/289 Test
# #24: NAME ....   Passed   0.02 sec"): sets T_PASSED, T_FAILED (failed,
# timed out, crashed, not run), T_SKIPPED, T_DISABLED, T_FAILED_NAMES.
count_tests() {
  local results
  results=$(grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ' "$1")
  local passed='  Passed +[0-9.]+ sec$' skipped='[*]{3}Skipped +[0-9.]+ sec$' disabled='[*]{3}Not Run [(]Disabled[)]'
  T_PASSED=$(grep -cE "$passed" <<< "$results")
  T_SKIPPED=$(grep -cE "$skipped" <<< "$results")
  T_DISABLED=$(grep -cE "$disabled" <<< "$results")
  T_FAILED_NAMES=$(grep -vE -e "$passed" -e "$skipped" -e "$disabled" <<< "$results" |
    sed -E 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: //; s/  # GetParam.*//; s/ [.]+.*$//; s/ *[*]{3}.*$//' |
    grep -v '^$')
  T_FAILED=$(grep -c . <<< "$T_FAILED_NAMES")
}

# The tests row's line under it: the first failed names (T_FAILED_NAMES),
# and where the rest are (WHERE).
failed_names_row() {
  [ "$T_FAILED" -gt 0 ] || return 0
  ROW_MORE[tests]="failed: $(head -n 6 <<< "$T_FAILED_NAMES" | paste -sd, - | sed 's/,/, /g')"
  [ "$T_FAILED" -le 6 ] || ROW_MORE[tests]+=", ... ($T_FAILED; see $1)"
}

# Counts in the GoogleTest output FILE of binaries run whole ("[       OK ]
# NAME (12 ms)", FAILED and SKIPPED alike: the lines with a time, not the
# final lists): sets the T_* of count_tests.
count_gtest() {
  local results
  results=$(grep -E '^\[ +(OK|FAILED|SKIPPED) +\] .* \([0-9]+ ms\)$' "$1")
  T_PASSED=$(grep -cE '^\[ +OK +\]' <<< "$results")
  T_SKIPPED=$(grep -cE '^\[ +SKIPPED +\]' <<< "$results")
  T_DISABLED=0
  T_FAILED_NAMES=$(grep -E '^\[ +FAILED +\]' <<< "$results" | sed -E 's/^\[ +FAILED +\] //; s/, where GetParam.*//; s/ \([0-9]+ ms\)$//')
  T_FAILED=$(grep -c . <<< "$T_FAILED_NAMES")
}

# The number of cases of binary B that TESTS_FILTER selects and that run
# (the list names disabled ones too: DISABLED_ suite or case).
count_cases() {
  "$BUILD/bin/$1" --gtest_list_tests --gtest_filter="$TESTS_FILTER" 2> /dev/null |
    awk '/^[^ ]/ { off = ($1 ~ /^DISABLED_/ || $1 ~ /[.\/]DISABLED_/) } /^  / && !off && $1 !~ /^DISABLED_/ { n++ }
      END { print n + 0 }'
}

# Each test binary once (TESTS_VIA=binary), in the step's time; a binary
# that crashes or runs out of time ends its own cases only.
step_tests_binary() {
  begin_step tests "$BUDGET_TESTS" || return
  local b n total=0 rc note log=$WORK/gtest.txt ends=()
  : > "$log"
  echo "# each binary once, --gtest_filter='$TESTS_FILTER', KOLO_TIMEOUT_MS=$KOLO_TIMEOUT_MS"
  for b in "${TEST_BINARIES[@]}"; do
    [ "$b" = test_cuda_runtime_rules ] && continue
    n=$(count_cases "$b")
    total=$((total + n))
    [ "$n" -gt 0 ] || continue
    echo "# $b: $n cases"
    bounded "$BUILD/bin/$b" --gtest_filter="$TESTS_FILTER" --gtest_color=no 2>&1 | tee -a "$log" |
      grep -E '^\[ +(FAILED|SKIPPED) +\] .* ms\)$|Failure$|^\[==========\] [0-9]+ tests? from'
    rc=${PIPESTATUS[0]}
    case $rc in
      0 | 1) ;;
      124) ends+=("$b ran out of time") ;;
      *) ends+=("$b ended with exit status $rc") ;;
    esac
  done
  cp "$log" "$OUT/tests.txt"
  count_gtest "$log"
  local finished=$((T_PASSED + T_FAILED + T_SKIPPED))
  note="$total CUDA tests: $T_PASSED passed, $T_FAILED failed, $T_SKIPPED skipped"
  [ "$finished" -lt "$total" ] && note+=", $((total - finished)) not reached"
  [ ${#ends[@]} -eq 0 ] || note+="; $(IFS=';'; echo "${ends[*]}" | sed 's/;/; /g')"
  failed_names_row tests.txt
  if [ ${#ends[@]} -eq 0 ] && [ "$T_FAILED" -eq 0 ] && [ "$finished" -eq "$total" ] && [ "$total" -gt 0 ]; then
    end_step PASS "$note"
  else
    end_step FAIL "$note"
  fi
}

step_tests() {
  [ "$TESTS_VIA" = ctest ] || { step_tests_binary; return; }
  begin_step tests "$BUDGET_TESTS" || return
  local total rc note log=$WORK/ctest.txt
  total=$(cd "$BUILD" && ctest -N -R "$TESTS_REGEX" -E "$TESTS_EXCLUDE" | sed -n 's/^Total Tests: //p')
  echo "# ctest -R '$TESTS_REGEX' -E '$TESTS_EXCLUDE' -j $TEST_JOBS: ${total:-?} tests, KOLO_TIMEOUT_MS=$KOLO_TIMEOUT_MS"
  (cd "$BUILD" && bounded ctest -R "$TESTS_REGEX" -E "$TESTS_EXCLUDE" -j "$TEST_JOBS" --output-on-failure \
    --output-junit "$WORK/tests.xml") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  [ -f "$WORK/tests.xml" ] && cp "$WORK/tests.xml" "$OUT/tests.xml"
  count_tests "$log"
  local finished=$((T_PASSED + T_FAILED + T_SKIPPED + T_DISABLED))
  note="${total:-?} CUDA tests: $T_PASSED passed, $T_FAILED failed, $T_SKIPPED skipped, $T_DISABLED disabled"
  [ -n "$total" ] && [ "$finished" -lt "$total" ] && note+=", $((total - finished)) not reached"
  [ "$rc" -ne 124 ] || note+="; timed out after $((SECONDS - STEP_T0)) s"
  failed_names_row "run_cuda.log, tests.xml"
  if [ "$rc" -eq 0 ] && [ "$T_FAILED" -eq 0 ] && [ "${total:-0}" -gt 0 ]; then
    end_step PASS "$note"
  else
    end_step FAIL "$note"
  fi
}

# ---- sanitizers ------------------------------------------------------------
SANITIZER=
# The probe under memcheck: does compute-sanitizer run on this device at all?
step_sanitizer() {
  local c
  for c in "$(command -v compute-sanitizer)" /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -x "$c" ] && SANITIZER=$c && break
  done
  if [ -z "$SANITIZER" ]; then
    echo "run_cuda: compute-sanitizer not found: memcheck, racecheck, synccheck SKIP"
    record sanitizer SKIP 0 "compute-sanitizer not found: memcheck, racecheck, synccheck not run"
    return 1
  fi
  begin_step sanitizer "$BUDGET_SANITIZER" || return
  local rc why
  bounded "$SANITIZER" --tool memcheck --error-exitcode "$SAN_ERROR_RC" "$WORK/gpu_probe" "$GPU" \
    > "$WORK/san_probe.txt" 2>&1
  rc=$?
  {
    echo "######## compute-sanitizer --tool memcheck gpu_probe $GPU: exit status $rc"
    cat "$WORK/san_probe.txt"
  } >> "$OUT/sanitizer.log"
  if [ "$rc" -eq 0 ]; then
    end_step PASS "compute-sanitizer $("$SANITIZER" --version 2> /dev/null | sed -n 's/^Version \([^ ]*\).*/\1/p') runs on this GPU"
    return 0
  fi
  why=$(grep -m 1 -iE 'not supported|error' "$WORK/san_probe.txt" | sed 's/^=* *//')
  [ "$rc" -eq 124 ] && why="the probe timed out under it"
  echo "run_cuda: compute-sanitizer refused this GPU (${why:-exit status $rc}): memcheck, racecheck, synccheck SKIP"
  end_step SKIP "refused this GPU (${why:-exit status $rc}): memcheck, racecheck, synccheck not run"
  return 1
}

# sanitize TOOL LABEL CMD...: CMD under compute-sanitizer TOOL, output to
# sanitizer.log and its findings (the "=========" lines, 30 at most) here;
# sets SAN_RESULT to a few words on the run.  Fails when the tool found
# errors, CMD failed, or time ran out.
sanitize() {
  local tool=$1 label=$2 rc errors warnings t0=$SECONDS
  shift 2
  echo "# $tool: $label"
  bounded "$SANITIZER" --tool "$tool" --error-exitcode "$SAN_ERROR_RC" "$@" > "$WORK/san.txt" 2>&1
  rc=$?
  label+=" ($((SECONDS - t0)) s)"
  {
    echo "######## compute-sanitizer --tool $tool $*: exit status $rc"
    cat "$WORK/san.txt"
  } >> "$OUT/sanitizer.log"
  grep '^=========' "$WORK/san.txt" | grep -v 'SUMMARY' | head -n 30
  grep 'SUMMARY' "$WORK/san.txt"
  # "ERROR SUMMARY: 2 errors"; racecheck: "RACECHECK SUMMARY: 3 hazards
  # displayed (2 errors, 1 warning)" (warnings do not fail the run).
  errors=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/p; s/.*SUMMARY: .*[(]([0-9]+) errors?,.*/\1/p' \
    "$WORK/san.txt" | tail -n 1)
  warnings=$(sed -nE 's/.*SUMMARY: .*, ([0-9]+) warnings?[)].*/\1/p' "$WORK/san.txt" | tail -n 1)
  if [ "$rc" -eq 124 ]; then
    SAN_RESULT="$label: timed out"
  elif [ "$rc" -eq "$SAN_ERROR_RC" ] || [ "${errors:-0}" -gt 0 ]; then
    SAN_RESULT="$label: ${errors:-some} errors"
  elif [ "$rc" -ne 0 ]; then
    SAN_RESULT="$label: failed under the tool (exit status $rc)"
  else
    SAN_RESULT="$label: ${errors:-0} errors${warnings:+, $warnings warnings}"
    return 0
  fi
  echo "# $tool: $SAN_RESULT"
  return 1
}

# step_sanitize TOOL BUDGET: the small grid under one tool.
step_sanitize() {
  local tool=$1 status=PASS note
  begin_step "$tool" "$2" || return
  sanitize "$tool" all_reduce "$P" all_reduce --mem cuda -t 2 --devices "$GPU" -b 8 -e 256K -f 8 -n 2 -w 1 -c 1 ||
    status=FAIL
  note=$SAN_RESULT
  sanitize "$tool" tests "$BUILD/bin/test_e2e_cuda" --gtest_filter="$SAN_FILTER" || status=FAIL
  end_step "$status" "$note; $SAN_RESULT"
}

# ---- benchmarks ------------------------------------------------------------
# bench NAME BUDGET ARGS...: kolo-perf ARGS, output here and in $WORK/NAME.txt.
bench() {
  local name=$1 budget=$2 rc
  shift 2
  begin_step "$name" "$budget" || return
  echo "# kolo-perf $*"
  bounded "$P" "$@" 2>&1 | tee "$WORK/$name.txt"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) end_step PASS "" ;;
    124) end_step FAIL "timed out" ;;
    *) end_step FAIL "exit status $rc" ;;
  esac
}

# Table rows: prims "size primitive type launch blocks threads time GB/s vs_memcpy #wrong";
# all_reduce "size count type redop root  time algbw busbw #wrong (out of place)  time algbw busbw #wrong (in place)".
field() { # FILE SIZE COLUMN [PRIMITIVE]: a column of the row of SIZE (and primitive)
  awk -v s="$2" -v c="$3" -v p="${4:-}" '$1 == s && (p == "" || $2 == p) { print $c; exit }' "$1" 2> /dev/null
}

# add_note ROW TEXT: appends a figure (if any) to a benchmark's summary row.
add_note() { [ -z "$2" ] || ROW_NOTE[$1]="${ROW_NOTE[$1]:+${ROW_NOTE[$1]}; }$2"; }

# The figures of the benchmarks, in detail here and in brief on their rows.
figures() {
  echo
  echo "# ==== figures (all measured above, in this run) ===="
  [ -s "$WORK/prims.txt" ] && prims_figures
  allreduce_figures
  latency_figures
  channels_figures
}

prims_figures() {
  echo "# primitives: GB/s (bytes read + written) over the D2D cudaMemcpyAsync GB/s at the same size"
  awk '/^# summary/ { on = 1 } on && /^#/ { print } /^# wrong output bytes/ { on = 0 }' "$WORK/prims.txt"
  echo "# per size, grid launch (vs_memcpy):"
  awk '$1 ~ /^[0-9]+$/ && $1 >= 67108864 && $4 == "grid" { printf "#   %11s  %6s  %9s  %s\n", $1, $2, $3, $9 }' \
    "$WORK/prims.txt"
  # Summary rows: "# primitive type launch vs_memcpy at".
  add_note prims "$(awk '/^# summary/ { on = 1; next } /^# wrong output bytes/ { on = 0 }
    on && NF == 6 && $5 ~ /^[0-9.]+$/ {
      n++; if (lo == "" || $5 < lo) { lo = $5; what = $2 " " $3 " " $4 }
    }
    END { if (n) printf "lowest ratio to the D2D copy at >= 64 MiB, of %d rows: %s (%s)", n, lo, what }
    ' "$WORK/prims.txt")"
}

# The 256 MiB all-reduce: what its kernels read and write per second beside
# the D2D copy rate.  awk's last line is the brief one, for the summary row.
allreduce_figures() {
  local mc place label col t busbw lines brief=
  mc=$(field "$WORK/prims.txt" "$S" 8 memcpy)
  for place in "out-of-place:6" "in-place:10"; do
    label=${place%%:*} col=${place##*:}
    t=$(field "$WORK/allreduce.txt" "$S" "$col")
    busbw=$(field "$WORK/allreduce.txt" "$S" $((col + 2)))
    if [ -z "$t" ]; then
      echo "# all-reduce 256 MiB ($label): no result"
      continue
    fi
    lines=$(awk -v n="$NRANKS" -v S="$S" -v t="$t" -v bb="$busbw" -v mc="${mc:-0}" -v label="$label" 'BEGIN {
      per_rank = 2 * (3 * n - 2) / n * S          # bytes read + written per rank and call: docs/dev/gpu-check.md
      rate = n * per_rank / (t * 1e-6) / 1e9      # all ranks of the GPU, GB/s
      printf "# all-reduce %d B, %d ranks on one GPU, %s: %.1f us, busbw %s GB/s\n", S, n, label, t, bb
      printf "#   kernels read+write %.0f B per rank (2(3n-2)/n S), %.0f B for the %d ranks: %.1f GB/s\n", per_rank, n * per_rank, n, rate
      if (mc > 0) printf "#   D2D copy at %d B: %.1f GB/s (read+write); kernels / copy = %.3f\n", S, mc, rate / mc
      else printf "#   D2D copy rate at %d B: not measured (prims failed)\n", S
      printf "%s busbw %s GB/s", label, bb
      if (mc > 0) printf ", kernels/copy %.3f", rate / mc
    }')
    echo "${lines%$'\n'*}"
    brief+="${brief:+; }${lines##*$'\n'}"
  done
  [ -z "$brief" ] || add_note allreduce "256 MiB, $NRANKS ranks: $brief"
}

latency_figures() {
  local f t_out t_in what
  for f in latency latency_graph; do
    t_out=$(field "$WORK/$f.txt" 8 6)
    t_in=$(field "$WORK/$f.txt" 8 10)
    what="plain"
    [ "$f" = latency_graph ] && what="--graph (per call within a graph of $LAT_ITERS)"
    echo "# 8-byte all-reduce latency, $NRANKS ranks on one GPU, $what: out-of-place ${t_out:-n/a} us, in-place ${t_in:-n/a} us"
    [ -n "$t_out$t_in" ] && add_note "$f" "8 B, $NRANKS ranks: ${t_out:-n/a} us out of place, ${t_in:-n/a} us in place"
  done
}

# The channels step: 2 ranks, 256 MiB, at each KOLO_NCHANNELS of CHANNELS.
# Each channel is one block per rank, so this says how the bandwidth of a
# rank grows with its blocks (the 8-rank run above holds 2 each).
step_channels() {
  begin_step channels "$BUDGET_CHANNELS" || return
  local ch rc status=PASS
  : > "$WORK/channels.txt"
  for ch in $CHANNELS; do
    echo "# KOLO_NCHANNELS=$ch kolo-perf all_reduce --mem cuda -t 2 -b 256M -e 256M" | tee -a "$WORK/channels.txt"
    KOLO_NCHANNELS=$ch bounded "$P" all_reduce --mem cuda --devices "$GPU" -t 2 -d float -o sum -b 256M -e 256M \
      -n 10 -w 3 -c 1 2>&1 | grep -vE '^#  Rank' | tee -a "$WORK/channels.txt"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || status=FAIL
  done
  end_step "$status" ""
}

channels_figures() {
  local ch busbw line=
  for ch in $CHANNELS; do
    busbw=$(awk -v c="KOLO_NCHANNELS=$ch" -v s="$S" '$2 == c { on = 1; next } /^# KOLO_NCHANNELS/ { on = 0 }
      on && $1 == s { print $8; exit }' "$WORK/channels.txt" 2> /dev/null)
    line+="${line:+, }$ch: ${busbw:-n/a}"
  done
  echo "# all-reduce 256 MiB, 2 ranks on one GPU, busbw (GB/s) by KOLO_NCHANNELS: $line"
  add_note channels "busbw GB/s by channels: $line"
}

step_benchmarks() {
  bench prims "$BUDGET_PRIMS" prims --devices "$GPU" -b 1M -e 1G -f 2 -n "$ITERS" -w "$WARMUP" -c 1
  bench allreduce "$BUDGET_ALLREDUCE" all_reduce --mem cuda --devices "$GPU" -t "$NRANKS" -d float -o sum -b 8 -e 256M \
    -f 2 -n "$ITERS" -w "$WARMUP" -c 1 --json "$OUT/allreduce.json"
  bench latency "$BUDGET_LATENCY" all_reduce --mem cuda --devices "$GPU" -t "$NRANKS" -d float -b 8 -e 8 \
    -n "$LAT_ITERS" -w "$LAT_WARMUP" -c 1
  bench latency_graph "$BUDGET_LATENCY" all_reduce --mem cuda --devices "$GPU" -t "$NRANKS" -d float -b 8 -e 8 \
    -n "$LAT_ITERS" -w "$LAT_WARMUP" -c 1 --graph
  step_channels
  figures
}

# ---- summary ---------------------------------------------------------------
# Prints the summary (and writes it to $OUT/summary.txt); returns the exit
# status of the whole check.
summary() {
  local row failed=() result code=0 rev line
  for row in "${ROWS[@]}"; do
    [ "${ROW_STATUS[$row]}" = FAIL ] && failed+=("$row")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    result="FAIL (${failed[*]})" code=1
  elif [ "$GPU_OK" != 1 ]; then
    result="NO GPU: built only" code=2
  else
    result=PASS
  fi
  if rev=$(git rev-parse --short HEAD 2> /dev/null); then
    git diff --quiet HEAD 2> /dev/null || rev+=" + changes"
  fi
  {
    echo
    echo "==================== kolo GPU check: summary ===================="
    echo "host $HOSTNAME; kolo ${rev:-?}; KOLO_TIMEOUT_MS=$KOLO_TIMEOUT_MS"
    printf '%-14s %-6s %6s  %s\n' step result time notes
    for row in "${ROWS[@]}"; do
      printf '%-14s %-6s %5ss  %s\n' "$row" "${ROW_STATUS[$row]}" "${ROW_SECS[$row]}" "${ROW_NOTE[$row]}"
      if [ -n "${ROW_MORE[$row]:-}" ]; then
        while IFS= read -r line; do printf '%29s%s\n' '' "$line"; done <<< "${ROW_MORE[$row]}"
      fi
    done
    printf '%-14s %-6s %5ss  %s\n' total "" "$SECONDS" "of a $TOTAL_BUDGET s budget"
    echo "result: $result (exit $code); log run_cuda.log and files in $OUT"
  } | tee "$OUT/summary.txt"
  return "$code"
}

# ---- main ------------------------------------------------------------------
main() {
  echo "# kolo GPU check on $HOSTNAME, $(nproc) cores; output in $OUT; budget $TOTAL_BUDGET s"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv |
      sed 's/^/# /'
  fi
  # nvcc and compute-sanitizer live in /usr/local/cuda/bin, which a bare
  # shell on the GPU machine may not have on its PATH.
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
  step_build
  if [ "${ROW_STATUS[build]}" = PASS ]; then
    step_gpu
  fi
  if [ "$GPU_OK" = 1 ] || { [ "$ALLOW_NO_GPU" = 1 ] && [ "${ROW_STATUS[build]}" = PASS ]; }; then
    [ "$GPU_OK" = 1 ] || echo "# ALLOW_NO_GPU=1: running every step without a usable GPU"
    step_rules
    step_tests
    if step_sanitizer; then
      step_sanitize memcheck "$BUDGET_MEMCHECK"
      step_sanitize racecheck "$BUDGET_RACECHECK"
      step_sanitize synccheck "$BUDGET_SYNCCHECK"
    fi
    step_benchmarks
  fi
  summary
}

mkdir -p "$OUT" "$WORK"
rm -f "$OUT/sanitizer.log"  # appended to by each sanitizer run
main 2>&1 | tee "$OUT/run_cuda.log"
exit "${PIPESTATUS[0]}"
