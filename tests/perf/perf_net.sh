#!/usr/bin/env bash
# tests/perf/perf_net.sh KOLO_PERF - kolo-perf net over the socket provider,
# both sides on this host: one way and both ways at once, every byte of the
# warm-up checked and the timed messages sample-checked (#wrong 0).  The
# both-ways rounds end with fewer messages than half a window since the
# last credit, which each side must still credit once all the peer's
# messages are in, or both wait for their last credits until the timeout.
# A server address with a port out of range is refused with a sentence.
set -u
BIN=${1:?usage: perf_net.sh path/to/kolo-perf}
WORK=$(mktemp -d /tmp/kolo-perf-net.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -20; exit 1; }

# One row of sizes per run: "bytes ... #wrong" with #wrong 0.
rows_ok() {
  local want=$1
  local got
  got=$(awk '!/^#/ && NF >= 9 && $1 ~ /^[0-9]+$/ && $NF == 0' "$WORK/out.txt" | wc -l)
  [ "$got" -eq "$want" ]
}

for iters in 61 77; do
  timeout 120 "$BIN" net -P socket --bidir -b 64K -e 1M -f 4 -n "$iters" -W 16 --timeout 10000 \
    > "$WORK/out.txt" 2>&1 || fail "kolo-perf net --bidir, $iters messages per size"
  rows_ok 3 || fail "kolo-perf net --bidir: not 3 checked rows with #wrong 0"
done
timeout 120 "$BIN" net -P socket --bw -b 64K -e 1M -f 4 -n 61 -W 16 --timeout 10000 > "$WORK/out.txt" 2>&1 ||
  fail "kolo-perf net --bw"
rows_ok 3 || fail "kolo-perf net --bw: not 3 checked rows with #wrong 0"
"$BIN" net -P socket 127.0.0.1:70000 > "$WORK/out.txt" 2>&1 && fail "port 70000 was taken"
grep -q "the port '70000' is not a whole number from 1 to 65535" "$WORK/out.txt" || fail "port 70000: no sentence"
echo "ok: kolo-perf net over sockets, one way and both ways, every row checked"
