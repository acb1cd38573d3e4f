#!/usr/bin/env bash
# perf/p2p_memory.sh - what the point-to-point pipes cost each rank: N ranks
# as processes on this host, init + one checked 8-byte all-reduce + one
# checked all-to-all of B bytes per peer, then each rank measures itself
# (kolo-boot-scale N B; Open MPI's twin under mpirun, MPI_Alltoall).
#
# kolo runs twice per point: with KOLO_P2P_BUFFSIZE equal to KOLO_BUFFSIZE
# (every pipe with the collectives' ring of slots) and with its default (the
# point-to-point pipes' own, smaller ring), over the network path
# (KOLO_NET_FORCE=1, TCP) and over shared memory.  pipes_mib is the memory
# of the pipes a rank holds: what ibverbs registers (pins) and CUDA
# allocates; over TCP and shared memory a page is resident only once a
# slice has touched it, which rss_mib shows.
#
#   perf/p2p_memory.sh                           # N = 16 64, B = 8 65536 1048576
#   NPROCS="64" BYTES="8 4194304" perf/p2p_memory.sh
#   OUT=out/p2p-memory perf/p2p_memory.sh
#
# Environment: BUILD (build), NPROCS, BYTES, OUT (a directory; default a
# temporary one), TIMEOUT_S (600 per run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
NPROCS=${NPROCS:-16 64}
BYTES=${BYTES:-8 65536 1048576}
TIMEOUT_S=${TIMEOUT_S:-600}
for b in kolo-boot-scale kolo-boot-scale-mpi; do
  [ -x "$BUILD/bin/$b" ] || { echo "p2p_memory: $BUILD/bin/$b is missing (scripts/build.sh $BUILD)" >&2; exit 1; }
done
OUT=${OUT:-$(mktemp -d -t kolo-p2p-memory.XXXXXX)}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)"
RING=${KOLO_BUFFSIZE:-4194304}
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none)
{
  echo "# point-to-point pipe memory per rank: init + checked all-reduce + checked all-to-all of B bytes per peer"
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +dirty)"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), Linux $(uname -r)"
  echo "# kolo: [KOLO_NET_FORCE=1] [KOLO_P2P_BUFFSIZE=$RING] $BUILD/bin/kolo-boot-scale N B"
  echo "# mpi:  ${MPIRUN[*]} -np N $BUILD/bin/kolo-boot-scale-mpi B"
  echo "# fields: median/max over the ranks; pipes_mib: slots and control blocks of the rank's pipes"
} | tee "$OUT/summary.txt"

run() { # label, then the command
  local label=$1 line
  shift
  line=$(timeout -k 10 "$TIMEOUT_S" "$@" 2>>"$OUT/stderr.txt" | grep -E '^(kolo|mpi) ')
  echo "  $label: ${line:-FAILED (see $OUT/stderr.txt)}"
}

for n in $NPROCS; do
  for b in $BYTES; do
    {
      echo "N=$n B=$b"
      run "kolo tcp, p2p ring = KOLO_BUFFSIZE" env KOLO_NET_FORCE=1 KOLO_P2P_BUFFSIZE="$RING" "$BUILD/bin/kolo-boot-scale" "$n" "$b"
      run "kolo tcp, p2p ring default       " env KOLO_NET_FORCE=1 "$BUILD/bin/kolo-boot-scale" "$n" "$b"
      run "kolo shm, p2p ring = KOLO_BUFFSIZE" env KOLO_P2P_BUFFSIZE="$RING" "$BUILD/bin/kolo-boot-scale" "$n" "$b"
      run "kolo shm, p2p ring default       " "$BUILD/bin/kolo-boot-scale" "$n" "$b"
      if command -v mpirun >/dev/null; then
        run "open mpi                          " "${MPIRUN[@]}" -np "$n" "$BUILD/bin/kolo-boot-scale-mpi" "$b"
      fi
    } | tee -a "$OUT/summary.txt"
  done
done
echo "# raw results in $OUT" | tee -a "$OUT/summary.txt"
