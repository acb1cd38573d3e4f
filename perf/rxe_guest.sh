# perf/rxe_guest.sh - kolo beside perftest inside the soft-RoCE guest
# (tests/rdma/vm.sh), run by perf/compare.sh ib (MODE=net) and ibframes
# (MODE=frames) in a work directory holding rxe.env, whose variables say what
# runs, REPEATS times: server / rank 0 on rxe0 / veth0 / 10.77.0.1, client /
# rank 1 on rxe1 / veth1 / 10.77.0.2 (docs/benchmarking.md lists the runs).
# Prints "KOLO-NET: <name> <value>" or "KOLO-IBF: <name> <size> <value>"
# lines; MB/s are 1e6 bytes.  POSIX sh (the guest's /bin/sh).  Exit status:
# kolo's steps that failed; perftest's failed runs are said, never counted.
[ -f ./rxe.env ] && . ./rxe.env
fail=0     # kolo's steps that failed: the exit status
ref_fail=0 # perftest's runs that failed: said, never the verdict
if [ "${MODE:-}" = net ]; then
  REPEATS=${REPEATS:-3} BW_N=${BW_N:-2000} LAT_N=${LAT_N:-1000} LAT_SIZE=${LAT_SIZE:-8} TAG=KOLO-NET
  if [ -z "${KOLO_PERF:-}" ] || [ ! -x "$KOLO_PERF" ]; then
    echo "rxe_guest: no kolo-perf (KOLO_PERF=${KOLO_PERF:-})"; exit 1
  fi
  if ! "$KOLO_PERF" net --list | grep -x ib > /dev/null; then
    echo "SKIP: kolo was built without libibverbs: kolo-perf net has no ib provider"; exit 0
  fi
elif [ "${MODE:-}" = frames ]; then
  BIN=${BIN:?rxe.env names no BIN} KOLO_PERF=$BIN/kolo-perf TAG=KOLO-IBF PT_TIMEOUT=180
  REPEATS=${REPEATS:-3} AR_N=${AR_N:-1000} SR_N=${SR_N:-10} LAT_N=${LAT_N:-2000} BW_N=${BW_N:-200}
  SIZES=${SIZES:-"8 512 32768 65536 262144 2097152"}
else
  echo "rxe_guest: rxe.env names no MODE (net or frames)"; exit 1
fi
say() { echo "$TAG: $*"; }

# The GIDs perftest needs (-x): the RoCEv2 IPv4 ones, as kolo finds them.
gid() { ibv_devinfo -v -d "$1" | sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:.*RoCE v2.*/\1/p' | head -n 1; }
G0=$(gid rxe0); G1=$(gid rxe1)
[ -n "$G0" ] || G0=1; [ -n "$G1" ] || G1=1 # index 1 with the CI kernel (tests/rdma/README.md)

# perftest NAME CMD ARGS...: server on rxe0, client on rxe1 (retried while
# the server is not listening yet); the first result row into /tmp/NAME.row.
perftest() {
  name=$1; shift
  timeout -k 2 "${PT_TIMEOUT:-120}" "$@" -d rxe0 -x "$G0" -p 18515 > /tmp/$name.srv 2>&1 & sp=$!
  for try in 1 2 3 4 5; do
    sleep 1
    timeout -k 2 "${PT_TIMEOUT:-120}" "$@" -d rxe1 -x "$G1" -p 18515 10.77.0.1 > /tmp/$name.cli 2>&1; cr=$?
    [ $cr = 0 ] || ! grep -q "Couldn't connect" /tmp/$name.cli || continue
    break
  done
  wait $sp; sr=$?
  echo "----- $* ($name): client rc $cr, server rc $sr"; cat /tmp/$name.cli
  awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ && NF >= 5 {print; exit}' /tmp/$name.cli > /tmp/$name.row
  [ $cr = 0 ] && [ $sr = 0 ] && [ -s /tmp/$name.row ]
}
# perftest_say NAME FIGURE COLUMN CMD ARGS...: the row's COLUMN as FIGURE
# (column 4, perftest's MB/sec, converted to 1e6 bytes per second).
perftest_say() {
  name=$1 fig=$2 col=$3; shift 3
  if perftest "$name" "$@"; then
    say "$fig $(awk -v c="$col" '{if (c == 4) printf "%.2f", $4 * 1.048576; else print $c}' /tmp/$name.row)"
  else ref_fail=$((ref_fail + 1)); fi
}

# kn NAME PERF ARGS...: PERF net -P ib ARGS (PERF: a kolo-perf), server on
# rxe0, client on rxe1; the first table row into /tmp/NAME.row.
kn() {
  name=$1 kn_perf=$2; shift 2
  KOLO_IB_HCA==rxe0 timeout -k 2 180 "$kn_perf" net -P ib --server -p 18600 > /tmp/$name.srv 2>&1 & sp=$!
  sleep 1
  KOLO_IB_HCA==rxe1 timeout -k 2 180 "$kn_perf" net -P ib "$@" 10.77.0.1:18600 > /tmp/$name.cli 2>&1; cr=$?
  wait $sp; sr=$?
  echo "----- $kn_perf net -P ib $* ($name): client rc $cr, server rc $sr"; cat /tmp/$name.cli
  [ $sr = 0 ] || { echo "(server)"; cat /tmp/$name.srv; }
  awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print; exit}' /tmp/$name.cli > /tmp/$name.row
  [ $cr = 0 ] && [ $sr = 0 ] && [ -s /tmp/$name.row ]
}

