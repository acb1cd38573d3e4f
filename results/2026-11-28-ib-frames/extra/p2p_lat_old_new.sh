kn() {
  P=$1; shift
  KOLO_IB_HCA==rxe0 timeout -k 2 120 "$P" net -P ib --server -p 18600 > /tmp/kn.srv 2>&1 & sp=$!
  sleep 1
  KOLO_IB_HCA==rxe1 timeout -k 2 120 "$P" net -P ib "$@" 10.77.0.1:18600 > /tmp/kn.cli 2>&1
  wait $sp
  echo "KN $P $* : $(awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $7, $8; exit}' /tmp/kn.cli)"
}
lat() {
  timeout 60 ib_write_lat -s 8 -n 3000 -d rxe0 -x 1 > /tmp/l.srv 2>&1 & sleep 1; timeout 60 ib_write_lat -s 8 -n 3000 -d rxe1 -x 1 10.77.0.1 > /tmp/l.cli 2>&1; wait
  echo "LAT min/typ/avg $(awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ {print $3, $5, $6; exit}' /tmp/l.cli)"
}
for i in 1 2 3 4 5; do
lat
KOLO_TEST_IB_HCA_RANK0==rxe1 KOLO_TEST_IB_HCA_RANK1==rxe0 KOLO_IB_BENCH=1 KOLO_IB_BENCH_ITERS=3000 timeout 120 /work/wt-ib/build/bin/test_net_ib --gtest_filter=IbBench.Latency 2>&1 | grep "KOLO-IB-BENCH: ping"
kn /tmp/kolo-old/build/bin/kolo-perf --lat -s 8 -n 3000 --busy
kn /work/wt-ib/build/bin/kolo-perf --lat -s 8 -n 3000 --busy
done
lat
