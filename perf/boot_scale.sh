#!/usr/bin/env bash
# perf/boot_scale.sh - the bootstrap's scale against Open MPI on this host,
# N ranks as processes.  Parts (PARTS, default "time"):
#
#   time    init + one checked 8-byte all-reduce, wall time of the whole job
#           (launch to exit): kolo-perf all_reduce -P N and mpirun -np N
#           kolo-mpi-ref all_reduce (MPI_Init + MPI_Allreduce), same flags,
#           alternating REPEATS times, medians.  Then once per N what each
#           rank holds after init (kolo-boot-scale N and its MPI twin:
#           descriptors, RSS, bootstrap connections, init time; the root's
#           peak descriptors and the bytes it sent), and kolo's checked run
#           with its bound on connections (tests/bootstrap_scale.sh).  This
#           is also where the 1024-rank run lives (offline: CI runs 256).
#   memory  what the point-to-point pipes cost each rank: init + one checked
#           8-byte all-reduce + one checked all-to-all of B bytes per peer
#           (B in BYTES), then each rank measures itself (kolo-boot-scale N
#           B; Open MPI's twin under mpirun, MPI_Alltoall).  kolo runs with
#           KOLO_P2P_BUFFSIZE equal to KOLO_BUFFSIZE (every pipe with the
#           collectives' ring of slots) and with its default (the
#           point-to-point pipes' own, smaller ring), over the network path
#           (KOLO_NET_FORCE=1, TCP) and over shared memory.  pipes_mib is the
#           memory of the pipes a rank holds: what ibverbs registers (pins)
#           and CUDA allocates; over TCP and shared memory a page is
#           resident only once a slice has touched it, which rss_mib shows.
#
#   perf/boot_scale.sh                                   # N = 64 256 1024, 3 repeats
#   NPROCS="64 256" REPEATS=5 perf/boot_scale.sh
#   PARTS=memory NPROCS="16 64" perf/boot_scale.sh       # B = 8 65536 1048576
#   OUT=out/bootstrap-scale perf/boot_scale.sh
#
# Environment: BUILD (build), PARTS, NPROCS ("64 256 1024"), REPEATS (3), MPI_REPEATS_MAX
# (REPEATS; fewer MPI runs at large N: MPI_REPEATS_1024 etc. override per N),
# KOLO_TIMEOUT_S (600) and MPI_TIMEOUT_S (2400): a run past it counts as
# failed, MPI_RESOURCES_MAX (256: MPI's per-rank figures up to that many
# ranks), BASE_PERF (another kolo-perf, e.g. one built before this bootstrap:
# timed beside the others up to BASE_MAX=256 ranks), BYTES (memory: "8 65536
# 1048576"), OUT (a directory; default a temporary one).  The soft
# RLIMIT_NOFILE is raised to the hard limit first (kolo-perf's parent holds
# two pipes per rank, mpirun's daemon more).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
NPROCS=${NPROCS:-64 256 1024}
REPEATS=${REPEATS:-3}
KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-600}
MPI_TIMEOUT_S=${MPI_TIMEOUT_S:-2400}
MPI_RESOURCES_MAX=${MPI_RESOURCES_MAX:-256}
BASE_PERF=${BASE_PERF:-}
BASE_MAX=${BASE_MAX:-256}
PARTS=${PARTS:-time}
BYTES=${BYTES:-8 65536 1048576}
for b in kolo-perf kolo-mpi-ref kolo-boot-scale kolo-boot-scale-mpi; do
  [ -x "$BUILD/bin/$b" ] || { echo "boot_scale: $BUILD/bin/$b is missing (scripts/build.sh $BUILD)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "boot_scale: no mpirun (scripts/setup.sh)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d -t kolo-boot-scale.XXXXXX)}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)"
FLAGS=(all_reduce -b 8 -e 8 -n 1 -w 0 -c 1)
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none)

# One timed run: "<ms> <status>" appended to FILE, its output kept.
timed() {
  local file=$1 log=$2 limit=$3
  shift 3
  local t0 rc
  t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@" > "$log" 2>&1
  rc=$?
  echo "$((($(date +%s%N) - t0) / 1000000)) $rc" >> "$file"
}

# Median of the successful runs' ms in FILE, "fail" when none succeeded;
# and how many failed.
median() {
  local ok
  ok=$(awk '$2 == 0 {print $1}' "$1" | sort -n)
  local n
  n=$(echo "$ok" | grep -c .)
  if [ "$n" = 0 ]; then echo "fail"; else echo "$ok" | sed -n "$(((n + 1) / 2))p"; fi
}

