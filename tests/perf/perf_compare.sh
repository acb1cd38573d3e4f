#!/usr/bin/env bash
# tests/perf/perf_compare.sh KOLO_PERF - perf/compare.sh, the engine of every
# comparison with a peer, end to end at tiny sizes: the mpi and tcp modes
# (kolo beside Open MPI, 2 rounds; tcp with both sides pinned, BIND=core)
# leave every run's JSON, the medians and a summary naming both contenders;
# boot (4 ranks, both parts) checks its runs; a run whose JSON reports a wrong element fails the medians with a
# sentence; an unknown mode is refused before anything runs.  Exit 77
# (skipped, said why) without mpirun or kolo-mpi-ref.  Timings decide
# nothing here.
set -u
BIN=$(realpath "${1:?usage: perf_compare.sh path/to/kolo-perf}")
BUILD=$(dirname "$(dirname "$BIN")")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/kolo-perf-compare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [ -f "$WORK/log.txt" ] && tail -n 20 "$WORK/log.txt" | sed 's/^/    /'; exit 1; }
command -v mpirun > /dev/null && [ -x "$BUILD/bin/kolo-mpi-ref" ] ||
  { echo "SKIP: needs mpirun and $BUILD/bin/kolo-mpi-ref (Open MPI)"; exit 77; }
export BUILD
compare() { "$ROOT/perf/compare.sh" "$@" > "$WORK/log.txt" 2>&1; }

NPROCS=2 REPEATS=2 MAXBYTES=256 FACTOR=8 ITERS=3 WARMUP=1 OUT=$WORK/c/mpi compare mpi ||
  fail "perf/compare.sh mpi"
NPROCS=2 REPEATS=2 MAXBYTES=256 FACTOR=8 ITERS=3 WARMUP=1 BIND=core OUT=$WORK/c/tcp compare tcp ||
  fail "BIND=core perf/compare.sh tcp"
for m in mpi tcp; do
  for f in README.txt n2/summary.txt n2/kolo.1.json n2/kolo.2.json n2/mpi.2.json n2/kolo.median.json n2/mpi.median.json; do
    [ -s "$WORK/c/$m/$f" ] || fail "$m: no $f"
  done
  grep -q "kolo *mpi" "$WORK/c/$m/n2/summary.txt" || fail "$m: the summary names no contenders"
  [ "$(grep -cE '^ +(8|64) ' "$WORK/c/$m/n2/summary.txt")" -ge 4 ] || fail "$m: the summary lacks sizes 8 and 64"
done
grep -q "KOLO_NET_FORCE=1" "$WORK/c/tcp/README.txt" || fail "tcp: README.txt does not say how kolo ran"
grep -q "^# BIND=core: rank i of each side on the i-th CPU" "$WORK/c/tcp/README.txt" ||
  fail "tcp: README.txt does not say the ranks were pinned"
BIND=socket OUT=$WORK/y compare tcp && fail "BIND=socket ran"
grep -q "BIND=socket: none or core" "$WORK/log.txt" || fail "BIND=socket is not refused with a sentence"

NPROCS=4 REPEATS=1 PARTS="time memory" BYTES=8 OUT=$WORK/b compare boot || fail "perf/compare.sh boot"
grep -q "kolo checked run: ok" "$WORK/b/summary.txt" || fail "boot: no checked run"
grep -q "N=4  kolo median [0-9]" "$WORK/b/summary.txt" || fail "boot: no median"
grep -q "kolo shm, p2p ring default *: kolo 4 ranks .*failed 0" "$WORK/b/summary.txt" || fail "boot: memory part"

# A wrong element in one run's JSON fails the medians, naming the file.
d=$WORK/c/mpi/n2
python3 - "$d/kolo.2.json" << 'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["results"][0]["wrong"] = 1
json.dump(run, open(sys.argv[1], "w"))
PY
python3 "$ROOT/perf/compare_median.py" "$d" 2 kolo mpi > "$WORK/log.txt" 2>&1 && fail "a wrong element passed"
grep -q "kolo.2.json: 1 wrong elements" "$WORK/log.txt" || fail "the refusal does not name the run"

OUT=$WORK/x "$ROOT/perf/compare.sh" mpi bogus > "$WORK/log.txt" 2>&1
[ $? = 2 ] || fail "an unknown mode: exit status not 2"
grep -q "unknown mode bogus" "$WORK/log.txt" || fail "an unknown mode is not named"
[ ! -d "$WORK/x/mpi" ] || fail "a mode ran before the unknown one was refused"
echo "ok: perf/compare.sh mpi, tcp (pinned) and boot at tiny sizes; a wrong element and an unknown mode refused"
