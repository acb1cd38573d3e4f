#!/usr/bin/env bash
# tests/bootstrap_scale.sh KOLO_PERF [N] - N ranks (default 256) as
# processes on this host: `kolo-perf all_reduce -P N` inits them and runs one
# checked 8-byte all-reduce (out of place and in place).  It must succeed
# with every element right, within a bound (60 s: measured 1.3 s for 256
# on a 2-core VM, where the full-mesh bootstrap of wire version 4 took
# 2.3-3 s and failed half of its runs); after init no rank may hold more
# bootstrap connections than its 2 ceil(log2 N) allgather partners plus 2,
# and the root must send N answers of 59 bytes, not N tables.
set -u
BIN=${1:?usage: bootstrap_scale.sh path/to/kolo-perf [nranks]}
N=${2:-256}
BOUND_S=${BOUND_S:-60}
OUT=$(mktemp /tmp/kolo-boot-scale.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; grep -v " INFO " "$OUT" | tail -20 | sed 's/^/    /'; exit 1; }

start=$(date +%s%N)
KOLO_DEBUG=INFO KOLO_TIMEOUT_MS=60000 timeout -k 5 "$BOUND_S" "$BIN" all_reduce -P "$N" -b 8 -e 8 -n 1 -w 0 -c 1 \
  >"$OUT" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc = 124 ] && fail "$N ranks did not finish within $BOUND_S s"
[ $rc = 0 ] || fail "kolo-perf -P $N exited with status $rc after $ms ms"
line=$(grep -E '^ +8 +2 +float +sum' "$OUT") || fail "no result line"
wrong=$(echo "$line" | awk '{print $9 + $13}')
[ "$wrong" = 0 ] || fail "wrong elements: $line"

ready=$(grep -o 'communicator ready; [0-9]* bootstrap' "$OUT" | awk '{print $3}' | sort -n)
count=$(echo "$ready" | grep -c .)
[ "$count" = "$N" ] || fail "$count of $N ranks said their communicator was ready"
log2=0
while [ $((1 << log2)) -lt "$N" ]; do log2=$((log2 + 1)); done
most=$(echo "$ready" | tail -1)
median=$(echo "$ready" | sed -n "$(((count + 1) / 2))p")
[ "$most" -le $((2 * log2 + 2)) ] || fail "a rank holds $most bootstrap connections after init (bound $((2 * log2 + 2)))"
bytes=$(grep -o 'answered [0-9]* connection(s) with [0-9]* bytes' "$OUT" | awk '{print $5}')
[ -n "$bytes" ] || fail "the root did not say what it sent"
[ "$bytes" -le $((N * 64)) ] || fail "the root sent $bytes bytes for $N ranks"
echo "ok: $N ranks: init + checked 8-byte all-reduce in $ms ms; bootstrap connections per rank after init:" \
  "median $median, most $most (2 ceil(log2 N) = $((2 * log2))); the root sent $bytes bytes"
