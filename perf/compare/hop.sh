# perf/compare/hop.sh - perf/compare.sh hop: system calls and context
# switches per 8-byte all-reduce and rank, 2 processes over loopback TCP,
# kolo and Open MPI: the difference of two runs of ITERS_LO and ITERS_HI
# calls, so that init and teardown cancel out, in REPEATS alternating
# rounds (medians).  The counts come from perf's syscall tracepoint, which
# leaves the calls' timing alone; strace -c, which slows every call it
# counts (a wait then polls more often than it would), only names them.

# hop_cmd TOOL ITERS: the command line of one 2-process run, into CMD.
hop_cmd() {
  local args=(-b 8 -e 8 -n "$2" -w 0 -c 0 --inplace 0)
  CMD=(env "${KOLO_TCP[@]}" "$BUILD/bin/kolo-perf" all_reduce -P 2 "${args[@]}")
  [ "$1" = kolo ] ||
    CMD=("${MPIRUN[@]}" -np 2 "${MPI_TCP[@]}" --mca btl_tcp_if_include lo "$BUILD/bin/kolo-mpi-ref" all_reduce "${args[@]}")
}

# hop_count TOOL ITERS ROUND: "syscalls ctxsw" of one run of ITERS calls.
hop_count() {
  local f=$OUT/$1.$2.$3
  hop_cmd "$1" "$2"
  perf stat -x, -e raw_syscalls:sys_enter,context-switches -o "$f.perf" "${CMD[@]}" > /dev/null 2>&1 ||
    die "$1, $2 calls, failed under perf stat: $f.perf"
  awk -F, '/raw_syscalls/ {s = $1} /context-switches/ {c = $1} END {print s, c}' "$f.perf"
}

# hop_round TOOL ROUND: one line "TOOL syscalls ctxsw" per call and rank into $OUT/rounds.txt.
hop_round() {
  local s0 s1
  read -r -a s0 <<< "$(hop_count "$1" "$LO" "$2")"
  read -r -a s1 <<< "$(hop_count "$1" "$HI" "$2")"
  awk -v t="$1" -v a0="${s0[0]}" -v a1="${s1[0]}" -v c0="${s0[1]}" -v c1="${s1[1]}" -v d=$((HI - LO)) \
    'BEGIN {printf "%s %.3f %.4f\n", t, (a1 - a0) / d / 2, (c1 - c0) / d / 2}' >> "$OUT/rounds.txt"
}

mode_hop() {
  LO=${ITERS_LO:-2000} HI=${ITERS_HI:-6000}
  local tool
  if ! command -v strace > /dev/null || ! command -v perf > /dev/null; then
    header "## hop: SKIP: needs strace and perf"
    return 0
  fi
  if ! perf stat -x, -e raw_syscalls:sys_enter true > /dev/null 2>&1; then
    header "## hop: SKIP: perf cannot count system calls here (raw_syscalls:sys_enter; root, or perf_event_paranoid -1)"
    return 0
  fi
  need_bins kolo-perf kolo-mpi-ref
  header "## hop: one 8-byte all-reduce, 2 processes, loopback TCP, per call and rank" \
    "#   (runs of $LO and $HI calls, difference / $((HI - LO)) / 2; perf stat -e raw_syscalls:sys_enter,context-switches;" \
    "#   ${REPEATS:-5} alternating rounds, medians)"
  : > "$OUT/rounds.txt"
  alternate "${REPEATS:-5}" hop_round kolo mpi
  {
    python3 - "$OUT/rounds.txt" << 'PY'
from statistics import median
import sys
rounds = [line.split() for line in open(sys.argv[1])]
print("%-10s %12s %12s   %s" % ("tool", "syscalls", "ctx_switches", "(each round's syscalls)"))
for tool in ("kolo", "mpi"):
    mine = [(float(s), float(c)) for t, s, c in rounds if t == tool]
    print("%-10s %12.2f %12.3f   %s" % (tool, median(s for s, _ in mine), median(c for _, c in mine),
                                        " ".join("%.3f" % s for s, _ in mine)))
PY
    for tool in kolo mpi; do
      hop_cmd "$tool" "$HI"
      strace -f -c -o "$OUT/$tool.$HI.strace" "${CMD[@]}" > /dev/null 2>&1 || true
      echo "# $tool's system calls by name under strace -f -c ($HI calls; the tracer's delays add polls):"
      sed -n '1,12p' "$OUT/$tool.$HI.strace"
    done
  } | tee "$OUT/summary.txt"
}
