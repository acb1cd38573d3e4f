# perf/run_ib_frames_guest.sh - kolo's ib provider beside perftest, inside the
# soft-RoCE guest (tests/rdma/vm.sh), in a work directory holding ib.env
# (BIN: the host's build/bin; REPEATS; AR_N; SR_N; LAT_N; BW_N; SIZES;
# BASE_BIN: optionally an older build's bin, whose all-reduce runs too).
# REPEATS times, all on the same devices in this one boot (server / rank 0
# on rxe0 / veth0 / 10.77.0.1, client / rank 1 on rxe1 / veth1 / 10.77.0.2):
#   ib_write_lat -s 8                         the half round trip (typical: the median)
#   test_net_ib IbBench.Latency               the provider alone, no engine: 8 B
#                                             ping-pong and exchange (medians)
#   kolo-perf all_reduce -b 8 -e 8, 2 ranks as 2 hosts (KOLO_NET=ib): one
#                                             call per row (the median), and the mean
#   ib_write_lat -s 8                         again, after
#   ib_write_bw -s S, ib_write_bw -b -s S     for S in SIZES (one way, both ways)
#   kolo-perf sendrecv -b 8 -e 4M -f 8, 2 ranks as 2 hosts (both ways at once)
#   kolo-perf net -P ib --bw -s 65536 and test_net_ib IbBench.Bandwidth (the
#     provider alone, both polling), between two ib_write_bw -s 65536
#   kolo-perf net -P ib --lat -s 8
# Prints "KOLO-IBF: <name> <size> <value>" lines (us; MB/s as 1e6 bytes,
# perftest's MB/sec of 2^20 bytes converted) and every output in full.
# POSIX sh (the guest runs it with /bin/sh).  Exit status: failed steps.
[ -f ./ib.env ] && . ./ib.env
BIN=${BIN:?ib.env names no BIN}
REPEATS=${REPEATS:-3} AR_N=${AR_N:-1000} SR_N=${SR_N:-10} LAT_N=${LAT_N:-2000} BW_N=${BW_N:-200}
SIZES=${SIZES:-"8 512 32768 65536 262144 2097152"}
fail=0
say() { echo "KOLO-IBF: $*"; }
PT_TIMEOUT=180
. "$(dirname "$0")/rxe_perftest.sh" # gid, G0, G1, perftest

# kp NAME ARGS...: kolo-perf ARGS as 2 ranks on 2 "hosts" over ib ($PERF:
# this build's, or BASE_BIN's).
kp() {
  name=$1; shift
  PERF=${PERF:-$BIN/kolo-perf}
  common="KOLO_NET=ib KOLO_ROOT=10.77.0.1:29517 KOLO_WORLD_SIZE=2 KOLO_SECRET=0123456789abcdef0123456789abcdef KOLO_TIMEOUT_MS=60000"
  env $common KOLO_RANK=0 KOLO_HOSTID=rxe-host-0 KOLO_IB_HCA==rxe0 KOLO_SOCKET_IFNAME==veth0 \
    timeout -k 5 300 "$PERF" "$@" > /tmp/$name.r0 2>&1 & p0=$!
  env $common KOLO_RANK=1 KOLO_HOSTID=rxe-host-1 KOLO_IB_HCA==rxe1 KOLO_SOCKET_IFNAME==veth1 \
    timeout -k 5 300 "$PERF" "$@" > /tmp/$name.r1 2>&1; r1=$?
  wait $p0; r0=$?
  echo "----- kolo-perf $* ($name): rank 0 rc $r0, rank 1 rc $r1"; cat /tmp/$name.r0
  [ $r1 = 0 ] || { echo "(rank 1)"; cat /tmp/$name.r1; }
  [ $r0 = 0 ] && [ $r1 = 0 ]
}

# kn NAME ARGS...: kolo-perf net -P ib, server on rxe0, client on rxe1.
kn() {
  name=$1; shift
  KOLO_IB_HCA==rxe0 timeout -k 2 180 "$BIN/kolo-perf" net -P ib --server -p 18600 > /tmp/$name.srv 2>&1 & sp=$!
  sleep 1
  KOLO_IB_HCA==rxe1 timeout -k 2 180 "$BIN/kolo-perf" net -P ib "$@" 10.77.0.1:18600 > /tmp/$name.cli 2>&1; cr=$?
  wait $sp; sr=$?
  echo "----- kolo-perf net -P ib $* ($name): client rc $cr, server rc $sr"; cat /tmp/$name.cli
  [ $sr = 0 ] || { echo "(server)"; cat /tmp/$name.srv; }
  awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print; exit}' /tmp/$name.cli > /tmp/$name.row
  [ $cr = 0 ] && [ $sr = 0 ] && [ -s /tmp/$name.row ]
}

# Rows of a kolo-perf table: "size time_oop algbw busbw" per size.
rows() { awk '!/^#/ && $1 ~ /^[0-9]+$/ && NF >= 8 {print $1, $6, $7, $8}' "$1"; }
# The median of a column of numbers on stdin.
median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "?"}'; }

