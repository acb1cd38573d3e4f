#!/bin/bash
# offset.sh ROUNDS - where the buffers start decides which chunk wins: kolo's
# all-reduce over loopback TCP in 512 KiB and 2 MiB chunks, and Open MPI's
# over its TCP transport, each with every buffer on a 4 KiB boundary
# (--offset 0, kolo-perf's default) and 16 bytes past one (glibc malloc's
# large blocks), in turn, ROUNDS rounds; prints "NAME BYTES US" per size and
# run (out-of-place time; kolo's runs are checked, a wrong element stops it).
#   P (2) processes, 1M..16M by 4s, ITERS (30) timed calls after 10.
# From the repository root: BUILD=build-net results/2026-12-03-net-chunk-host/offset.sh 7 > offset.txt;
#   results/2026-12-02-net-chunk/rounds.py offset.txt k512o0 k2048o0 mpio0 k512o16 k2048o16 mpio16
set -eu
B=${BUILD:-build}/bin
sizes=(-b 1M -e 16M -f 4 -n "${ITERS:-30}" -w 10 -c 1)
for _ in $(seq "$1"); do
  for off in 0 16; do
    for chunk in 524288 2097152; do
      KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket KOLO_NET_CHUNK_BYTES=$chunk \
        "$B/kolo-perf" all_reduce -P "${P:-2}" "${sizes[@]}" --inplace 0 --offset "$off" |
        awk -v n="k$((chunk >> 10))o$off" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }'
    done
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "${P:-2}" --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include lo "$B/kolo-mpi-ref" all_reduce "${sizes[@]}" --offset "$off" 2> /dev/null |
      awk -v n="mpio$off" '$1 ~ /^[0-9]+$/ { print n, $1, $6 }'
  done
done
