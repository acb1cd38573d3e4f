#!/usr/bin/env bash
# Sets up, builds and runs every kolo test: what CI runs (.ci/run).
#  1. packages (scripts/setup.sh); scripts/code_graph.py against its baseline
#     (docs/dev/architecture.md: circles in core/, arrows up the layers)
#  2. release build (+ CUDA kernels when nvcc exists; fails on any register spill)
#  3. ctest: unit tests, end-to-end tests as threads and as processes, and
#     libkolo.so's exports; then tests/check_docs.sh (docs/dev/testing.md);
#     then tests/check_install.sh: `cmake --install`
#     into build/install-staging, examples/ built against it and run;
#     then tests/torch/run.sh: the Python package (python/) in a venv, its
#     collectives under mpirun on 1-4 ranks and from torchrun's variables,
#     training checked against one process, faults, the timeline
#  4. the CUDA path on kolo's CPU model of the GPU (docs/dev/cuda-model.md):
#     build-sim (-DKOLO_CUDA=SIM, kernel resources from step 2's ptxas
#     report) and every CUDA test there (the model's own, and the CUDA
#     runtime's rules of test_cuda_runtime_rules, which perf/run_cuda.sh runs
#     on a GPU), a set of them again with blocks of
#     256 and of 33 threads, a set under 3 seeds of the model's orders
#     (KOLO_SIM_SEED), the same set in the weak-memory mode (KOLO_SIM_WEAK) and with
#     CUDA's default 8 hardware queues, ranks as processes under each
#     KOLO_SIM_SHARE (MPS, time slices), and examples/nccl.c against its
#     libnccl.so.2 (tests/check_install.sh build-sim); then build-sim-tsan: the reduce
#     kernels and a set of the executor's end-to-end cases under TSan, with
#     4-thread blocks
#  5. the host tests under ASan+UBSan and the threaded ones under TSan (both
#     without the 1 MiB / 64 MiB grids, which the release run covers)
#     and the libFuzzer targets of tests/fuzz (run.sh: 6 s each; KOLO_SKIP_FUZZ=1 skips them)
#  6. the soft-RoCE smoke test: real ibverbs in a QEMU guest (tests/rdma/);
#     required (a VM that cannot be set up, boot or run fails the step,
#     naming why; KOLO_RXE_OPTIONAL=1 makes that a SKIP), bounded in time;
#     then kolo's own ib provider there (test_net_ib, and all-reduce,
#     all-gather, send/recv between two "hosts" on rxe0 / rxe1)
#  7. the 4-rank all-reduce benchmark with its correctness check (small sizes),
#     and 3-rank all-to-all, gather and scatter
#  8. the fault matrix (30 fixed-seed trials over shm, 15 over TCP), a short soak over shm
#     and TCP, checked collectives and 10 fault trials across network
#     namespaces (netem where the kernel has it; namespaces that cannot be
#     made fail the step): tests/fault/README.md
# Each step prints its time; KOLO_SKIP_CUDA_MODEL=1 skips step 4.  A skip in a
# ctest, install or namespace step that tests/expected_skips.txt does not
# list fails the step (tests/check_skips.py; docs/dev/testing.md).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
fail=0
failed_steps=()
step_name=""
step_t0=$SECONDS
step() {
  echo "(took $((SECONDS - step_t0)) s)"
  step_t0=$SECONDS
  step_name=$*
  echo; echo "=== $*"
}
# A failed step is named again at the very end, with the ctest cases that
# failed in it: a CI log is often read from its tail only.
failed() {
  fail=1
  failed_steps+=("$step_name")
}
# Every skip of a step is either listed in tests/expected_skips.txt, with its
# reason, or fails the step (tests/check_skips.py names it): a CI run cannot
# pass because its tests quietly did not run.
# ctest in DIR with ARGS, then the cases it did not run against the list.
ctest_checked() { # dir, ctest args...
  local dir=$1 junit=$ROOT/$1/Testing/ctest-junit.xml rc
  shift
  rm -f "$junit"
  (cd "$dir" && ctest --no-tests=error --output-on-failure -j1 --output-junit "$junit" "$@")
  rc=$?
  # why each case failed, for the summary at the end (CI keeps the log's end)
  [ "$rc" = 0 ] || tests/ctest_failures.py "$junit" "$dir" >> "$ROOT/build/failures.txt"
  tests/check_skips.py ctest "$dir" "$junit" | tee "$ROOT/build/skips-$dir.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  return "$rc"
}
# A script step, its output kept in build/step-WHERE.log, then its "SKIP:"
# lines against the list's entries for WHERE.
script_checked() { # where, command...
  local where=$1 log=$ROOT/build/step-$1.log rc
  shift
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  tests/check_skips.py log "$where" "$log" | tee "$ROOT/build/skips-$where.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  return "$rc"
}

