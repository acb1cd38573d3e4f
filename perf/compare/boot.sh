# perf/compare/boot.sh - perf/compare.sh boot: the bootstrap's scale beside
# Open MPI on this host, N ranks as processes: PARTS time (the whole job's
# wall time, and what each rank holds after init) and memory (the
# point-to-point pipes' memory per rank).  Settings: docs/benchmarking.md.

BOOT_FLAGS=(all_reduce -b 8 -e 8 -n 1 -w 0 -c 1)

# timed FILE LOG LIMIT CMD...: one timed run, "<ms> <status>" appended to FILE, its output in LOG.
timed() {
  local t0 rc
  t0=$(date +%s%N)
  timeout -k 10 "$3" "${@:4}" > "$2" 2>&1
  rc=$?
  echo "$((($(date +%s%N) - t0) / 1000000)) $rc" >> "$1"
}

# Median of the successful runs' ms in FILE, "fail" when none succeeded.
median() { awk '$2 == 0 {print $1}' "$1" | sort -n | awk '{v[NR] = $1} END {print NR ? v[int((NR + 1) / 2)] : "fail"}'; }
failed() { awk '$2 != 0' "$1" 2> /dev/null | wc -l; }

# boot_run NAME ROUND: one timed job of kolo, mpi or base at N ranks.
boot_run() {
  local f=$OUT/$1.n$N
  case $1 in
    kolo) timed "$f.ms" "$f.$2.txt" "$KOLO_TIMEOUT_S" "$BUILD/bin/kolo-perf" "${BOOT_FLAGS[0]}" -P "$N" "${BOOT_FLAGS[@]:1}" ;;
    mpi) [ "$2" -le "$MPI_REPEATS" ] &&
      timed "$f.ms" "$f.$2.txt" "$MPI_TIMEOUT_S" "${MPIRUN[@]}" -np "$N" "$BUILD/bin/kolo-mpi-ref" "${BOOT_FLAGS[@]}" ;;
    base) [ "$N" -le "$BASE_MAX" ] &&
      timed "$f.ms" "$f.$2.txt" "$KOLO_TIMEOUT_S" "$BASE_PERF" "${BOOT_FLAGS[0]}" -P "$N" "${BOOT_FLAGS[@]:1}" ;;
  esac
  echo "n=$N round $2: $1 $([ -s "$f.ms" ] && tail -1 "$f.ms") (ms status)"
}

# ---- time: the whole job's wall time, and what each rank holds -------------------------
boot_time() {
  local names=(kolo mpi) k m
  [ -n "$BASE_PERF" ] && names+=(base)
  {
    echo "# kolo bootstrap vs Open MPI: init + one checked 8-byte all-reduce, N processes on one host"
    echo "# kolo: $BUILD/bin/kolo-perf -P N ${BOOT_FLAGS[*]}"
    echo "# mpi:  ${MPIRUN[*]} -np N $BUILD/bin/kolo-mpi-ref ${BOOT_FLAGS[*]}"
    [ -n "$BASE_PERF" ] && echo "# base: $BASE_PERF -P N ${BOOT_FLAGS[*]} (up to $BASE_MAX ranks)"
    echo "# $REPEATS rounds (MPI_REPEATS_<N> may cut MPI's), medians of the runs that succeeded"
  } | tee -a "$OUT/summary.txt"
  for N in $NPROCS; do
    local var="MPI_REPEATS_$N"
    MPI_REPEATS=${!var:-$REPEATS}
    rm -f "$OUT"/{kolo,mpi,base}.n$N.ms
    alternate "$REPEATS" boot_run "${names[@]}"
    k=$(median "$OUT/kolo.n$N.ms") m=$(median "$OUT/mpi.n$N.ms")
    {
      echo "N=$N  kolo median ${k} ms ($(failed "$OUT/kolo.n$N.ms") of $REPEATS failed)  Open MPI median ${m} ms" \
        "($(failed "$OUT/mpi.n$N.ms") of $MPI_REPEATS failed)  MPI/kolo" \
        "$(awk -v k="$k" -v m="$m" 'BEGIN { if (k + 0 > 0 && m + 0 > 0) printf "%.1f", m / k; else print "-" }')x"
      [ -s "$OUT/base.n$N.ms" ] &&
        echo "  base ($BASE_PERF): median $(median "$OUT/base.n$N.ms") ms ($(failed "$OUT/base.n$N.ms") of $REPEATS failed)"
      echo "  per rank after init (median/max):"
      echo "    $(timeout -k 10 "$KOLO_TIMEOUT_S" "$BUILD/bin/kolo-boot-scale" "$N" 2> "$OUT/kolo-boot-scale.n$N.err")"
      if [ "$N" -le "$MPI_RESOURCES_MAX" ]; then
        echo "    $(timeout -k 10 "$MPI_TIMEOUT_S" "${MPIRUN[@]}" -np "$N" "$BUILD/bin/kolo-boot-scale-mpi" \
          2> "$OUT/mpi-boot-scale.n$N.err" | grep '^mpi ')"
      else
        echo "    mpi: not measured above MPI_RESOURCES_MAX=$MPI_RESOURCES_MAX ranks (one more MPI job of this size)"
      fi
      echo "  kolo checked run: $(BOUND_S=$KOLO_TIMEOUT_S tests/bootstrap_scale.sh "$BUILD/bin/kolo-perf" "$N" | head -1)"
    } | tee -a "$OUT/summary.txt"
  done
}

# ---- memory: the point-to-point pipes of each rank ------------------------------------------
mem_run() { # label, then the command
  local line
  line=$(timeout -k 10 "$KOLO_TIMEOUT_S" "${@:2}" 2>>"$OUT/memory-stderr.txt" | grep -E '^(kolo|mpi) ')
  echo "  $1: ${line:-FAILED (see $OUT/memory-stderr.txt)}"
}
boot_memory() {
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

mode_boot() {
  set +e
  NPROCS=${NPROCS:-64 256 1024} REPEATS=${REPEATS:-3} KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-600}
  MPI_TIMEOUT_S=${MPI_TIMEOUT_S:-2400} MPI_RESOURCES_MAX=${MPI_RESOURCES_MAX:-256} BASE_PERF=${BASE_PERF:-}
  BASE_MAX=${BASE_MAX:-256} BYTES=${BYTES:-8 65536 1048576}
  need_bins kolo-perf kolo-mpi-ref kolo-boot-scale kolo-boot-scale-mpi
  need_cmds mpirun
  ulimit -n "$(ulimit -Hn)"
  header "# PARTS='${PARTS:=time}'; $(mpirun --version 2> /dev/null | head -1); RLIMIT_NOFILE $(ulimit -n)" \
    "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem/ {print $2}') GiB"
  cp "$OUT/README.txt" "$OUT/summary.txt"
  local part
  for part in $PARTS; do
    case $part in time | memory) "boot_$part" ;; *) die "PARTS: time or memory, not $part" ;; esac
  done
}
