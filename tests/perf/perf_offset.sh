#!/usr/bin/env bash
# tests/perf/perf_offset.sh KOLO_PERF - kolo-perf --offset BYTES puts every
# buffer BYTES past a 4 KiB boundary and says so in its header; the
# collectives on such buffers, out of place and in place, come out right
# element by element (-c), over shared memory and over TCP.
set -u
BIN=${1:?usage: perf_offset.sh path/to/kolo-perf}
OUT=$(mktemp /tmp/kolo-perf-offset.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$OUT" | tail -20; exit 1; }
run() {  # run OFFSET COLL [ENV...]: a checked sweep of 3 ranks
  local off=$1 coll=$2
  shift 2
  env "$@" "$BIN" "$coll" -P 3 -b 8 -e 256K -f 8 -n 1 -w 1 -c 2 -d int32 --offset "$off" > "$OUT" 2>&1 ||
    fail "$coll --offset $off $*: exit status $?"
  grep -q "^# buffers $off bytes past a 4 KiB boundary (--offset)$" "$OUT" || fail "$coll --offset $off: no header line"
  grep -q "^# Out of bounds values : 0 OK$" "$OUT" || fail "$coll --offset $off $*: wrong elements"
}
for off in 16 4095; do
  for coll in all_reduce reduce_scatter all_gather broadcast; do run "$off" "$coll"; done
done
run 2048 all_reduce KOLO_NET_FORCE=1 KOLO_NET=socket
"$BIN" all_reduce --offset 4096 > "$OUT" 2>&1 && fail "--offset 4096 was taken"
grep -q "bad value '4096' for --offset: expected bytes past a 4 KiB boundary, 0..4095" "$OUT" || fail "no sentence"
echo "ok: --offset"