step "setup"
scripts/setup.sh || exit 1

step "code graph: no new circle of core/ files, no new arrow from a lower layer to a higher one"
mkdir -p build # the whole report is kept; the log shows its verdicts
scripts/code_graph.py --baseline scripts/code_graph_baseline.txt > build/step-code-graph.log ||
  { cat build/step-code-graph.log; failed; }
grep -E "^(fixed|shrunk|summary):" build/step-code-graph.log

step "build (release)"
scripts/build.sh build -DKOLO_TESTS=ON || exit 1 # ON: perf/run_main.sh configures a new build/ without tests
rm -f build/skips-*.txt build/step-*.log build/failures.txt # this run's verdicts only (the summary at the end reads them)
if grep -q "ptxas info" build/build.log; then
  step "CUDA register/spill report"
  tests/check_spills.sh build/build.log || failed
else
  echo "no CUDA kernels built (no nvcc): spill check skipped"
fi

step "ctest (release)"
ctest_checked build --timeout 900 || failed

step "docs: links, sh blocks, KOLO_* variables, versions; README's example and the two-host recipe as written"
tests/check_docs.sh build || failed

step "install + examples: kolo as another project uses it (find_package, pkg-config, no CUDA runtime)"
script_checked install tests/check_install.sh build || failed

step "PyTorch: kolo.torch (python/) pip-installed in a venv; collectives on 1-4 ranks, training, faults, timeline"
timeout -k 10 360 tests/torch/run.sh build || failed

# The sets of CUDA tests of each of the model's modes.
. tests/cuda_sets.sh
SIM_TSAN_TARGETS=(test_cuda_reduce test_e2e_cuda test_e2e_cuda_algos test_cuda_mismatch test_cuda_stall)
SIM_TARGETS=(kolo kolo-perf test_cudasim test_cudasim_share test_cudasim_weak test_cuda_runtime_rules test_cuda_fault test_e2e_cuda test_e2e_cuda_algos test_e2e_schedule test_cuda_mismatch test_cuda_stall test_cuda_status test_cuda_reduce test_cuda_plan test_fusion nccl test_nccl_layer test_nccl_dlopen kolo-fault)
sim_build() { # dir, extra cmake args...
  local dir=$1 targets=("${SIM_TARGETS[@]}")
  shift
  # TSan: only the binaries of the cases it runs (CUDA_TSAN_TESTS)
  [[ " $* " == *"SANITIZE=thread"* ]] && targets=("${SIM_TSAN_TARGETS[@]}")
  KOLO_BUILD_TARGETS="${targets[*]}" scripts/build.sh "$dir" -DKOLO_CUDA=SIM \
    -DKOLO_SIM_PTXAS_LOG="$ROOT/build/build.log" "$@"
}
if [ "${KOLO_SKIP_CUDA_MODEL:-0}" = 1 ]; then
  step "CUDA tests on the CPU model: skipped (KOLO_SKIP_CUDA_MODEL=1)"
