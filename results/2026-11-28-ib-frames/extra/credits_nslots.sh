BIN=/work/wt-ib/build/bin
kp() {
  name=$1; shift
  common="KOLO_ROOT=10.77.0.1:29517 KOLO_WORLD_SIZE=2 KOLO_SECRET=0123456789abcdef0123456789abcdef KOLO_TIMEOUT_MS=60000"
  env $common KOLO_RANK=0 KOLO_HOSTID=rxe-host-0 KOLO_IB_HCA==rxe0 KOLO_SOCKET_IFNAME==veth0 \
    timeout -k 5 120 "$BIN/kolo-perf" "$@" > /tmp/$name.r0 2>&1 & p0=$!
  env $common KOLO_RANK=1 KOLO_HOSTID=rxe-host-1 KOLO_IB_HCA==rxe1 KOLO_SOCKET_IFNAME==veth1 \
    timeout -k 5 120 "$BIN/kolo-perf" "$@" > /tmp/$name.r1 2>&1; r1=$?
  wait $p0; r0=$?
  echo "KR $name rc $r0/$r1 $(grep -E '^ +8 ' /tmp/$name.r0 | awk '{print $6}' | sort -n | awk '{a[NR]=$1} END {printf "n %d min %s p25 %s med %s p75 %s", NR, a[1], a[int(NR/4)+1], a[int(NR/2)+1], a[int(3*NR/4)+1]}')"
  grep -h "closed:" /tmp/$name.r0 | grep "received" | tail -1 | sed 's/.*per slice/  recv per slice/'
}
lat() {
  timeout 60 ib_write_lat -s 8 -n 2000 -d rxe0 -x 1 > /tmp/l.srv 2>&1 & sleep 1; timeout 60 ib_write_lat -s 8 -n 2000 -d rxe1 -x 1 10.77.0.1 > /tmp/l.cli 2>&1; wait
  echo "LAT min/typ/avg $(awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ {print $3, $5, $6; exit}' /tmp/l.cli)"
}
for i in 1 2; do
lat
KOLO_TEST_IB_HCA_RANK0==rxe0 KOLO_TEST_IB_HCA_RANK1==rxe1 KOLO_IB_BENCH=1 timeout 120 $BIN/test_net_ib --gtest_filter=IbBench.* 2>&1 | grep KOLO-IB
KOLO_DEBUG=INFO KOLO_NET=ib kp d$i all_reduce -b 8 -e 8 -n 1 -w 1 -N 1000 --inplace 0 -c 0
KOLO_DEBUG=INFO KOLO_NET=ib KOLO_NSLOTS=64 kp n64.$i all_reduce -b 8 -e 8 -n 1 -w 1 -N 1000 --inplace 0 -c 0
KOLO_DEBUG=INFO KOLO_NET=ib KOLO_NSLOTS=64 KOLO_SPIN=8 kp n64s8.$i all_reduce -b 8 -e 8 -n 1 -w 1 -N 1000 --inplace 0 -c 0
lat
done
