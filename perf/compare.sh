#!/usr/bin/env bash
# perf/compare.sh MODE... - kolo beside its peers on this machine, one engine
# for every comparison: in each mode the contenders take turns, REPEATS
# rounds of one run each, every run keeps its raw output in OUT, and the
# summary gives per size each contender's median, its ratio to kolo's, and
# its ratio within each round (median, lowest, highest).
# A wrong element in a kolo run fails the script; timings decide nothing.
#
# Modes: mpi algos tcp ns hop load net p2p ib ibframes train boot.
# docs/benchmarking.md says what each mode runs and lists its settings.
#
#   perf/compare.sh mpi                                   # N = 2 4 8, 8 B .. 64 MiB
#   NPROCS=4 ALGOS="ring rd" perf/compare.sh algos
#   REPEATS=7 perf/compare.sh net                         # the network beside Open MPI (root)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD  # the modes that change directory find it too
BUSY=${BUSY:-0}

# ---- the engine ------------------------------------------------------------------------

die() { echo "compare $MODE: $*" >&2; exit 1; }
need_bins() { local b; for b; do [ -x "$BUILD/bin/$b" ] || die "$BUILD/bin/$b is missing (scripts/build.sh $BUILD)"; done; }
need_cmds() { local c; for c; do command -v "$c" > /dev/null || die "no $c (scripts/setup.sh installs it)"; done; }

# header LINE...: when, where and what, then LINEs, into $OUT/README.txt and the terminal.
header() {
  mkdir -p "$OUT"
  {
    echo "# perf/compare.sh $MODE, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r);" \
      "kolo $(git rev-parse --short HEAD 2> /dev/null || echo '?')$(git diff --quiet 2> /dev/null || echo +dirty)"
    local kolo_env
    kolo_env=$(env | grep '^KOLO_' | sort | tr '\n' ' ' || true)
    [ -z "$kolo_env" ] || echo "# settings: $kolo_env"
    printf '%s\n' "$@"
  } | tee "$OUT/README.txt"
}

# alternate REPEATS RUN NAME...: round i (1..REPEATS) runs `RUN NAME i` for each NAME in turn.
alternate() {
  local i name
  for i in $(seq 1 "$1"); do for name in "${@:3}"; do "$2" "$name" "$i"; done; done
}

# How every mode starts Open MPI, and kolo's and Open MPI's TCP paths.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
# BIND=core's: rank i on the i-th core (overloaded where ranks outnumber cores).
MPIRUN_CORE=("${MPIRUN[@]/none/core:overload-allowed}" --map-by core)
MPI_TCP=(--mca pml ob1 --mca btl tcp,self)
KOLO_TCP=(KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket)

# at_exit FUNCTION: runs FUNCTION when the mode ends, however it ends, after those added before.
EXIT_HOOKS=()
at_exit() { EXIT_HOOKS+=("$1"); trap 'for h in "${EXIT_HOOKS[@]}"; do "$h"; done' EXIT; }

# CPUS: the CPUs this script may use (read by bind_core); cpu_of I: BIND=core's rank I's.
CPUS=()
cpu_of() { echo "${CPUS[$(($1 % ${#CPUS[@]}))]}"; }

# bind_core: 0 where BIND=core (CPUS read), 1 where none; another BIND dies.
bind_core() {
  case "${BIND:=none}" in none) return 1 ;; core) ;; *) die "BIND=$BIND: none or core" ;; esac
  read -r -a CPUS <<< "$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
}

busy=()
stop_busy() { local p; for p in "${busy[@]}"; do kill "$p" 2> /dev/null || true; done; busy=(); }
start_busy() {
  local k
  at_exit stop_busy
  for ((k = 0; k < $1; k++)); do nice -n 19 sh -c 'while :; do :; done' & busy+=($!); done
}

# ---- collectives: mpi, algos, tcp, ns ------------------------------------------------------
# machine_cpu: the whole machine's CPU time so far, in USER_HZ ticks, and its context switches:
# "user nice system idle iowait irq softirq ctxt" (proc(5)).
machine_cpu() { awk '$1 == "cpu" {t = $2 " " $3 " " $4 " " $5 " " $6 " " $7 " " $8} $1 == "ctxt" {c = $2} END {print t, c}' /proc/stat; }

