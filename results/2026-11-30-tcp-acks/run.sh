#!/usr/bin/env bash
# Which bare TCP acknowledgements an 8-byte all-reduce of 2 processes over
# loopback sends, kolo's socket transport beside Open MPI's TCP BTL: a
# capture of each run (tcpdump, root) read by acks.py.  Run from the
# repository root: results/2026-11-30-tcp-acks/run.sh [BUILD]
set -euo pipefail
B=${1:-build}/bin
HERE=$(dirname "$0")
capture() {
  local pcap=$1; shift
  tcpdump -i lo -nn -c 4000 -w "$pcap" tcp 2> /dev/null & local td=$!
  sleep 1
  "$@" > /dev/null 2>&1
  sleep 1
  kill "$td" 2> /dev/null || true; wait "$td" 2> /dev/null || true
  tcpdump -nn -tt -r "$pcap" 2> /dev/null | python3 "$HERE/acks.py"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ), kolo $(git rev-parse --short HEAD), $(nproc) CPUs, $(uname -r)"
echo "## kolo, KOLO_NET=socket, 3000 calls"
capture "$tmp/kolo.pcap" env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket \
  "$B/kolo-perf" all_reduce -P 2 -b 8 -e 8 -n 3000 -w 0 -c 0 --inplace 0
echo "## Open MPI, btl tcp,self, 3000 calls"
capture "$tmp/mpi.pcap" mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 --mca pml ob1 \
  --mca btl tcp,self --mca btl_tcp_if_include lo "$B/kolo-mpi-ref" all_reduce -b 8 -e 8 -n 3000 -w 0 -c 0 --inplace 0
