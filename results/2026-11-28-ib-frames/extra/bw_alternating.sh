BIN=/work/wt-ib/build/bin
kn() {
  KOLO_IB_HCA==rxe0 timeout -k 2 120 "$BIN/kolo-perf" net -P ib --server -p 18600 > /tmp/kn.srv 2>&1 & sp=$!
  sleep 1
  KOLO_IB_HCA==rxe1 timeout -k 2 120 "$BIN/kolo-perf" net -P ib "$@" 10.77.0.1:18600 > /tmp/kn.cli 2>&1
  wait $sp
  echo "KN $* : $(awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $4; exit}' /tmp/kn.cli)"
}
bw() {
  timeout 60 ib_write_bw -s 65536 -n 1000 -d rxe0 -x 1 > /tmp/b.srv 2>&1 & sleep 1; timeout 60 ib_write_bw -s 65536 -n 1000 -d rxe1 -x 1 10.77.0.1 > /tmp/b.cli 2>&1; wait
  echo "BW $(awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ {printf "%.2f", $4 * 1.048576; exit}' /tmp/b.cli)"
}
for i in 1 2 3; do
bw
KOLO_TEST_IB_HCA_RANK0==rxe1 KOLO_TEST_IB_HCA_RANK1==rxe0 KOLO_IB_BENCH=1 timeout 120 $BIN/test_net_ib --gtest_filter=IbBench.Bandwidth 2>&1 | grep KOLO-IB
kn --bw -s 65536 -n 1000
kn --bw -s 65536 -n 1000 --busy
bw
done
