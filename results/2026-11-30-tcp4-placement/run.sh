#!/usr/bin/env bash
# An 8-byte all-reduce of 4 processes over loopback TCP on a 2-CPU host,
# kolo and Open MPI, each with its ranks left to the scheduler and pinned
# two per CPU (kolo: taskset, rank i on CPU i % 2; Open MPI: --bind-to
# core:overload-allowed --map-by core), alternating, ROUNDS rounds of
# ITERS calls; prints each run's time and the medians.
# Run from the repository root: results/2026-11-30-tcp4-placement/run.sh [BUILD]
set -euo pipefail
B=${1:-build}/bin ROUNDS=${ROUNDS:-8} ITERS=${ITERS:-2000}
SWEEP=(-b 8 -e 8 -n "$ITERS" -w 50 -c 1 --inplace 0)
time_of() { awk '$1 == "8" {print $6}' "$@"; }
kolo() { # kolo PIN: PIN 1 pins rank i to CPU i % 2
  local port=$((20000 + RANDOM % 10000)) i pids=() pin=()
  for i in 0 1 2 3; do
    [ "$1" = 1 ] && pin=(taskset -c $((i % 2)))
    env KOLO_ROOT=127.0.0.1:$port KOLO_RANK=$i KOLO_WORLD_SIZE=4 KOLO_SECRET=00112233445566778899aabbccddeeff \
      KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket "${pin[@]}" "$B/kolo-perf" all_reduce "${SWEEP[@]}" \
      > "$tmp/r$i.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  time_of "$tmp/r0.txt"
}
mpi() { # mpi BIND
  mpirun --allow-run-as-root --oversubscribe --bind-to "$1" --map-by core -np 4 --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include lo "$B/kolo-mpi-ref" all_reduce "${SWEEP[@]}" | time_of
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ), kolo $(git rev-parse --short HEAD), $(nproc) CPUs; time per call (us), $ITERS calls"
declare -A all
for r in $(seq "$ROUNDS"); do
  row=(kolo-free "$(kolo 0)" kolo-pinned "$(kolo 1)" mpi-free "$(mpi none)" mpi-bound "$(mpi core:overload-allowed)")
  echo "round $r: ${row[*]}"
  for ((k = 0; k < 8; k += 2)); do all[${row[$k]}]+=" ${row[$((k + 1))]}"; done
done
for who in kolo-free kolo-pinned mpi-free mpi-bound; do
  echo "$who: median $(echo ${all[$who]} | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
done
