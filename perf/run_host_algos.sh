#!/usr/bin/env bash
# The algorithms of a collective (COLL, default all_reduce) side by side on
# this machine's CPUs: kolo-perf over NP forked processes with KOLO_ALGO =
# each of ALGOS in turn (and the cost model's own choice, "auto"), and Open
# MPI's over NP processes (kolo-mpi-ref under mpirun, where it was built),
# float32, sizes MINBYTES ..
# MAXBYTES by factors of 2.  The runs alternate (one of each, REPEATS times),
# so that a noisy minute spreads over all of them; the medians of the
# out-of-place and in-place times per size are printed, with each
# algorithm's ratio to the first one's.
#
#   perf/run_host_algos.sh                       # 4 processes, 8 B .. 4 KiB, ring rd rabenseifner auto
#   NP=8 MAXBYTES=64M ALGOS="ring rabenseifner" perf/run_host_algos.sh
#   COLL=broadcast ALGOS="broadcast:ring broadcast:tree" perf/run_host_algos.sh
#   COLL=all_gather ALGOS="allgather:ring allgather:bruck" perf/run_host_algos.sh
#
# Environment: BUILD (build), COLL (all_reduce), NP (4), ALGOS ("ring rd
# rabenseifner auto"),
# REPEATS (5), ITERS (1000), WARMUP (100), MINBYTES (8), MAXBYTES (4K),
# CHECK (1: every element checked, outside the timed loop), MPI (1: run
# kolo-mpi-ref too; mpirun --bind-to none, as kolo-perf does not bind), OUT
# (a directory for the raw JSON; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
COLL=${COLL:-all_reduce}
NP=${NP:-4}
ALGOS=${ALGOS:-ring rd rabenseifner auto}
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-1000}
WARMUP=${WARMUP:-100}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-4K}
CHECK=${CHECK:-1}
MPI=${MPI:-1}

[ -x "$BUILD/bin/kolo-perf" ] || { echo "run_host_algos: build $BUILD/bin/kolo-perf first" >&2; exit 1; }
command -v python3 >/dev/null || { echo "run_host_algos: needs python3 for the summary" >&2; exit 1; }
if [ "$MPI" = 1 ] && { [ ! -x "$BUILD/bin/kolo-mpi-ref" ] || ! command -v mpirun >/dev/null; }; then
  echo "# no kolo-mpi-ref or mpirun: kolo only" >&2
  MPI=0
fi

OUT=${OUT:-$(mktemp -d -t kolo-host-algos.XXXXXX)}
mkdir -p "$OUT"
sweep=(-b "$MINBYTES" -e "$MAXBYTES" -f 2 -n "$ITERS" -w "$WARMUP" -c "$CHECK")
echo "# float32 $COLL, $NP processes, $(nproc) cores, KOLO_ALGO in: $ALGOS; raw results in $OUT"
names=()
for a in $ALGOS; do names+=("${a//[:;,^]/_}"); done
[ "$MPI" = 1 ] && names+=(ompi)
for i in $(seq 1 "$REPEATS"); do
  for a in $ALGOS; do
    echo "# run $i/$REPEATS: KOLO_ALGO=$a"
    f="$OUT/${a//[:;,^]/_}.$i"  # a file name: broadcast:tree -> broadcast_tree
    if [ "$a" = auto ]; then
      env -u KOLO_ALGO "$BUILD/bin/kolo-perf" "$COLL" -P "$NP" "${sweep[@]}" --json "$f.json" > "$f.txt"
    else
      KOLO_ALGO=$a "$BUILD/bin/kolo-perf" "$COLL" -P "$NP" "${sweep[@]}" --json "$f.json" > "$f.txt"
    fi
  done
  if [ "$MPI" = 1 ]; then
    echo "# run $i/$REPEATS: kolo-mpi-ref (mpirun -np $NP --bind-to none)"
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$NP" \
      "$BUILD/bin/kolo-mpi-ref" "$COLL" "${sweep[@]}" --json "$OUT/ompi.$i.json" > "$OUT/ompi.$i.txt"
  fi
done

python3 - "$OUT" "$REPEATS" "${names[@]}" <<'PY'
import json, statistics, sys
out, repeats, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {n: [json.load(open(f"{out}/{n}.{i}.json")) for i in range(1, repeats + 1)] for n in names}
def med(name, size, in_place):
    vals = [r["time_us"] for run in runs[name] for r in run["results"]
            if r["size"] == size and r.get("in_place", False) == in_place]
    return statistics.median(vals) if vals else float("nan")
sizes = sorted({r["size"] for r in runs[names[0]][0]["results"]})
wrong = sum(r["wrong"] for n in names for run in runs[n] for r in run["results"])
for in_place in (False, True):
    print()
    print(f"# median time (us) of {repeats} runs, {'in place' if in_place else 'out of place'};"
          f" (x) = time / {names[0]}'s")
    print("# " + f"{'size (B)':>9}" + "".join(f"  {n:>17}" for n in names))
    for s in sizes:
        base = med(names[0], s, in_place)
        cells = "".join(f"  {med(n, s, in_place):>9.2f} ({med(n, s, in_place) / base:4.2f})" for n in names)
        print(f"  {s:>9}{cells}")
print(f"# #wrong over all runs: {wrong}")
sys.exit(1 if wrong else 0)
PY