i=1
while [ $i -le "$REPEATS" ]; do
  say "repeat $i"
  # -- 8 B latency: perftest, the provider alone, the all-reduce, perftest again
  for k in a b; do
    if perftest lat8$k.$i ib_write_lat -s 8 -n "$LAT_N"; then
      say "ib_write_lat_us 8 $(awk '{print $5}' /tmp/lat8$k.$i.row)"
    else fail=$((fail + 1)); fi
    [ $k = b ] && break
    KOLO_TEST_IB_HCA_RANK0==rxe0 KOLO_TEST_IB_HCA_RANK1==rxe1 KOLO_IB_BENCH=1 KOLO_IB_BENCH_ITERS="$LAT_N" \
      timeout -k 5 180 "$BIN/test_net_ib" --gtest_filter=IbBench.Latency > /tmp/bench.$i 2>&1 || fail=$((fail + 1))
    grep "KOLO-IB-BENCH" /tmp/bench.$i
    for m in pingpong exchange; do
      say "kolo_ib_${m}_p50_us 8 $(sed -n "s/^KOLO-IB-BENCH: $m .*p50 \([0-9.]*\) us.*/\1/p" /tmp/bench.$i)"
    done
    # one call per row, AR_N rows: the median call, as perftest's typical
    if kp ar.$i all_reduce -b 8 -e 8 -n 1 -w 1 -N "$AR_N" -c 0 --inplace 0; then
      say "kolo_allreduce_p50_us 8 $(rows /tmp/ar.$i.r0 | awk '{print $2}' | median)"
    else fail=$((fail + 1)); fi
    if kp arm.$i all_reduce -b 8 -e 8 -n "$AR_N" -w 100 -c 1 --inplace 0; then
      say "kolo_allreduce_mean_us 8 $(rows /tmp/arm.$i.r0 | awk '{print $2}')"
    else fail=$((fail + 1)); fi
    # the same with an older kolo (BASE_BIN): before and after in one boot
    if [ -n "${BASE_BIN:-}" ]; then
      if PERF=$BASE_BIN/kolo-perf kp base.$i all_reduce -b 8 -e 8 -n 1 -w 1 -N "$AR_N" -c 0 --inplace 0; then
        say "base_allreduce_p50_us 8 $(rows /tmp/base.$i.r0 | awk '{print $2}' | median)"
      else fail=$((fail + 1)); fi
    fi
  done
  # -- bandwidth: perftest one way and both ways, kolo's send/recv (both
  #    ways at once, 2 ranks), the provider alone one way
  for s in $SIZES; do
    n=$BW_N; [ "$s" -ge 1048576 ] && n=20
    if perftest bw.$s.$i ib_write_bw -s "$s" -n "$n"; then
      say "ib_write_bw_MBps $s $(awk '{printf "%.2f", $4 * 1.048576}' /tmp/bw.$s.$i.row)"
    else fail=$((fail + 1)); fi
    if perftest bwb.$s.$i ib_write_bw -b -s "$s" -n "$n"; then
      say "ib_write_bw_bidir_MBps $s $(awk '{printf "%.2f", $4 * 1.048576}' /tmp/bwb.$s.$i.row)"
    else fail=$((fail + 1)); fi
    [ "$s" = 65536 ] || continue # the provider one way right after perftest's
    if kn nbw.$i --bw -s 65536 -n "$((BW_N * 5))"; then say "kolo_net_bw_MBps 65536 $(awk '{print $4}' /tmp/nbw.$i.row)"
    else fail=$((fail + 1)); fi
    KOLO_TEST_IB_HCA_RANK0==rxe1 KOLO_TEST_IB_HCA_RANK1==rxe0 KOLO_IB_BENCH=1 KOLO_IB_BENCH_ITERS="$((BW_N * 10))" \
      timeout -k 5 180 "$BIN/test_net_ib" --gtest_filter=IbBench.Bandwidth > /tmp/bbw.$i 2>&1 || fail=$((fail + 1))
    say "kolo_ib_bw_MBps 65536 $(sed -n 's/^KOLO-IB-BENCH: bandwidth .*: \([0-9.]*\) MB\/s.*/\1/p' /tmp/bbw.$i)"
    if perftest bw2.$s.$i ib_write_bw -s "$s" -n "$((BW_N * 5))"; then
      say "ib_write_bw_MBps $s $(awk '{printf "%.2f", $4 * 1.048576}' /tmp/bw2.$s.$i.row)"
    else fail=$((fail + 1)); fi
  done
  if kp sr.$i sendrecv -b 8 -e 4M -f 8 -n "$SR_N" -w 2 -c 1 --inplace 0; then
    rows /tmp/sr.$i.r0 | while read -r sz t a b; do
      say "kolo_sendrecv_us $sz $t"
      say "kolo_sendrecv_MBps $sz $(awk -v s="$sz" -v t="$t" 'BEGIN{if (t > 0) printf "%.3f", s / t}')"
    done
  else fail=$((fail + 1)); fi
  if kn nlat.$i --lat -s 8 -n "$LAT_N"; then say "kolo_net_lat_p50_us 8 $(awk '{print $7}' /tmp/nlat.$i.row)"
  else fail=$((fail + 1)); fi
  i=$((i + 1))
done
[ $fail -le 100 ] || fail=100
exit $fail