# coll_run NAME ROUND: one run of one contender at N processes, OUT/nN/NAME.ROUND.{json,txt}
# (and .stat with STAT=1: what machine_cpu counted during the run).
coll_run() {
  local before
  [ "$STAT" = 1 ] && before=$(machine_cpu)
  coll_run_one "$@"
  [ "$STAT" = 1 ] && paste -d' ' <(echo "$before") <(machine_cpu) |
    awk '{for (i = 1; i <= 8; i++) printf "%d%s", $(i + 8) - $i, i < 8 ? " " : "\n"}' > "$OUT/n$N/$1.$2.stat"
  return 0
}

coll_run_one() {
  local name=$1 n=$N f=$OUT/n$N/$1.$2
  local perf=("$BUILD/bin/kolo-perf" "$COLL" -P "$n" "${sweep[@]}" "${KOLO_BIND[@]}" --json "$f.json")
  if [ "$MODE" = ns ]; then "ns_$name" "$n" "$f"; return; fi
  case "$name" in
    kolo) env "${KOLO_ENV[@]}" "${perf[@]}" --label "kolo, $n procs" ;;
    base) env "${KOLO_ENV[@]}" "$BASE" "${perf[@]:1}" --label "base, $n procs" ;;
    mpi) "${MPIRUN[@]}" -np "$n" "${MPI_ARGS[@]}" "$BUILD/bin/kolo-mpi-ref" "${perf[@]:1:1}" "${sweep[@]}" \
      --json "$f.json" --label "Open MPI, $n procs" ;;
    memcpy) "$BUILD/bin/kolo-memcpy-bw" -b "$MINBYTES" -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" \
      --json "$f.json" ;;
    auto) env -u KOLO_ALGO "${perf[@]}" --label "auto, $n procs" ;;
    *) KOLO_ALGO=${ALGO_OF[$name]} "${perf[@]}" --label "${ALGO_OF[$name]}, $n procs" ;;
  esac > "$f.txt"
}