else
  step "build (CUDA on the CPU model of the GPU: build-sim)"
  if sim_build build-sim; then
    step "ctest on the CUDA model: every CUDA test"
    CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
      ctest_checked build-sim --timeout 600 -R "$CUDA_TESTS" || failed
    step "examples/nccl.c, an unmodified NCCL program, on build-sim's libnccl.so.2 (the CUDA model)"
    script_checked install-sim tests/check_install.sh build-sim || failed
    step "CUDA model with 256 threads per block: a set of every kind of CUDA case"
    KOLO_SIM_BLOCK_THREADS=256 CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
      ctest_checked build-sim --timeout 300 -R "$CUDA_BLOCK_TESTS" || failed
    step "CUDA model with 33 threads per block: collectives of 2 and 3 ranks, reduce kernels"
    KOLO_SIM_BLOCK_THREADS=33 CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
      ctest_checked build-sim --timeout 300 -R "$CUDA_BLOCK33_TESTS" || failed
    step "CUDA model, seeded orders: a set of every kind of collective under KOLO_SIM_SEED=1, 2 and 3"
    for seed in 1 2 3; do
      echo "--- KOLO_SIM_SEED=$seed"
      KOLO_SIM_SEED=$seed CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
        ctest_checked build-sim --timeout 300 -R "$CUDA_SEED_TESTS" || { failed; break; }
    done
    step "CUDA model, weak memory: the seeded set and SIMPLE calls, stores landing late and out of order (KOLO_SIM_WEAK=1)"
    KOLO_SIM_WEAK=1 KOLO_SIM_SEED=1 CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
      ctest_checked build-sim --timeout 300 -R "$CUDA_WEAK_TESTS" || failed
    step "CUDA model with CUDA's default 8 hardware queues: collectives of 3 and 4 ranks"
    CUDA_DEVICE_MAX_CONNECTIONS=8 KOLO_SIM_WATCHDOG_S=60 \
      ctest_checked build-sim --timeout 300 -R "$CUDA_QUEUE8_TESTS" || failed
    step "CUDA model, processes sharing its GPUs: ranks as processes under KOLO_SIM_SHARE=mps and =timeslice"
    for share in mps timeslice; do
      echo "--- KOLO_SIM_SHARE=$share"
      KOLO_SIM_SHARE=$share CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 \
        ctest_checked build-sim --timeout 120 -R "$CUDA_SHARE_TESTS" || { failed; break; }
    done
    step "kolo-perf --mem cuda on the CUDA model: 4 ranks on one model GPU, checked (model figures)"
    CUDA_DEVICE_MAX_CONNECTIONS=32 build-sim/bin/kolo-perf all_reduce --mem cuda -t 4 --devices 0 \
      -b 8 -e 1M -f 8 -n 2 -w 1 -c 1 || failed
    step "kolo-perf tune --mem cuda --quick on the CUDA model: a cuda-p2p line, every size covered (model figures)"
    CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 timeout -k 10 180 tests/perf/perf_tune_cuda.sh \
      build-sim/bin/kolo-perf || failed
    # Its ranks are processes on device 0: MPS (kolo refuses that layout without).
    step "fault matrix on CUDA communicators (the model, under its MPS): 12 fixed-seed trials, SIGKILL / SIGSTOP, every moment"
    KOLO_SIM_SHARE=mps CUDA_DEVICE_MAX_CONNECTIONS=32 KOLO_SIM_WATCHDOG_S=60 timeout -k 10 120 build-sim/bin/kolo-fault --mem cuda \
      --trials 12 --seed 15 --kinds kill,stop --at init,first_call,mid,group,destroy || failed
  else failed; fi
  if [ "${KOLO_SKIP_SANITIZERS:-0}" != 1 ]; then
    step "build (CUDA model under TSan: build-sim-tsan)"
    if sim_build build-sim-tsan -DKOLO_SANITIZE=thread; then
      step "ctest on the CUDA model under TSan: kernels with 4-thread blocks"
      KOLO_SIM_BLOCK_THREADS=4 CUDA_DEVICE_MAX_CONNECTIONS=32 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest_checked build-sim-tsan --timeout 600 -R "$CUDA_TSAN_TESTS" || failed
    else failed; fi
  fi
fi

