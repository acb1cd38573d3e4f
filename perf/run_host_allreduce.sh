#!/usr/bin/env bash
# Side by side on this machine's CPUs: kolo's all-reduce over 2 forked processes
# (kolo-perf -P 2), Open MPI's over 2 processes on the same machine
# (kolo-mpi-ref under mpirun) and one core's memcpy (kolo-memcpy-bw), float32,
# sizes 8 B .. 256 MiB by factors of 2.  Each is run REPEATS times (3) and the
# medians are printed for 8 B, 1 MiB, 16 MiB and 256 MiB: busbw of both
# (out-of-place column), their ratio, memcpy GB/s (bytes copied / time) and the
# 8-byte latency of both.
#
#   perf/run_host_allreduce.sh            # builds the three in build/ first if one is missing
#   BUILD=build-perf REPEATS=5 ITERS=50 perf/run_host_allreduce.sh
#
# Environment: BUILD (build), REPEATS (3), ITERS (20), WARMUP (5), MAXBYTES
# (256M), CHECK (1: check every element, outside the timed loop),
# MPI_BIND (none: mpirun --bind-to none, as kolo-perf does not bind either),
# OUT (a directory for the raw JSON of every run; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
MAXBYTES=${MAXBYTES:-256M}
CHECK=${CHECK:-1}
MPI_BIND=${MPI_BIND:-none}

need=("$BUILD/bin/kolo-perf" "$BUILD/bin/kolo-mpi-ref" "$BUILD/bin/kolo-memcpy-bw")
for b in "${need[@]}"; do
  [ -x "$b" ] && continue
  scripts/setup.sh
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target kolo-perf kolo-mpi-ref kolo-memcpy-bw > /dev/null
  break
done
for b in "${need[@]}"; do
  [ -x "$b" ] || { echo "run_host_allreduce: $b was not built (kolo-mpi-ref needs MPI)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "run_host_allreduce: no mpirun" >&2; exit 1; }
command -v python3 >/dev/null || { echo "run_host_allreduce: needs python3 for the summary" >&2; exit 1; }

OUT=${OUT:-$(mktemp -d -t kolo-host-allreduce.XXXXXX)}
mkdir -p "$OUT"
sweep=(-b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP")
echo "# kolo vs Open MPI, float32 all_reduce, 2 processes, $(nproc) cores; raw results in $OUT"
for i in $(seq 1 "$REPEATS"); do
  echo "# run $i/$REPEATS: kolo-perf"
  "$BUILD/bin/kolo-perf" all_reduce -P 2 "${sweep[@]}" -c "$CHECK" --json "$OUT/kolo.$i.json" > "$OUT/kolo.$i.txt"
  echo "# run $i/$REPEATS: kolo-mpi-ref (mpirun -np 2 --bind-to $MPI_BIND)"
  mpirun --allow-run-as-root --oversubscribe --bind-to "$MPI_BIND" -np 2 \
    "$BUILD/bin/kolo-mpi-ref" all_reduce "${sweep[@]}" -c "$CHECK" --json "$OUT/mpi.$i.json" > "$OUT/mpi.$i.txt"
  echo "# run $i/$REPEATS: kolo-memcpy-bw"
  "$BUILD/bin/kolo-memcpy-bw" "${sweep[@]}" --json "$OUT/memcpy.$i.json" > "$OUT/memcpy.$i.txt"
done

python3 - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def load(name):
    return [json.load(open(f"{out}/{name}.{i}.json")) for i in range(1, repeats + 1)]
kolo, mpi, mc = load("kolo"), load("mpi"), load("memcpy")
def med(runs, size, key, in_place=False):
    vals = [r[key] for run in runs for r in run["results"]
            if r["size"] == size and r.get("in_place", False) == in_place]
    return statistics.median(vals) if vals else float("nan")
wrong = sum(r["wrong"] for run in kolo + mpi for r in run["results"])
print()
print(f"# medians of {repeats} runs; busbw of the out-of-place column; memcpy = bytes copied / time (one core)")
print(f"# {'size':>10}  {'kolo busbw':>10}  {'ompi busbw':>10}  {'kolo/ompi':>9}  {'memcpy':>8}")
print(f"# {'(B)':>10}  {'(GB/s)':>10}  {'(GB/s)':>10}  {'':>9}  {'(GB/s)':>8}")
for size in (8, 1 << 20, 16 << 20, 256 << 20):
    k, m = med(kolo, size, "busbw"), med(mpi, size, "busbw")
    c = med(mc, size, "memcpy_gbs")
    ratio = k / m if m > 0 else float("nan")
    print(f"  {size:>10}  {k:>10.3f}  {m:>10.3f}  {ratio:>9.2f}  {c:>8.2f}")
print(f"# 8-byte latency: kolo {med(kolo, 8, 'time_us'):.2f} us, Open MPI {med(mpi, 8, 'time_us'):.2f} us"
      f" (in place: kolo {med(kolo, 8, 'time_us', True):.2f} us, Open MPI {med(mpi, 8, 'time_us', True):.2f} us)")
print(f"# avg bus bandwidth (all sizes, both columns): kolo "
      f"{statistics.median(r['avg_busbw'] for r in kolo):.3f}, Open MPI {statistics.median(r['avg_busbw'] for r in mpi):.3f} GB/s")
print(f"# #wrong over all runs: {wrong}")
sys.exit(1 if wrong else 0)
PY
