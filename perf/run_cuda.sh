#!/usr/bin/env bash
# On a machine with an NVIDIA GPU of compute capability 9.0 (H100, H200):
# builds kolo-perf for sm_90 and measures the CUDA figures.
#
#   1. kolo-perf prims -b 1M -e 1G: the copy and reduce primitives (float32,
#      bfloat16; the test entry kolo_cuda_reduce and a full-GPU grid launch)
#      beside cudaMemcpyAsync device to device, and their lowest ratio to the
#      copy rate at sizes >= 64 MiB (target: >= 0.90).
#   2. NRANKS (8) ranks as threads on one GPU: float32 sum all-reduce,
#      8 B .. 256 MiB by factors of 2, every element checked (-c 1).
#   3. The 8-byte all-reduce latency on the same ranks, plain and --graph
#      (times per call within a graph of LAT_ITERS calls).
#   4. The figures the targets need: primitive rate / D2D copy rate (from 1);
#      at 256 MiB, the bytes the all-reduce's kernels read and write per
#      second (all ranks of the GPU together) against the D2D copy rate.
#
#   perf/run_cuda.sh                      # build in build-sm90, run everything
#   GPU=1 OUT=/tmp/kolo-cuda perf/run_cuda.sh
#
# Environment: BUILD (build-sm90), GPU (0), NRANKS (8), ITERS (20), WARMUP (5),
# LAT_ITERS (1000), LAT_WARMUP (100), OUT (a directory for the raw output;
# default a temporary one), STEP_TIMEOUT (900 s per run), KOLO_TIMEOUT_MS
# (60000 here: a hung peer fails a run within a minute).  Every run is made
# even when an earlier one failed; the script exits non-zero if any failed.
#
# ---------------------------------------------------------------------------
# Bytes the kernels of a ring all-reduce read and write, per rank and call.
#
# Program: ring/all_reduce.c.  Executor: kernels/cuda/exec_kernel.cu, SIMPLE
# protocol (the slices go through slots in the receiver's memory; each step
# of a slice is one reduce_block call).  Per round and channel the buffer is
# cut into n chunks, chunk k belonging to rank k; summed over all rounds and
# channels, chunk k covers |c_k| elements, and sum_k |c_k| = S (the buffer).
# For the rank at ring position p, c_j below is the chunk of the rank j
# places before it (c_0: its own).  Per byte of the chunk a step reads and
# writes (in, out: the user's buffers; slots: device memory of the same GPU
# when the ranks share it):
#
#   step                      chunk(s)           reads            writes          r  w
#   send                      c_1                in               send slot       1  1
#   recvReduceSend            c_2 .. c_{n-1}     recv slot, in    send slot       2  1
#   recvReduceCopySend        c_0 (final)        recv slot, in    out, send slot  2  2
#   recvCopySend              c_1 .. c_{n-2}     recv slot        out, send slot  1  2
#   recv                      c_{n-1}            recv slot        out             1  1
#
#   reads  = 2|c_1| + 3(|c_2| + ... + |c_{n-1}|) + 2|c_0|
#   writes = 3(|c_1| + ... + |c_{n-2}|) + 2|c_{n-1}| + 2|c_0|
#
# With equal chunks, |c_k| = S/n (every round's chunks whole: true for
# S = 256 MiB and n = 8 with any power-of-two channel count and chunk size,
# since then every round covers a power of two that divides what is left):
#
#   reads = writes = (1 + 2(n-2) + 2 + (n-2) + 1) S/n = (3n-2)/n * S
#   read + written per rank = 2(3n-2)/n * S = 2(n-1)/n * S * (3n-2)/(n-1)
#
# i.e. nccl-tests' bus bytes 2(n-1)/n * S times (3n-2)/(n-1) = 3 + 1/(n-1):
# every byte sent is written once into a slot and read once out of it, and
# the user buffers add the rest.  n = 8: 5.5 S per rank (1476395008 bytes at
# S = 256 MiB); the n ranks of one GPU together: 2(3n-2) S = 44 S per call.
# In place or out of place, the count is the same (in == out is still read
# and written).  n = 1 is one copy: S read, S written.  The LL protocol
# (small sizes) carries 8 payload bytes in each 16-byte slot line, so its
# slot reads and writes count double; it is not the 256 MiB case.
#
# The figure printed: (n ranks x 2(3n-2)/n x S) / time of one all-reduce,
# beside the D2D copy rate at S (2 S / time of one cudaMemcpyAsync, from 1).
# ---------------------------------------------------------------------------
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-sm90}
GPU=${GPU:-0}
NRANKS=${NRANKS:-8}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
LAT_ITERS=${LAT_ITERS:-1000}
LAT_WARMUP=${LAT_WARMUP:-100}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
export KOLO_TIMEOUT_MS=${KOLO_TIMEOUT_MS:-60000}
OUT=${OUT:-$(mktemp -d -t kolo-cuda.XXXXXX)}
mkdir -p "$OUT"
S=$((256 << 20))

echo "# kolo CUDA figures on $(hostname); raw output in $OUT"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv \
    | sed 's/^/# /'
