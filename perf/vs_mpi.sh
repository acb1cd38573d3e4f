#!/usr/bin/env bash
# kolo against Open MPI on this machine, for the performance targets of
# README ("Performance against Open MPI"): float32 all-reduce with N
# processes of kolo (kolo-perf -P N) and of Open MPI (kolo-mpi-ref under
# mpirun -np N), out of place, alternating kolo / MPI REPEATS times in one
# run; per size the median time of each, their ratio, and a plot of the
# medians (kolo-perf plot) per N.
#
#   perf/vs_mpi.sh                         # N = 2 4 8, 3 repeats, 8 B .. 64 MiB
#   NPROCS="4" REPEATS=5 perf/vs_mpi.sh
#   OUT=perf/results/2026-11-26 perf/vs_mpi.sh   # keep JSON, tables and plots there
#
# Environment: BUILD (build), NPROCS ("2 4 8"), REPEATS (3), ITERS (50),
# WARMUP (10), MAXBYTES (64M), KOLO_ALGO etc. pass through to kolo-perf,
# OUT (a directory; default a temporary one).  Every run checks its
# results (-c 1, outside the timed loop): a wrong element fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NPROCS=${NPROCS:-2 4 8}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
MAXBYTES=${MAXBYTES:-64M}
for b in kolo-perf kolo-mpi-ref; do
  [ -x "$BUILD/bin/$b" ] || { echo "vs_mpi: $BUILD/bin/$b is missing (scripts/build.sh $BUILD)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "vs_mpi: no mpirun (scripts/setup.sh)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d -t kolo-vs-mpi.XXXXXX)}
mkdir -p "$OUT"
sweep=(-b 8 -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c 1 --inplace 0)
echo "# kolo vs Open MPI, float32 all_reduce, out of place, $(nproc) cores, N = $NPROCS," \
     "$REPEATS alternating runs; raw results in $OUT"
for n in $NPROCS; do
  for i in $(seq 1 "$REPEATS"); do
    "$BUILD/bin/kolo-perf" all_reduce -P "$n" "${sweep[@]}" --label "kolo, $n procs" \
      --json "$OUT/kolo.n$n.$i.json" > "$OUT/kolo.n$n.$i.txt"
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$BUILD/bin/kolo-mpi-ref" all_reduce \
      "${sweep[@]}" --label "Open MPI, $n procs" --json "$OUT/mpi.n$n.$i.json" > "$OUT/mpi.n$n.$i.txt"
  done
  python3 perf/vs_mpi_median.py "$OUT" "$n" "$REPEATS" | tee "$OUT/summary.n$n.txt"
  "$BUILD/bin/kolo-perf" plot "$OUT/kolo.n$n.median.json" "$OUT/mpi.n$n.median.json" \
    -o "$OUT/allreduce_vs_mpi_n$n.png"
done
echo "# plots: $OUT/allreduce_vs_mpi_n*.png"