# ---- MODE=net ----------------------------------------------------------------------

# kolos TEST I ARGS...: kolo-perf (prefix kolo) and, with KOLO_PERF_BASE,
# the base one (prefix base) in turn first; TEST: bw or lat.
kolos() {
  t=$1 i=$2; shift 2
  order=kolo; [ -n "${KOLO_PERF_BASE:-}" ] && { order="kolo base"; [ $((i % 2)) = 0 ] && order="base kolo"; }
  for who in $order; do
    perf=$KOLO_PERF; [ $who = base ] && perf=$KOLO_PERF_BASE
    if kn $who$t.$i "$perf" "$@"; then
      if [ $t = bw ]; then say "${who}_ib_bw_MBps $(awk '{print $4}' /tmp/$who$t.$i.row)"
      else say "${who}_ib_lat_us $(awk '{print $7}' /tmp/$who$t.$i.row)"; fi
      say "kolo_ib_wrong $(awk '{print $9}' /tmp/$who$t.$i.row)"
    else fail=$((fail + 1)); fi
  done
}

net_repeat() {
  say "repeat $1" # the figures below belong to repeat i (perf/compare/net_summary.py pairs them by it)
  perftest_say bw.$1 ib_write_bw_MBps 4 ib_write_bw -s 65536 -n "$BW_N"
  kolos bw $1 --bw -s 65536 -n "$BW_N"
  perftest_say lat.$1 ib_write_lat_us 5 ib_write_lat -s "$LAT_SIZE" -n "$LAT_N"
  kolos lat $1 --lat -s "$LAT_SIZE" -n "$LAT_N"
  # A second reference: SEND into posted receives, each side learning of
  # the message from a completion, as kolo's receiver does (ib_write_lat
  # polls the last byte of its buffer instead).
  perftest_say slat.$1 ib_send_lat_us 5 ib_send_lat -s "$LAT_SIZE" -n "$LAT_N"
}

# ---- MODE=frames -------------------------------------------------------------------

# kp NAME PERF ARGS...: PERF (a kolo-perf) ARGS as 2 ranks on 2 "hosts" over ib.
kp() {
  name=$1 kp_perf=$2; shift 2
  common="KOLO_NET=ib KOLO_ROOT=10.77.0.1:29517 KOLO_WORLD_SIZE=2 KOLO_SECRET=0123456789abcdef0123456789abcdef KOLO_TIMEOUT_MS=60000"
  env $common KOLO_RANK=0 KOLO_HOSTID=rxe-host-0 KOLO_IB_HCA==rxe0 KOLO_SOCKET_IFNAME==veth0 \
    timeout -k 5 300 "$kp_perf" "$@" > /tmp/$name.r0 2>&1 & p0=$!
  env $common KOLO_RANK=1 KOLO_HOSTID=rxe-host-1 KOLO_IB_HCA==rxe1 KOLO_SOCKET_IFNAME==veth1 \
    timeout -k 5 300 "$kp_perf" "$@" > /tmp/$name.r1 2>&1; r1=$?
  wait $p0; r0=$?
  echo "----- kolo-perf $* ($name): rank 0 rc $r0, rank 1 rc $r1"; cat /tmp/$name.r0
  [ $r1 = 0 ] || { echo "(rank 1)"; cat /tmp/$name.r1; }
  [ $r0 = 0 ] && [ $r1 = 0 ]
}

# Rows of a kolo-perf table: "size time_oop algbw busbw" per size.
rows() { awk '!/^#/ && $1 ~ /^[0-9]+$/ && NF >= 8 {print $1, $6, $7, $8}' "$1"; }
# The median of a column of numbers on stdin.
median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "?"}'; }

