#!/usr/bin/env bash
# TCP segments per 8-byte all-reduce, 2 processes over loopback: kolo's
# socket transport beside Open MPI's TCP BTL.  The difference of two runs
# (1000 and 5000 calls) read from the kernel's TcpOutSegs counter (nstat),
# so that init and teardown cancel out; both ranks' segments together.
# Run from the repository root: results/2026-11-30-tcp-segments/run.sh [BUILD]
set -euo pipefail
B=${1:-build}/bin
segs() { nstat -n > /dev/null; "$@" > /dev/null 2>&1; nstat -z TcpOutSegs | awk '/TcpOutSegs/ {print $2}'; }
kolo() { segs env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket "$B/kolo-perf" all_reduce -P 2 -b 8 -e 8 -n "$1" -w 0 -c 0 --inplace 0; }
mpi() { segs mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ob1 --mca btl tcp,self \
  --mca btl_tcp_if_include lo "$B/kolo-mpi-ref" all_reduce -b 8 -e 8 -n "$1" -w 0 -c 0 --inplace 0; }
echo "# $(date -u +%FT%TZ), kolo $(git rev-parse --short HEAD), $(nproc) CPUs; segments per call (both ranks)"
for round in 1 2 3; do
  k=$(( $(kolo 5000) - $(kolo 1000) )) m=$(( $(mpi 5000) - $(mpi 1000) ))
  awk -v r=$round -v k=$k -v m=$m 'BEGIN {printf "round %d: kolo %.2f, Open MPI %.2f, ratio %.2f\n", r, k / 4000, m / 4000, k / m}'
done