# Under ASan, what the release run covers and adds no memory path of its
# own: the 1 MiB / 64 MiB grids, the CUDA reduce kernels' host twins, the
# schedule model (pure computation on programs every collective builds),
# the host-layout grids whose modes repeat another layout's, and
# perf/compare.sh's engine (a script over tools that the other tests run
# under ASan; 3 s in release, close to 3 minutes under ASan),
# nccl-tests' command line (one rank's copies, 8 B to 128 MiB: 9 s) and
# the tuner's timed runs (5 s; its table's reader is fuzzed).  The
# host layouts keep one of each mode: ring (3 uneven hosts), hier (uneven),
# hier + group and nonblocking (2 x 3, 2 x 2).
ASAN_EXCLUDE='LargeGrid|HugeGrid|CudaReduce|ScheduleModel|PerfTools\.(Compare|NcclTestsLine|Tune)|Hosts\.Grid/(2x2_ring|2x2_hier |2x3_ring|2x3_hier |2x3_auto|3hosts_1_2_2_ring_group)'
# Under TSan: the threaded host tests, and only the binaries that hold them,
# less the rank counts that bring no new interleaving at several times the
# cost: 8 ranks (the grids and the point-to-point groups run at 2 to 4),
# Adasum but at 3 ranks (its fold and its halving, with threads), one
# thread's group and nonblocking calls but at 2 ranks (the others, at 1, 3
# and 4: 33 s under TSan on 2 cores).  75 s of the 236 s run left out.
TSAN_TESTS='Threads|P2PSelf|Bootstrap|NetCallers|NetPolled|NetSocket'
TSAN_EXCLUDE='LargeGrid|HugeGrid|[_/]8ranks|Adasum\.EveryElementMatchesTheReference/[1245]ranks|OneThreadGroup\.(Collectives|SendRecv)/[134]ranks|/NonBlocking\.CallsReturnInProgressThenComplete/[14]ranks'
TSAN_TARGETS=(test_e2e_algos test_e2e_threads test_e2e_peers test_bootstrap test_bootstrap_lazy
              test_bootstrap_flood test_net test_fusion test_errbuf test_e2e_adasum)
# A binary with cases TSan's pattern picks that the list leaves out would be
# skipped without a word: the release build's cases say which binaries hold
# them, less the suites that fork (tests/CMakeLists.txt keeps them from
# TSan) and the CUDA binaries (this build has no CUDA; build-sim-tsan runs
# theirs).
tsan_targets_cover_release() {
  (cd build && ctest --show-only=json-v1 -R "$TSAN_TESTS" -E "LargeGrid|HugeGrid") | python3 -c '
import json, os, sys
forked = {"test_mismatch", "test_e2e_procs", "test_errors", "test_e2e_schedule", "bootstrap_scale.sh"}
cuda = {"test_e2e_cuda", "test_e2e_cuda_algos", "test_cuda_mismatch", "test_cuda_stall"}
holders = {os.path.basename(t["command"][0]) for t in json.load(sys.stdin)["tests"]}
missing = sorted(holders - set(sys.argv[1:]) - forked - cuda)
if missing:
    sys.exit("TSAN_TARGETS leaves out binaries with cases TSAN_TESTS picks: " + " ".join(missing))
' "${TSAN_TARGETS[@]}"
}
if [ "${KOLO_SKIP_SANITIZERS:-0}" != 1 ]; then
  step "build + ctest under ASan+UBSan"
  if scripts/build.sh build-asan -DKOLO_CUDA=OFF -DKOLO_SANITIZE=address,undefined; then
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest_checked build-asan --timeout 900 -E "${KOLO_ASAN_EXCLUDE:-$ASAN_EXCLUDE}" || failed
  else failed; fi
  step "build + threaded tests under TSan"
  tsan_targets_cover_release || failed
  if KOLO_BUILD_TARGETS="${TSAN_TARGETS[*]}" scripts/build.sh build-tsan -DKOLO_CUDA=OFF -DKOLO_SANITIZE=thread; then
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
      ctest_checked build-tsan --timeout 900 -R "${KOLO_TSAN_TESTS:-$TSAN_TESTS}" -E "$TSAN_EXCLUDE" || failed
  else failed; fi
fi

if [ "${KOLO_SKIP_FUZZ:-0}" != 1 ]; then
  step "fuzz: every libFuzzer target of tests/fuzz, 6 s each over its corpus (clang, ASan+UBSan)"
  tests/fuzz/run.sh "${KOLO_FUZZ_SECONDS:-6}" build-fuzz || failed
fi

step "soft-RoCE smoke: verbs_smoke + perftest in a QEMU guest (tests/rdma)"
rxe_t0=$SECONDS
if [ "${KOLO_SKIP_RXE:-0}" = 1 ]; then
  echo "skipped (KOLO_SKIP_RXE=1)"
