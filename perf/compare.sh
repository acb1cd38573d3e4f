#!/usr/bin/env bash
# perf/compare.sh MODE - kolo beside a peer on this machine, one engine for
# every mode: the contenders of MODE run in turn, REPEATS rounds (so that a
# noisy minute spreads over all of them), each run keeping its JSON and
# table in OUT/nN/NAME.I.{json,txt}; then per size each contender's median
# time, its ratio to the first contender's and its median busbw
# (perf/compare_median.py, also in OUT/nN/summary.txt), and a plot of the
# medians (OUT/nN/plot.png, perf/plot.py).  Every run checks its results
# (CHECK=1, outside the timed loop): a wrong element fails the script.
#
# Modes, and their contenders:
#   mpi    kolo-perf COLL -P N; kolo-mpi-ref COLL under mpirun -np N (Open
#          MPI); with MEMCPY=1 one core's memcpy too (kolo-memcpy-bw)
#   algos  kolo-perf COLL -P N with KOLO_ALGO = each of ALGOS in turn ("auto":
#          the cost model's choice); Open MPI (MPI=0: none)
#   tcp    as mpi over loopback TCP: kolo with KOLO_NET_FORCE=1
#          KOLO_SHM_DISABLE=1 KOLO_NET=socket, Open MPI with pml ob1 and btl
#          tcp,self on lo
# In any mode BASE=other/bin/kolo-perf runs an older kolo-perf beside them,
# and BUSY=K runs K busy loops at nice 19 throughout (a fixed stand-in for a
# low-priority compile).
#
#   perf/compare.sh mpi                                   # N = 2 4 8, 8 B .. 64 MiB
#   NPROCS=2 MEMCPY=1 MAXBYTES=256M perf/compare.sh mpi   # kolo, Open MPI and memcpy
#   NPROCS=4 ALGOS="ring rd" perf/compare.sh algos
#   COLL=broadcast ALGOS="broadcast:ring broadcast:tree" perf/compare.sh algos
#   NPROCS="2 4" FACTOR=8 perf/compare.sh tcp
#
# Environment (defaults mpi / algos / tcp): BUILD (build), COLL (all_reduce),
# NPROCS (2 4 8 / NP or 4 / 2 4), REPEATS (3 / 5 / 5), ITERS (50 / 1000 / 50),
# WARMUP (10 / 100 / 10), MINBYTES (8), MAXBYTES (64M / 4K / 64M), FACTOR
# (2 / 2 / 8), INPLACE (0 / 1 / 0: 1 times in place too), CHECK (1), ALGOS
# ("ring rd rabenseifner auto"), MPI (1), MEMCPY (0), BASE, BUSY (0), OUT (a
# directory; default a temporary one).  KOLO_* settings pass through to kolo.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: perf/compare.sh mpi|algos|tcp (see the comment at its top)}
case "$MODE" in
  mpi) d=("2 4 8" 3 50 10 64M 2 0) ;;
  algos) d=("${NP:-4}" 5 1000 100 4K 2 1) ;;
  tcp) d=("2 4" 5 50 10 64M 8 0) ;;
  *) echo "compare: unknown mode $MODE (mpi, algos or tcp)" >&2; exit 2 ;;
esac
BUILD=${BUILD:-build} COLL=${COLL:-all_reduce} NPROCS=${NPROCS:-${d[0]}} REPEATS=${REPEATS:-${d[1]}}
ITERS=${ITERS:-${d[2]}} WARMUP=${WARMUP:-${d[3]}} MINBYTES=${MINBYTES:-8} MAXBYTES=${MAXBYTES:-${d[4]}}
FACTOR=${FACTOR:-${d[5]}} INPLACE=${INPLACE:-${d[6]}} CHECK=${CHECK:-1} MPI=${MPI:-1} MEMCPY=${MEMCPY:-0}
ALGOS=${ALGOS:-ring rd rabenseifner auto} BASE=${BASE:-} BUSY=${BUSY:-0}
sweep=(-b "$MINBYTES" -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c "$CHECK")
[ "$INPLACE" = 1 ] || sweep+=(--inplace 0)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
KOLO_ENV=()
MPI_ARGS=()
if [ "$MODE" = tcp ]; then
  KOLO_ENV=(KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket)
  MPI_ARGS=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
