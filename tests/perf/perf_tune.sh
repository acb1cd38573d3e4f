#!/usr/bin/env bash
# tests/perf/perf_tune.sh KOLO_PERF - kolo-perf tune --quick writes a
# tuning file with positive shm and socket constants, overrides and
# channels lines covering every size, which
# KOLO_TUNING_FILE loads at init (said at INFO, with each all-reduce
# choice once per size bucket); a file with a bad line is refused at init
# with FILE:LINE.  No timing is asserted: the figures only have to exist.
set -u
BIN=${1:?usage: perf_tune.sh path/to/kolo-perf}
WORK=$(mktemp -d /tmp/kolo-perf-tune.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -30; exit 1; }

"$BIN" tune --quick -P 2 -o "$WORK/t.tune" > "$WORK/out.txt" 2>&1 || fail "kolo-perf tune --quick"
head -1 "$WORK/t.tune" | grep -qx "kolo-tuning 1" || fail "no header line in $(cat "$WORK/t.tune")"
for l in shm socket; do
  grep -Eq "^link $l [0-9.e+-]+ [0-9.e+-]+$" "$WORK/t.tune" || fail "no $l line in $(cat "$WORK/t.tune")"
done
# the crossovers: overrides for 2 ranks that cover every size once, in order
awk '/^override/ {
       if ($2 != "allreduce" || $3 !~ /^(ring|rd|rabenseifner|direct)$/ || $6 != "ranks" || $7 != 2) bad = 1
       if ($4 != next_lo) bad = 1
       next_lo = $5 + 1; n++ }
     BEGIN { next_lo = 0 }
     END { exit !(n > 0 && !bad && next_lo == 4611686018427387904) }' "$WORK/t.tune" ||
  fail "the overrides do not cover 0 .. 2^62-1 once for 2 ranks: $(cat "$WORK/t.tune")"
# the channel search: channels lines for 2 ranks, 1, 2 or 4 channels, covering every size once
awk '/^channels/ {
       if ($2 != "allreduce" || $3 !~ /^(1|2|4)$/ || $6 != "ranks" || $7 != 2) bad = 1
       if ($4 != next_lo) bad = 1
       next_lo = $5 + 1; n++ }
     BEGIN { next_lo = 0 }
     END { exit !(n > 0 && !bad && next_lo == 4611686018427387904) }' "$WORK/t.tune" ||
  fail "the channels lines do not cover 0 .. 2^62-1 once for 2 ranks: $(cat "$WORK/t.tune")"
want=$(awk '/^override/ && $4 == 0 { print $3 }' "$WORK/t.tune")

KOLO_TUNING_FILE="$WORK/t.tune" KOLO_DEBUG=INFO "$BIN" -P 2 -b 8 -e 4K -f 8 -n 1 -w 0 all_reduce > "$WORK/out.txt" 2>&1 ||
  fail "kolo-perf all_reduce with the tuned file"
grep -q "KOLO_TUNING_FILE=$WORK/t.tune" "$WORK/out.txt" || fail "the file was not loaded"
n=$(grep -c "all-reduce of 8 B on 2 ranks" "$WORK/out.txt")
[ "$n" -eq 1 ] || fail "the 8 B choice was logged $n times, not once"
grep -q "all-reduce of 8 B on 2 ranks: $want (.*a KOLO_TUNING_FILE override), " "$WORK/out.txt" ||
  fail "8 B did not run the override's $want"
ch=$(awk '/^channels/ && $4 == 0 { print $3 }' "$WORK/t.tune")
grep -Eq "all-reduce of 8 B on 2 ranks: .*, $ch channels? \(a KOLO_TUNING_FILE channels line\)" "$WORK/out.txt" ||
  fail "8 B did not run on the channels line's $ch"

printf 'kolo-tuning 1\nlink shm 1 2\nlink shm 1 nope\n' > "$WORK/bad.tune"
KOLO_TUNING_FILE="$WORK/bad.tune" "$BIN" -P 2 -b 8 -e 8 -n 1 -w 0 all_reduce > "$WORK/out.txt" 2>&1 &&
  fail "a bad tuning file was accepted"
grep -q "bad.tune:3: beta" "$WORK/out.txt" || fail "no FILE:LINE sentence for the bad file"
echo "ok: $(grep -c '^link' "$WORK/t.tune") links measured"
