#!/usr/bin/env bash
# tests/perf/perf_plot.sh KOLO_PERF PYTHON - kolo-perf plot (perf/plot.py) draws two small runs
# into a PNG (PNG signature, nonzero size), and refuses with a sentence a
# missing file, a file that is not JSON, a JSON that is not kolo-perf's, an
# empty run, and a machine without gnuplot.  Exit 77 (skipped, said why)
# only where gnuplot is absent and cannot be installed.
set -u
BIN=$(realpath "${1:?usage: perf_plot.sh path/to/kolo-perf python3}")
PY=${2:?usage: perf_plot.sh path/to/kolo-perf python3}
WORK=$(mktemp -d /tmp/kolo-perf-plot.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [ -f "$WORK/err.txt" ] && sed 's/^/    /' "$WORK/err.txt"; exit 1; }

if ! command -v gnuplot > /dev/null; then
  [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox \
    > "$WORK/apt.txt" 2>&1
  command -v gnuplot > /dev/null || { echo "SKIP: gnuplot is absent and could not be installed (gnuplot-nox)"; exit 77; }
fi

# Two small runs: threads with a label and a ceiling; processes with -N 2.
"$BIN" all_reduce -t 2 -b 8 -e 64K -f 8 -n 2 -w 1 --json "$WORK/a.json" --label "threads" --ceiling 2.5 \
  > /dev/null 2> "$WORK/err.txt" || fail "kolo-perf (threads)"
"$BIN" all_gather -P 2 -b 8 -e 64K -f 8 -n 2 -w 1 -N 2 --json "$WORK/b.json" > /dev/null 2> "$WORK/err.txt" ||
  fail "kolo-perf (processes)"
"$BIN" plot "$WORK/a.json" "$WORK/b.json" -o "$WORK/out.png" --placement both --script "$WORK/out.gp" \
  > "$WORK/plot.txt" 2> "$WORK/err.txt" || fail "kolo-perf plot of two runs"
[ -s "$WORK/out.png" ] || fail "no PNG, or an empty one"
[ "$(head -c 8 "$WORK/out.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "out.png has no PNG signature"
grep -q "ceiling of threads (out of place): 2.50 GB/s" "$WORK/out.gp" || fail "the script draws no ceiling line"
grep -q "b.json (in place)" "$WORK/out.gp" || fail "a run without a label is not named by its file"
grep -q "4 runs of 2 files" "$WORK/plot.txt" || fail "plot did not say what it drew"

# refuses NAME FILE WORDS: kolo-perf plot FILE exits 2 and says WORDS.
refuses() {
  local name=$1 file=$2 words=$3
  shift 3
  "$@" "$BIN" plot "$file" -o "$WORK/x.png" > /dev/null 2> "$WORK/err.txt" && fail "$name: plot exited 0"
  grep -q "$words" "$WORK/err.txt" || fail "$name: the error does not say '$words'"
}
refuses "a missing file" "$WORK/none.json" "none.json: No such file or directory"
head -c 200 "$WORK/a.json" > "$WORK/cut.json"
refuses "a cut file" "$WORK/cut.json" "cut.json: not valid JSON"
echo '{"results": []}' > "$WORK/other.json"
refuses "another tool's JSON" "$WORK/other.json" "not a kolo-perf --json file"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["results"]=[]; json.dump(d, open(sys.argv[2], "w"))' \
  "$WORK/a.json" "$WORK/empty.json"
refuses "an empty run" "$WORK/empty.json" "no results"
mkdir -p "$WORK/nopath" # python3 only: no gnuplot
ln -s "$("$PY" -c "import sys; print(sys.executable)")" "$WORK/nopath/python3"
refuses "no gnuplot" "$WORK/a.json" "gnuplot is not installed" env PATH="$WORK/nopath"
echo "ok: kolo-perf plot: 2 runs drawn ($(stat -c %s "$WORK/out.png") B PNG); 5 bad inputs refused with a sentence"