fi

# NAMES: the contenders, first the one the others are compared with.
declare -A ALGO_OF=()
NAMES=()
if [ "$MODE" = algos ]; then
  for a in $ALGOS; do NAMES+=("${a//[:;,^]/_}"); ALGO_OF[${a//[:;,^]/_}]=$a; done
else
  NAMES=(kolo)
fi
[ -n "$BASE" ] && NAMES+=(base)
if [ "$MPI" = 1 ] && { [ ! -x "$BUILD/bin/kolo-mpi-ref" ] || ! command -v mpirun > /dev/null; }; then
  [ "$MODE" = algos ] || { echo "compare: $MODE needs mpirun and $BUILD/bin/kolo-mpi-ref (scripts/setup.sh)" >&2; exit 1; }
  echo "# no kolo-mpi-ref or mpirun: kolo only" >&2
  MPI=0
fi
[ "$MPI" = 1 ] && NAMES+=(mpi)
[ "$MEMCPY" = 1 ] && NAMES+=(memcpy)
for b in kolo-perf $([ "$MEMCPY" = 1 ] && echo kolo-memcpy-bw); do
  [ -x "$BUILD/bin/$b" ] || { echo "compare: $BUILD/bin/$b is missing (scripts/build.sh $BUILD)" >&2; exit 1; }
done

# run_one NAME N FILE: one run of one contender, its JSON in FILE.json.
run_one() {
  local name=$1 n=$2 f=$3 perf=("$BUILD/bin/kolo-perf" "$COLL" -P "$2" "${sweep[@]}" --json "$3.json")
  case "$name" in
    kolo) env "${KOLO_ENV[@]}" "${perf[@]}" --label "kolo, $n procs" ;;
    base) env "${KOLO_ENV[@]}" "$BASE" "${perf[@]:1}" --label "base, $n procs" ;;
    mpi) "${MPIRUN[@]}" -np "$n" "${MPI_ARGS[@]}" "$BUILD/bin/kolo-mpi-ref" "${perf[@]:1:1}" "${perf[@]:4}" \
      --label "Open MPI, $n procs" ;;
    memcpy) "$BUILD/bin/kolo-memcpy-bw" -b "$MINBYTES" -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" \
      --json "$f.json" ;;
    auto) env -u KOLO_ALGO "${perf[@]}" --label "auto, $n procs" ;;
    *) KOLO_ALGO=${ALGO_OF[$name]} "${perf[@]}" --label "${ALGO_OF[$name]}, $n procs" ;;
  esac > "$f.txt"
}

busy=()
stop_busy() { local p; for p in "${busy[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap stop_busy EXIT
for ((k = 0; k < BUSY; k++)); do nice -n 19 sh -c 'while :; do :; done' & busy+=($!); done

OUT=${OUT:-$(mktemp -d -t "kolo-compare-$MODE.XXXXXX")}
mkdir -p "$OUT"
{
  echo "# perf/compare.sh $MODE, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r);" \
    "kolo $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "# float32 $COLL, N = $NPROCS, $REPEATS alternating rounds of: ${NAMES[*]}; ${sweep[*]}; BUSY=$BUSY"
  if [ "$MODE" = tcp ]; then echo "# kolo: ${KOLO_ENV[*]}; Open MPI: ${MPI_ARGS[*]}"; fi
} | tee "$OUT/README.txt"
for n in $NPROCS; do
  mkdir -p "$OUT/n$n"
  for i in $(seq 1 "$REPEATS"); do
    for name in "${NAMES[@]}"; do run_one "$name" "$n" "$OUT/n$n/$name.$i"; done
  done
  echo "## $n processes"
  python3 perf/compare_median.py "$OUT/n$n" "$REPEATS" "${NAMES[@]}" | tee "$OUT/n$n/summary.txt"
  medians=()
  for name in "${NAMES[@]}"; do [ "$name" = memcpy ] || medians+=("$OUT/n$n/$name.median.json"); done
  python3 perf/plot.py "${medians[@]}" -o "$OUT/n$n/plot.png" --title "$COLL, $n processes: ${NAMES[*]}" \
    > /dev/null 2> "$OUT/n$n/plot.err" || echo "# no plot: $OUT/n$n/plot.err says why"
done
echo "# results in $OUT"
