# perf/run_net_rxe_guest.sh - the ib half of perf/run_net.sh, run inside the
# soft-RoCE guest (tests/rdma/vm.sh) in a work directory holding net.env
# (KOLO_PERF: the host-built kolo-perf; REPEATS, BW_N, LAT_N, LAT_SIZE;
# KOLO_PERF_BASE: optionally a second kolo-perf, run beside the first in
# every repeat, the two in turn first, so before/after share the boot).
# REPEATS times, on the same devices (server rxe0 / 10.77.0.1, client rxe1):
#   ib_write_bw -s 65536 -n BW_N       kolo-perf net -P ib --bw -s 65536 -n BW_N
#   ib_write_lat -s LAT_SIZE -n LAT_N  kolo-perf net -P ib --lat -s LAT_SIZE -n LAT_N
#   ib_send_lat -s LAT_SIZE -n LAT_N   (completion-based like kolo: a reference)
# Prints "KOLO-NET: <name> <value>" lines for run_net.sh (MB/s as 1e6 bytes:
# perftest's MB/sec, 2^20 bytes, is converted here) and the full outputs.
# POSIX sh (the guest runs it with /bin/sh).  Exit status: failed steps.
[ -f ./net.env ] && . ./net.env
REPEATS=${REPEATS:-3} BW_N=${BW_N:-2000} LAT_N=${LAT_N:-1000} LAT_SIZE=${LAT_SIZE:-8}
fail=0
say() { echo "KOLO-NET: $*"; }
if [ -z "${KOLO_PERF:-}" ] || [ ! -x "$KOLO_PERF" ]; then
  echo "run_net_rxe_guest: no kolo-perf (KOLO_PERF=${KOLO_PERF:-})"; exit 1
fi
if ! "$KOLO_PERF" net --list | grep -x ib > /dev/null; then
  echo "SKIP: kolo was built without libibverbs: kolo-perf net has no ib provider"; exit 0
fi
. "$(dirname "$0")/rxe_perftest.sh" # gid, G0, G1, perftest

# kolo NAME ARGS...: kolo-perf net -P ib, server on rxe0, client on rxe1
# ($PERF: KOLO_PERF or KOLO_PERF_BASE).
kolo() {
  name=$1; shift
  KOLO_IB_HCA==rxe0 timeout -k 2 120 "$PERF" net -P ib --server -p 18600 > /tmp/$name.srv 2>&1 & sp=$!
  KOLO_IB_HCA==rxe1 timeout -k 2 120 "$PERF" net -P ib "$@" 10.77.0.1:18600 > /tmp/$name.cli 2>&1; cr=$?
  wait $sp; sr=$?
  echo "----- $PERF net -P ib $* ($name): client rc $cr, server rc $sr"; cat /tmp/$name.cli
  [ $sr = 0 ] || { echo "(server)"; cat /tmp/$name.srv; }
  awk '!/^#/ && NF >= 9 {print; exit}' /tmp/$name.cli > /tmp/$name.row
  [ $cr = 0 ] && [ $sr = 0 ] && [ -s /tmp/$name.row ]
}

# kolos TEST I ARGS...: kolo-perf (prefix kolo) and, with KOLO_PERF_BASE,
# the base one (prefix base) in turn first; TEST: bw or lat.
kolos() {
  t=$1 i=$2; shift 2
  order=kolo; [ -n "${KOLO_PERF_BASE:-}" ] && { order="kolo base"; [ $((i % 2)) = 0 ] && order="base kolo"; }
  for who in $order; do
    PERF=$KOLO_PERF; [ $who = base ] && PERF=$KOLO_PERF_BASE
    if kolo $who$t.$i "$@"; then
      if [ $t = bw ]; then say "${who}_ib_bw_MBps $(awk '{print $4}' /tmp/$who$t.$i.row)"
      else say "${who}_ib_lat_us $(awk '{print $7}' /tmp/$who$t.$i.row)"; fi
      say "kolo_ib_wrong $(awk '{print $9}' /tmp/$who$t.$i.row)"
    else fail=$((fail + 1)); fi
  done
}

i=1
while [ $i -le "$REPEATS" ]; do
  say "repeat $i" # the figures below belong to repeat i (run_net.sh pairs them by it)
  if perftest bw.$i ib_write_bw -s 65536 -n "$BW_N"; then
    say "ib_write_bw_MBps $(awk '{printf "%.2f", $4 * 1.048576}' /tmp/bw.$i.row)"
  else fail=$((fail + 1)); fi
  kolos bw $i --bw -s 65536 -n "$BW_N"
  if perftest lat.$i ib_write_lat -s "$LAT_SIZE" -n "$LAT_N"; then
    say "ib_write_lat_us $(awk '{print $5}' /tmp/lat.$i.row)"
  else fail=$((fail + 1)); fi
  kolos lat $i --lat -s "$LAT_SIZE" -n "$LAT_N"
  # A second reference: SEND into posted receives, each side learning of
  # the message from a completion, as kolo's receiver does (ib_write_lat
  # polls the last byte of its buffer instead).
  if perftest slat.$i ib_send_lat -s "$LAT_SIZE" -n "$LAT_N"; then
    say "ib_send_lat_us $(awk '{print $5}' /tmp/slat.$i.row)"
  else fail=$((fail + 1)); fi
  i=$((i + 1))
done
[ $fail -le 100 ] || fail=100 # 124-126 mean other things to vm.sh
exit $fail