else
  # run_smoke.sh bounds itself (KOLO_RXE_TIMEOUT, default 150 s); the outer
  # timeout is a backstop that takes QEMU down with it (same process group).
  KOLO_RXE_OPTIONAL=${KOLO_RXE_OPTIONAL:-0} timeout -k 10 $(( ${KOLO_RXE_TIMEOUT:-150} + 20 )) \
    tests/rdma/run_smoke.sh || failed
fi

step "soft-RoCE: kolo's ib provider (test_net_ib) and 2-host collectives over KOLO_NET=ib in the guest"
# Both soft-RoCE steps share one budget (KOLO_RXE_STEP_BUDGET, default 240 s):
# this one gets what the smoke test left, at least 90 s.
rxe_left=$(( ${KOLO_RXE_STEP_BUDGET:-240} - (SECONDS - rxe_t0) ))
if [ "${KOLO_SKIP_RXE:-0}" = 1 ]; then
  echo "skipped (KOLO_SKIP_RXE=1)"
elif [ $rxe_left -lt 90 ]; then
  rxe_spent="the smoke test used $((SECONDS - rxe_t0)) s of the ${KOLO_RXE_STEP_BUDGET:-240} s soft-RoCE budget:"
  rxe_spent+=" under 90 s left for kolo's guest ($(nproc) CPUs, KOLO_RXE_ACCEL=${KOLO_RXE_ACCEL:-tcg})"
  if [ "${KOLO_RXE_OPTIONAL:-0}" = 1 ]; then echo "SKIP: $rxe_spent"; else echo "FAIL: $rxe_spent"; failed; fi
else
  KOLO_RXE_OPTIONAL=${KOLO_RXE_OPTIONAL:-0} KOLO_RXE_KOLO_TIMEOUT=$rxe_left timeout -k 10 $((rxe_left + 20)) \
    tests/rdma/run_kolo.sh build || failed
fi

step "main job, small sizes, checked: 4-rank all-reduce; 3-rank all-to-all, gather, scatter"
build/bin/kolo-perf all_reduce -P 4 -b 8 -e 4M -f 8 -n 5 -w 2 -c 1 || failed
# The multi-peer collectives through kolo-perf's own check: an odd rank
# count, a root that is not rank 0.
for coll in alltoall gather scatter; do
  build/bin/kolo-perf $coll -P 3 -r 1 -b 12 -e 3M -f 16 -n 3 -w 1 -c 1 || failed
done

step "fault matrix: 30 fixed-seed trials over shm, 15 over TCP on loopback (tests/fault/kolo_fault.c)"
timeout -k 10 240 build/bin/kolo-fault --trials 30 --seed 15 || failed
timeout -k 10 120 build/bin/kolo-fault --trials 15 --seed 15 --tcp || failed

step "soak: 15 s of mixed checked collectives over shm, 15 s over TCP (tests/fault/kolo_soak.c)"
timeout -k 10 180 build/bin/kolo-soak --seconds 15 --seed 15 || failed
timeout -k 10 180 build/bin/kolo-soak --seconds 15 --seed 16 --tcp || failed

step "network namespaces: checked all-reduce / all-gather (netem where the kernel has it), 10 fault trials"
# Required: namespaces that cannot be made fail the step, naming what is
# missing.  The fault trials (seed 15: kill, stop, stop+cont-late, cut and
# link-down, at every moment; stop+cont-early is the shm and TCP matrices')
# and the collectives take 25-30 s on 2 cores.
script_checked netns timeout -k 10 300 tests/fault/netns.sh build --netem --trials 10 --seed 15 || failed

echo "(took $((SECONDS - step_t0)) s)"
echo
echo "run_all: $SECONDS s in all"
if [ $fail = 0 ]; then echo "run_all: all steps passed"; exit 0; fi
for s in "${failed_steps[@]}"; do echo "run_all: FAILED step: $s"; done
for d in build build-sim build-sim-tsan build-asan build-tsan; do
  f=$d/Testing/Temporary/LastTestsFailed.log
  [ -s "$f" ] && sed "s|^|run_all: failed ctest case in $d: |" "$f"
done
sed "s|^|run_all: |" build/failures.txt 2>/dev/null
cat build/skips-*.txt 2>/dev/null | grep -E "UNEXPECTED SKIP|matched no skip" | sed "s|^check_skips: |run_all: |"
echo "run_all: FAILED"
exit 1
