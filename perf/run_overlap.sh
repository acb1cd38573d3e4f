#!/usr/bin/env bash
# perf/run_overlap.sh - the fusion's overlap figures on this machine:
# `kolo-perf overlap` over 2 forked processes, the models and the
# small-tensor test, each run REPEATS times, then the medians over the runs
# and the failed checks.  docs/benchmarking.md lists the settings.
#
#   perf/run_overlap.sh                   # builds kolo-perf in build/ first if missing
#   BUILD=build-overlap REPEATS=5 ITERS=20 perf/run_overlap.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
REPEATS=${REPEATS:-3}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
MODELS=${MODELS:-resnet50,bert-base}
PROCS=${PROCS:-2}
EXTERNAL=${EXTERNAL:-1}
NET=${NET:-1}
SMALL_ITERS=${SMALL_ITERS:-20}
TIMEOUT=${TIMEOUT:-900}
START=${START:-1}
MODEL_ARGS=${MODEL_ARGS:-}

bin="$BUILD/bin/kolo-perf"
if [ ! -x "$bin" ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target kolo-perf > /dev/null
fi
[ -x "$bin" ] || { echo "run_overlap: $bin was not built" >&2; exit 1; }
command -v python3 > /dev/null || { echo "run_overlap: needs python3 for the summary" >&2; exit 1; }

OUT=${OUT:-$(mktemp -d -t kolo-overlap.XXXXXX)}
mkdir -p "$OUT"
echo "# kolo-perf overlap, $PROCS processes, $(nproc) cores, $REPEATS runs; raw output in $OUT"

# run NAME [env ...] -- ARGS: one run into $OUT/NAME.txt; its exit status in $OUT/NAME.rc
run() {
  local name=$1 envs=() rc=0
  shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "# $name: ${envs[*]} $bin overlap $*"
  timeout -k 10 "$TIMEOUT" env "${envs[@]}" "$bin" overlap "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err" || rc=$?
  echo "$rc" > "$OUT/$name.rc"
  [ "$rc" = 0 ] || echo "#   exit status $rc: $(tail -n 3 "$OUT/$name.err" | tr '\n' ' ')"
}

for i in $(seq "$START" $((START + REPEATS - 1))); do
  # shellcheck disable=SC2086 # MODEL_ARGS: several flags
  run "alloc.$i" -- -P "$PROCS" --model "$MODELS" -n "$ITERS" -w "$WARMUP" $MODEL_ARGS
  # shellcheck disable=SC2086
  if [ "$EXTERNAL" = 1 ]; then run "ext.$i" -- -P "$PROCS" --model "$MODELS" -n "$ITERS" -w "$WARMUP" --external $MODEL_ARGS; fi
  run "small-shm.$i" -- -P "$PROCS" --small -n "$SMALL_ITERS" -w "$WARMUP"
  if [ "$NET" = 1 ]; then run "small-net.$i" KOLO_NET_FORCE=1 -- -P "$PROCS" --small -n "$SMALL_ITERS" -w "$WARMUP"; fi
done

python3 - "$OUT" "$REPEATS" <<'PY'
import glob, os, re, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
med = statistics.median
failures = []
models, small, ideal, layouts = {}, {}, {}, {}
for path in sorted(glob.glob(f"{out}/*.txt")):
    name = os.path.basename(path)[:-4]
    kind = name.rsplit(".", 1)[0]
    rc = open(f"{out}/{name}.rc").read().strip()
    if rc != "0":
        failures.append(f"{name}: exit status {rc}")
    for line in open(path):
        if line.startswith("# copies") and "kept" not in line:
            failures.append(f"{name}: {line.strip()}")
        m = re.match(r"# check (\S+): .*: (\d+) wrong", line)
        if m and m.group(2) != "0":
            failures.append(f"{name}: {m.group(2)} wrong elements in {m.group(1)}")
        m = re.match(r"# model (\S+) .*?(\d+) buckets.*, largest (bucket|tensor) ([\d.]+)%", line)
        if m:
            layouts[(m.group(1), kind)] = f"{m.group(2)} buckets, largest {m.group(3)} {m.group(4)}% of the gradients"
        m = re.match(r"# ideal \((\S+), (\S+), (\S+)\): \S+ ms = (\S+) x bound .*overlap / ideal (\S+)", line)
        if m:
            ideal.setdefault(m.group(1, 2, 3), []).append((float(m.group(4)), float(m.group(5))))
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) == 12:  # model grads compute set comm compute no-ovl overlap bound ratio rratio speedup
            key = (f[0], f[1], f[2])
            models.setdefault(key, []).append([float(x) for x in f[3:11]])
        elif len(f) == 8:  # fusion tensors bytes fused separate ratio wrong wrong
            key = ("net" if kind == "small-net" else "shm", f[0], f[1], f[2])
            small.setdefault(key, []).append([float(x) for x in (f[3], f[4], f[5])])
        if len(f) == 8 and (f[6] != "0" or f[7] != "0"):
            failures.append(f"{name}: wrong elements in the small test ({f[0]}: fused {f[6]}, separate {f[7]})")

print()
print(f"# medians over runs (each run: medians over its rounds); ratio = overlap / max(compute, comm);")
print(f"# ideal = the best schedule of this layout (each all-reduce starts when its bucket / external tensor is")
print(f"# complete and the previous one is done, at the comm-only rate), as a multiple of the bound")
print(f"# {'model':<10} {'grads':<5} {'compute':<7} {'runs':>4} {'comm':>8} {'compute':>8} {'no-ovl':>8} {'overlap':>8} "
      f"{'bound':>8} {'ratio':>6} {'ratio':>6} {'no-ovl/':>7} {'ideal/':>6} {'ovl/':>6}")
print(f"# {'':<10} {'':<5} {'':<7} {'':>4} {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} {'':>6} "
      f"{'rounds':>6} {'overlap':>7} {'bound':>6} {'ideal':>6}")
for key in sorted(models):
    rows = models[key]
    col = lambda i: med(r[i] for r in rows)
    print(f"  {key[0]:<10} {key[1]:<5} {key[2]:<7} {len(rows):>4} {col(1):>8.2f} {col(2):>8.2f} {col(3):>8.2f} "
          f"{col(4):>8.2f} {col(5):>8.2f} {col(6):>6.3f} {col(7):>6.3f} "
          f"{med(r[3] / r[4] for r in rows):>7.2f} {med(x[0] for x in ideal.get(key, [(0, 0)])):>6.3f} "
          f"{med(x[1] for x in ideal.get(key, [(0, 0)])):>6.3f}")
for key in sorted(layouts):
    print(f"# layout {key[0]} {key[1]}: {layouts[key]}")
print()
print(f"# small tensors: separate / fused; medians over runs")
print(f"# {'transport':<9} {'fusion':<9} {'tensors':>7} {'bytes':>6} {'runs':>4} {'fused(us)':>10} {'separate(us)':>12} "
      f"{'sep/fused':>9}")
for key in sorted(small):
    rows = small[key]
    print(f"  {key[0]:<9} {key[1]:<9} {key[2]:>7} {key[3]:>6} {len(rows):>4} {med(r[0] for r in rows):>10.1f} "
          f"{med(r[1] for r in rows):>12.1f} {med(r[2] for r in rows):>9.2f}")
print()
print(f"# failures (exit status, wrong elements, copy rules): {len(failures)}")
for f in failures:
    print(f"#   {f}")
sys.exit(1 if failures else 0)
PY