coll_contenders() {
  NAMES=(kolo)
  [ "$MODE" != algos ] || { NAMES=(); for a in $ALGOS; do NAMES+=("${a//[:;,^]/_}"); ALGO_OF[${a//[:;,^]/_}]=$a; done; }
  [ -n "$BASE" ] && NAMES+=(base)
  if [ "$MPI" = 1 ] && { [ ! -x "$BUILD/bin/kolo-mpi-ref" ] || ! command -v mpirun > /dev/null; }; then
    [ "$MODE" = algos ] || die "needs mpirun and $BUILD/bin/kolo-mpi-ref (scripts/setup.sh)"
    echo "# no kolo-mpi-ref or mpirun: kolo only" >&2
    MPI=0
  fi
  [ "$MPI" = 1 ] && NAMES+=(mpi)
  [ "$MEMCPY" = 1 ] && NAMES+=(memcpy)
  need_bins kolo-perf $([ "$MEMCPY" = 1 ] && echo kolo-memcpy-bw)
}

mode_coll() {
  local d
  case "$MODE" in
    mpi) d=("2 4 8" 3 50 10 64M 2 0) ;;
    algos) d=("${NP:-4}" 5 1000 100 4K 2 1) ;;
    tcp | ns) d=("2 4" 5 50 10 64M 8 0) ;;
  esac
  COLL=${COLL:-all_reduce} NPROCS=${NPROCS:-${d[0]}} REPEATS=${REPEATS:-${d[1]}}
  ITERS=${ITERS:-${d[2]}} WARMUP=${WARMUP:-${d[3]}} MINBYTES=${MINBYTES:-8} MAXBYTES=${MAXBYTES:-${d[4]}}
  FACTOR=${FACTOR:-${d[5]}} INPLACE=${INPLACE:-${d[6]}} CHECK=${CHECK:-1} MPI=${MPI:-1} MEMCPY=${MEMCPY:-0}
  ALGOS=${ALGOS:-ring rd rabenseifner auto} BASE=${BASE:-} STAT=${STAT:-0} OFFSET=${OFFSET:-0}
  sweep=(-b "$MINBYTES" -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c "$CHECK")
  [ "$INPLACE" = 1 ] || sweep+=(--inplace 0)
  [ "$OFFSET" = 0 ] || sweep+=(--offset "$OFFSET")
  KOLO_ENV=() MPI_ARGS=() KOLO_BIND=()
  [ "$MODE" != tcp ] || KOLO_ENV=("${KOLO_TCP[@]}") MPI_ARGS=("${MPI_TCP[@]}" --mca btl_tcp_if_include lo)
  # ns mode pins both sides with taskset (compare/ns.sh): Open MPI's own
  # binding would put every "host"'s one rank on CPU 0.
  if bind_core; then
    KOLO_BIND=(--bind core)
    [ "$MODE" = ns ] || MPIRUN=("${MPIRUN_CORE[@]}")
  fi
  declare -gA ALGO_OF=()
  coll_contenders
  [ "$MODE" = ns ] && { . perf/compare/ns.sh; ns_ready || return 0; }
  start_busy "$BUSY"
  local about=("# float32 $COLL, N = $NPROCS, $REPEATS alternating rounds of: ${NAMES[*]}; ${sweep[*]}; BUSY=$BUSY")
  [ "$BIND" = core ] && about+=("# BIND=core: rank i of each side on the i-th CPU (mod ${#CPUS[@]})")
  [ "$MODE" = tcp ] && about+=("# kolo: ${KOLO_ENV[*]}; Open MPI: ${MPI_ARGS[*]}")
  [ "$MODE" = ns ] && about+=("# $(ns_about)")
  header "${about[@]}"
  for N in $NPROCS; do
    [ "$MODE" = ns ] && ns_make "$N"
    mkdir -p "$OUT/n$N"
    alternate "$REPEATS" coll_run "${NAMES[@]}"
    echo "## $N processes"
    python3 perf/compare_median.py "$OUT/n$N" "$REPEATS" "${NAMES[@]}" | tee "$OUT/n$N/summary.txt"
    [ "$STAT" = 1 ] && python3 perf/compare_stat.py "$OUT/n$N" "${NAMES[@]}" | tee -a "$OUT/n$N/summary.txt"
    local medians=() name
    for name in "${NAMES[@]}"; do [ "$name" = memcpy ] || medians+=("$OUT/n$N/$name.median.json"); done
    python3 perf/plot.py "${medians[@]}" -o "$OUT/n$N/plot.png" --title "$COLL, $N processes: ${NAMES[*]}" \
      > /dev/null 2> "$OUT/n$N/plot.err" || echo "# no plot: $OUT/n$N/plot.err says why"
  done
}

# ---- the modes -----------------------------------------------------------------------------

# load: mpi mode, 4 processes, 8 B over shared memory, quiet and beside LOAD (2) busy loops.
mode_load() {
  local out=$OUT b
  for b in 0 "${LOAD:-2}"; do
    echo "## load: 4 processes, 8-byte all-reduce over shared memory, $b busy loops at nice 19"
    (OUT=$out/busy$b MODE=mpi NPROCS=4 MAXBYTES=8 ITERS=2000 WARMUP=200 BUSY=$b mode_coll)
  done
}

run_mode() {
  case "$MODE" in
    mpi | algos | tcp | ns) mode_coll ;;
    load) mode_load ;;
    *) . "perf/compare/$MODE.sh" && "mode_$MODE" ;;
  esac
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
MODES=()
for m; do
  case "$m" in
    net) MODES+=(tcp ns hop load) ;;
    mpi | algos | tcp | ns | hop | load | p2p | ib | ibframes | train | boot) MODES+=("$m") ;;
    *) echo "compare: unknown mode $m (mpi, algos, tcp, ns, hop, load, net, p2p, ib, ibframes, train, boot)" >&2; exit 2 ;;
  esac
done
TOP=${OUT:-$(mktemp -d -t "kolo-compare.XXXXXX")}
rc=0
for MODE in "${MODES[@]}"; do
  OUT=$TOP
  [ ${#MODES[@]} -gt 1 ] && OUT=$TOP/$MODE
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  (run_mode) || { echo "# compare: mode $MODE failed" >&2; rc=1; }
done
echo "# results in $TOP"
exit $rc