# -- 8 B latency: perftest, the provider alone, the all-reduce, perftest again
frames_latency() {
  i=$1
  perftest_say lat8a.$i "ib_write_lat_us 8" 5 ib_write_lat -s 8 -n "$LAT_N"
  KOLO_TEST_IB_HCA_RANK0==rxe0 KOLO_TEST_IB_HCA_RANK1==rxe1 KOLO_IB_BENCH=1 KOLO_IB_BENCH_ITERS="$LAT_N" \
    timeout -k 5 180 "$BIN/test_net_ib" --gtest_filter=IbBench.Latency > /tmp/bench.$i 2>&1 || fail=$((fail + 1))
  grep "KOLO-IB-BENCH" /tmp/bench.$i
  for m in pingpong exchange; do
    say "kolo_ib_${m}_p50_us 8 $(sed -n "s/^KOLO-IB-BENCH: $m .*p50 \([0-9.]*\) us.*/\1/p" /tmp/bench.$i)"
  done
  # one call per row, AR_N rows: the median call, as perftest's typical
  if kp ar.$i "$KOLO_PERF" all_reduce -b 8 -e 8 -n 1 -w 1 -N "$AR_N" -c 0 --inplace 0; then
    say "kolo_allreduce_p50_us 8 $(rows /tmp/ar.$i.r0 | awk '{print $2}' | median)"
  else fail=$((fail + 1)); fi
  if kp arm.$i "$KOLO_PERF" all_reduce -b 8 -e 8 -n "$AR_N" -w 100 -c 1 --inplace 0; then
    say "kolo_allreduce_mean_us 8 $(rows /tmp/arm.$i.r0 | awk '{print $2}')"
  else fail=$((fail + 1)); fi
  # the same with an older kolo (BASE_BIN): before and after in one boot
  if [ -n "${BASE_BIN:-}" ]; then
    if kp base.$i "$BASE_BIN/kolo-perf" all_reduce -b 8 -e 8 -n 1 -w 1 -N "$AR_N" -c 0 --inplace 0; then
      say "base_allreduce_p50_us 8 $(rows /tmp/base.$i.r0 | awk '{print $2}' | median)"
    else fail=$((fail + 1)); fi
  fi
  perftest_say lat8b.$i "ib_write_lat_us 8" 5 ib_write_lat -s 8 -n "$LAT_N"
}

# -- bandwidth: perftest one way and both ways, kolo's send/recv (both ways
#    at once, 2 ranks), the provider alone one way
frames_bandwidth() {
  i=$1
  for s in $SIZES; do
    n=$BW_N; [ "$s" -ge 1048576 ] && n=20
    perftest_say bw.$s.$i "ib_write_bw_MBps $s" 4 ib_write_bw -s "$s" -n "$n"
    perftest_say bwb.$s.$i "ib_write_bw_bidir_MBps $s" 4 ib_write_bw -b -s "$s" -n "$n"
    [ "$s" = 65536 ] || continue # the provider one way right after perftest's
    if kn nbw.$i "$KOLO_PERF" --bw -s 65536 -n "$((BW_N * 5))"; then say "kolo_net_bw_MBps 65536 $(awk '{print $4}' /tmp/nbw.$i.row)"
    else fail=$((fail + 1)); fi
    KOLO_TEST_IB_HCA_RANK0==rxe1 KOLO_TEST_IB_HCA_RANK1==rxe0 KOLO_IB_BENCH=1 KOLO_IB_BENCH_ITERS="$((BW_N * 10))" \
      timeout -k 5 180 "$BIN/test_net_ib" --gtest_filter=IbBench.Bandwidth > /tmp/bbw.$i 2>&1 || fail=$((fail + 1))
    say "kolo_ib_bw_MBps 65536 $(sed -n 's/^KOLO-IB-BENCH: bandwidth .*: \([0-9.]*\) MB\/s.*/\1/p' /tmp/bbw.$i)"
    perftest_say bw2.$s.$i "ib_write_bw_MBps $s" 4 ib_write_bw -s "$s" -n "$((BW_N * 5))"
  done
  if kp sr.$i "$KOLO_PERF" sendrecv -b 8 -e 4M -f 8 -n "$SR_N" -w 2 -c 1 --inplace 0; then
    rows /tmp/sr.$i.r0 | while read -r sz t a b; do
      say "kolo_sendrecv_us $sz $t"
      say "kolo_sendrecv_MBps $sz $(awk -v s="$sz" -v t="$t" 'BEGIN{if (t > 0) printf "%.3f", s / t}')"
    done
  else fail=$((fail + 1)); fi
  if kn nlat.$i "$KOLO_PERF" --lat -s 8 -n "$LAT_N"; then say "kolo_net_lat_p50_us 8 $(awk '{print $7}' /tmp/nlat.$i.row)"
  else fail=$((fail + 1)); fi
}

i=1
while [ $i -le "$REPEATS" ]; do
  if [ "$MODE" = net ]; then net_repeat $i
  else say "repeat $i"; frames_latency $i; frames_bandwidth $i; fi
  i=$((i + 1))
done
say "perftest_failed_runs $ref_fail"
[ $fail -le 100 ] || fail=100 # 124-126 mean other things to vm.sh
exit $fail