fi

echo "# building kolo-perf for sm_90 in $BUILD"
if ! cmake -S . -B "$BUILD" -DKOLO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKOLO_TESTS=OFF \
       -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/cmake.log" 2>&1 ||
   ! cmake --build "$BUILD" -j"$(nproc)" --target kolo-perf > "$OUT/build.log" 2>&1; then
  echo "run_cuda: the build failed:" >&2
  tail -n 40 "$OUT/cmake.log" "$OUT/build.log" >&2 2> /dev/null
  exit 2
fi
P="$BUILD/bin/kolo-perf"

failed=()
# run NAME ARGS...: kolo-perf ARGS, output to the terminal and $OUT/NAME.txt.
run() {
  local name=$1
  shift
  echo
  echo "# ---- $name: kolo-perf $*"
  timeout "$STEP_TIMEOUT" "$P" "$@" 2>&1 | tee "$OUT/$name.txt"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "# ---- $name: exit status $rc" | tee -a "$OUT/$name.txt"
    failed+=("$name ($rc)")
  fi
}

run prims prims -g "$GPU" -b 1M -e 1G -f 2 -n "$ITERS" -w "$WARMUP" -c 1
run allreduce all_reduce --mem cuda -g "$GPU" -t "$NRANKS" -d float -o sum -b 8 -e 256M -f 2 \
  -n "$ITERS" -w "$WARMUP" -c 1 --json "$OUT/allreduce.json"
run latency all_reduce --mem cuda -g "$GPU" -t "$NRANKS" -d float -b 8 -e 8 \
  -n "$LAT_ITERS" -w "$LAT_WARMUP" -c 1
run latency_graph all_reduce --mem cuda -g "$GPU" -t "$NRANKS" -d float -b 8 -e 8 \
  -n "$LAT_ITERS" -w "$LAT_WARMUP" -c 1 --graph

# ---- figures ----------------------------------------------------------------
# Table rows: prims "size primitive type launch blocks threads time GB/s vs_memcpy #wrong";
# all_reduce "size count type redop root  time algbw busbw #wrong (out of place)  time algbw busbw #wrong (in place)".
field() { # FILE SIZE COLUMN [PRIMITIVE]: a column of the row of SIZE (and primitive)
  awk -v s="$2" -v c="$3" -v p="${4:-}" '$1 == s && (p == "" || $2 == p) { print $c; exit }' "$1" 2> /dev/null
}

echo
echo "# ==== figures (all measured above, in this run) ===="
if [ -s "$OUT/prims.txt" ]; then
  echo "# primitives: GB/s (bytes read + written) over the D2D cudaMemcpyAsync GB/s at the same size"
  awk '/^# summary/ { on = 1 } on && /^#/ { print } /^# wrong output bytes/ { on = 0 }' "$OUT/prims.txt"
  echo "# per size, grid launch (vs_memcpy):"
  awk '$1 ~ /^[0-9]+$/ && $1 >= 67108864 && $4 == "grid" { printf "#   %11s  %6s  %9s  %s\n", $1, $2, $3, $9 }' \
    "$OUT/prims.txt"
fi

n=$NRANKS
mc_gbs=$(field "$OUT/prims.txt" "$S" 8 memcpy)
for place in "out-of-place:6" "in-place:10"; do
  label=${place%%:*}
  col=${place##*:}
  t=$(field "$OUT/allreduce.txt" "$S" "$col")
  busbw=$(field "$OUT/allreduce.txt" "$S" $((col + 2)))
  if [ -z "$t" ]; then
    echo "# all-reduce 256 MiB ($label): no result"
    continue
  fi
  awk -v n="$n" -v S="$S" -v t="$t" -v bb="$busbw" -v mc="${mc_gbs:-0}" -v label="$label" 'BEGIN {
    per_rank = 2 * (3 * n - 2) / n * S          # bytes read + written per rank and call
    rate = n * per_rank / (t * 1e-6) / 1e9      # all ranks of the GPU, GB/s
    printf "# all-reduce %d B, %d ranks on one GPU, %s: %.1f us, busbw %s GB/s\n", S, n, label, t, bb
    printf "#   kernels read+write %.0f B per rank (2(3n-2)/n S), %.0f B for the %d ranks: %.1f GB/s\n", per_rank, n * per_rank, n, rate
    if (mc > 0) printf "#   D2D copy at %d B: %.1f GB/s (read+write); kernels / copy = %.3f\n", S, mc, rate / mc
    else printf "#   D2D copy rate at %d B: not measured (prims failed)\n", S
  }'
done

for f in latency latency_graph; do
  t_out=$(field "$OUT/$f.txt" 8 6)
  t_in=$(field "$OUT/$f.txt" 8 10)
  what="plain"
  [ "$f" = latency_graph ] && what="--graph (per call within a graph of $LAT_ITERS)"
  echo "# 8-byte all-reduce latency, $n ranks on one GPU, $what: out-of-place ${t_out:-n/a} us, in-place ${t_in:-n/a} us"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "# FAILED: ${failed[*]}"
  exit 1
fi
echo "# all runs succeeded"
