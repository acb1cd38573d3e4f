#!/usr/bin/env bash
# tests/fault/perf_stopped_rank.sh KOLO_PERF - kolo-perf's own launcher with
# a stopped rank: `kolo-perf all_reduce -P 3` runs a long sweep with
# KOLO_TIMEOUT_MS=2000; once its ranks run, one child gets SIGSTOP (never
# SIGCONT).  The other ranks fail with their named error; kolo-perf must
# then end the job itself within a bound (timeout + its grace + slack: 40 s
# on a loaded machine), exit non-zero, print the error, and leave no child
# process and no /dev/shm segment of its ranks.
set -u
BIN=${1:?usage: perf_stopped_rank.sh path/to/kolo-perf}
OUT=$(mktemp /tmp/kolo-perf-stop.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$OUT" | tail -20; exit 1; }

KOLO_TIMEOUT_MS=2000 "$BIN" all_reduce -P 3 -b 4M -e 4M -n 1000000 -w 1 >"$OUT" 2>&1 &
perf=$!
kids=""
for _ in $(seq 100); do # the ranks: up to 10 s to start
  kids=$(pgrep -P "$perf" | tr '\n' ' ')
  [ "$(echo $kids | wc -w)" -ge 3 ] && break
  sleep 0.1
done
[ "$(echo $kids | wc -w)" -ge 3 ] || { kill -9 $perf; fail "kolo-perf did not start 3 ranks"; }
sleep 3 # into the sweep
victim=$(echo $kids | awk '{print $2}')
start=$(date +%s%N)
kill -STOP "$victim" || fail "cannot stop rank process $victim"
for _ in $(seq 400); do kill -0 $perf 2>/dev/null || break; sleep 0.1; done
if kill -0 $perf 2>/dev/null; then
  kill -9 $perf $kids 2>/dev/null
  wait $perf
  fail "kolo-perf still runs 40 s after one of its ranks was stopped"
fi
wait $perf
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc != 0 ] || fail "kolo-perf exited 0 with a stopped rank"
grep -q "rank" "$OUT" || fail "kolo-perf printed no error naming a rank"
for k in $kids; do
  kill -0 "$k" 2>/dev/null && fail "rank process $k is still there"
  ls /dev/shm 2>/dev/null | grep -q "^kolo-[0-9a-f]*-$k-" && fail "a /dev/shm segment of process $k is left"
done
echo "ok: kolo-perf -P 3 with process $victim stopped ended in $ms ms with status $rc; its words:"
grep -E "rank|kolo-perf:" "$OUT" | head -6 | sed 's/^/    /'