# ---- time: the whole job's wall time, and what each rank holds -------------------------
part_time() {
  {
    echo "# kolo bootstrap vs Open MPI: init + one checked 8-byte all-reduce, N processes on one host"
    echo "# kolo: $BUILD/bin/kolo-perf -P N ${FLAGS[*]}"
    echo "# mpi:  ${MPIRUN[*]} -np N $BUILD/bin/kolo-mpi-ref ${FLAGS[*]}"
    [ -n "$BASE_PERF" ] && echo "# base: $BASE_PERF -P N ${FLAGS[*]} (up to $BASE_MAX ranks)"
    echo "# $REPEATS alternating repeats (MPI_REPEATS_<N> may cut MPI's), medians of the runs that succeeded"
  } | tee -a "$OUT/summary.txt"

  for n in $NPROCS; do
    mpi_repeats_var="MPI_REPEATS_$n"
    mpi_repeats=${!mpi_repeats_var:-$REPEATS}
    rm -f "$OUT/kolo.n$n.ms" "$OUT/mpi.n$n.ms" "$OUT/base.n$n.ms"
    for i in $(seq 1 "$REPEATS"); do
      timed "$OUT/kolo.n$n.ms" "$OUT/kolo.n$n.$i.txt" "$KOLO_TIMEOUT_S" "$BUILD/bin/kolo-perf" "${FLAGS[0]}" -P "$n" \
        "${FLAGS[@]:1}"
      mpi_now="-"
      if [ "$i" -le "$mpi_repeats" ]; then
        timed "$OUT/mpi.n$n.ms" "$OUT/mpi.n$n.$i.txt" "$MPI_TIMEOUT_S" "${MPIRUN[@]}" -np "$n" "$BUILD/bin/kolo-mpi-ref" \
          "${FLAGS[@]}"
        mpi_now=$(tail -1 "$OUT/mpi.n$n.ms")
      fi
      [ -n "$BASE_PERF" ] && [ "$n" -le "$BASE_MAX" ] &&
        timed "$OUT/base.n$n.ms" "$OUT/base.n$n.$i.txt" "$KOLO_TIMEOUT_S" "$BASE_PERF" "${FLAGS[0]}" -P "$n" "${FLAGS[@]:1}"
      echo "n=$n repeat $i: kolo $(tail -1 "$OUT/kolo.n$n.ms"), mpi $mpi_now," \
        "base $(tail -1 "$OUT/base.n$n.ms" 2>/dev/null) (ms status)"
    done
    k=$(median "$OUT/kolo.n$n.ms")
    m=$(median "$OUT/mpi.n$n.ms")
    kf=$(awk '$2 != 0' "$OUT/kolo.n$n.ms" | wc -l)
    mf=$(awk '$2 != 0' "$OUT/mpi.n$n.ms" | wc -l)
    ratio=$(awk -v k="$k" -v m="$m" 'BEGIN { if (k + 0 > 0 && m + 0 > 0) printf "%.1f", m / k; else print "-" }')
    {
      echo "N=$n  kolo median ${k} ms ($kf of $REPEATS failed)  Open MPI median ${m} ms ($mf of $mpi_repeats failed)  MPI/kolo ${ratio}x"
      if [ -s "$OUT/base.n$n.ms" ]; then
        echo "  base ($BASE_PERF): median $(median "$OUT/base.n$n.ms") ms ($(awk '$2 != 0' "$OUT/base.n$n.ms" | wc -l) of $REPEATS failed)"
      fi
      echo "  per rank after init (median/max):"
      echo "    $(timeout -k 10 "$KOLO_TIMEOUT_S" "$BUILD/bin/kolo-boot-scale" "$n" 2>"$OUT/kolo-boot-scale.n$n.err")"
      if [ "$n" -le "$MPI_RESOURCES_MAX" ]; then
        echo "    $(timeout -k 10 "$MPI_TIMEOUT_S" "${MPIRUN[@]}" -np "$n" "$BUILD/bin/kolo-boot-scale-mpi" 2>"$OUT/mpi-boot-scale.n$n.err" | grep '^mpi ')"
      else
        echo "    mpi: not measured above MPI_RESOURCES_MAX=$MPI_RESOURCES_MAX ranks (one more MPI job of this size)"
      fi
      echo "  kolo checked run: $(BOUND_S=$KOLO_TIMEOUT_S tests/bootstrap_scale.sh "$BUILD/bin/kolo-perf" "$n" | head -1)"
    } | tee -a "$OUT/summary.txt"
  done
}

# ---- memory: the point-to-point pipes of each rank ------------------------------------------
mem_run() { # label, then the command
  local label=$1 line
  shift
  line=$(timeout -k 10 "$KOLO_TIMEOUT_S" "$@" 2>>"$OUT/memory-stderr.txt" | grep -E '^(kolo|mpi) ')
  echo "  $label: ${line:-FAILED (see $OUT/memory-stderr.txt)}"
}

part_memory() {
  local ring=${KOLO_BUFFSIZE:-4194304} n b kbs=$BUILD/bin/kolo-boot-scale
  {
    echo "# point-to-point pipe memory per rank: init + checked all-reduce + checked all-to-all of B bytes per peer"
    echo "# kolo: [KOLO_NET_FORCE=1] [KOLO_P2P_BUFFSIZE=$ring] $kbs N B; mpi: ${MPIRUN[*]} -np N $kbs-mpi B"
    echo "# fields: median/max over the ranks; pipes_mib: slots and control blocks of the rank's pipes"
  } | tee -a "$OUT/summary.txt"
  for n in $NPROCS; do
    for b in $BYTES; do
      {
        echo "N=$n B=$b"
        mem_run "kolo tcp, p2p ring = KOLO_BUFFSIZE" env KOLO_NET_FORCE=1 KOLO_P2P_BUFFSIZE="$ring" "$kbs" "$n" "$b"
        mem_run "kolo tcp, p2p ring default       " env KOLO_NET_FORCE=1 "$kbs" "$n" "$b"
        mem_run "kolo shm, p2p ring = KOLO_BUFFSIZE" env KOLO_P2P_BUFFSIZE="$ring" "$kbs" "$n" "$b"
        mem_run "kolo shm, p2p ring default       " "$kbs" "$n" "$b"
        mem_run "open mpi                          " "${MPIRUN[@]}" -np "$n" "$kbs-mpi" "$b"
      } | tee -a "$OUT/summary.txt"
    done
  done
}

{
  echo "# perf/boot_scale.sh, PARTS='$PARTS', $(date -u +%Y-%m-%dT%H:%MZ); commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo +dirty)"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem/ {print $2}') GiB, Linux $(uname -r)"
  echo "# $(mpirun --version 2>/dev/null | head -1); RLIMIT_NOFILE $(ulimit -n)"
} | tee "$OUT/summary.txt"
for part in $PARTS; do "part_$part"; done
echo "# raw results in $OUT" | tee -a "$OUT/summary.txt"
