#!/bin/bash
# Mid sizes over loopback TCP, kolo beside Open MPI, 2026-12-02: what each
# file of this folder came from (see README.md).  From the repository root,
# after perf/run_main.sh (or scripts/setup.sh and scripts/build.sh).
set -eu
D=results/2026-12-02-mid-sizes
NPROCS=2 REPEATS=7 MINBYTES=64K MAXBYTES=16M FACTOR=4 OUT=$D/tcp2 perf/compare.sh tcp
BIND=core NPROCS=2 REPEATS=7 MINBYTES=512K MAXBYTES=4M FACTOR=2 OUT=$D/tcp2-bound perf/compare.sh tcp
BIND=core NPROCS=4 REPEATS=7 MINBYTES=64K MAXBYTES=4M FACTOR=4 OUT=$D/tcp4-bound perf/compare.sh tcp
# 20 minutes later, at commit 4e911c0 (the per-round table):
BIND=core NPROCS=4 REPEATS=11 MINBYTES=1M MAXBYTES=4M FACTOR=2 OUT=$D/tcp4-bound-11 perf/compare.sh tcp
$D/knobs.sh 4 7 default= buffsize1M=KOLO_BUFFSIZE=1048576 nslots4=KOLO_NSLOTS=4\ KOLO_BUFFSIZE=2097152 \
  streams1=KOLO_SOCKET_NSTREAMS=1 copied=KOLO_NET_SEND_DIRECT=0 proxy=KOLO_NET_CALLER_BYTES=65536 \
  rabenseifner=KOLO_ALGO=rabenseifner > $D/knobs4.txt
MINBYTES=512K $D/knobs.sh 2 7 default= buffsize1M=KOLO_BUFFSIZE=1048576 streams1=KOLO_SOCKET_NSTREAMS=1 > $D/knobs2.txt
$D/mpi_algos.sh 5 0 3 4 6 > $D/mpi4-algos.txt
