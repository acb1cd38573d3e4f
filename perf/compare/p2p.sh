# perf/compare/p2p.sh - perf/compare.sh p2p: kolo's socket path beside
# iperf3 on two network namespaces joined by one veth pair (10.78.0.1 <->
# 10.78.0.2), the contenders in turn each round, then the medians and the
# ratios (perf/compare/net_summary.py).  Needs root.  Settings:
# docs/benchmarking.md.

PIDS=()
p2p_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${NS[@]}"; do ip netns del "$p" 2> /dev/null; done
}

# run_bg NS LOG CMD...: a background job in namespace NS, remembered for cleanup.
run_bg() { local ns=$1 log=$2; shift 2; ip netns exec "$ns" "$@" > "$log" 2>&1 & PIDS+=($!); }
wait_last() { local p=${PIDS[-1]} rc; wait "$p"; rc=$?; unset 'PIDS[-1]'; return $rc; }

p2p_netns() {
  NS=("knp$$a" "knp$$b") A=10.78.0.1 B=10.78.0.2
  at_exit p2p_cleanup
  ip netns add "${NS[0]}" && ip netns add "${NS[1]}" || die "cannot create network namespaces"
  ip -n "${NS[0]}" link add eth0 type veth peer name eth0 netns "${NS[1]}" || die "cannot create a veth pair"
  ip -n "${NS[0]}" addr add $A/24 dev eth0 && ip -n "${NS[1]}" addr add $B/24 dev eth0 || die "cannot set addresses"
  local ns
  for ns in "${NS[@]}"; do
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || die "cannot bring up $ns's links"
  done
  # Ranks in two namespaces of one machine share its hostname and boot id:
  # KOLO_HOSTID tells them apart.  (grep reads all: with pipefail, grep -q's
  # early exit would fail the pipe.)
  if "$PERF" --params 2> /dev/null | grep KOLO_HOSTID > /dev/null; then
    HOSTS=(KOLO_HOSTID=nsA KOLO_HOSTID=nsB)
  else
    HOSTS=(KOLO_NET_FORCE=1 KOLO_NET_FORCE=1)
  fi
  SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
}

# p2p_iperf FILE PORT FLAG...: one iperf3 run; its server waits (bounded) for one client.
p2p_iperf() {
  local f=$1 port=$2 try
  shift 2
  run_bg "${NS[1]}" "$f.server.log" timeout 120 iperf3 -s -1 -B $B -p "$port"
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    ip netns exec "${NS[0]}" iperf3 -c $B -p "$port" -t "${IPERF_TIME:-5}" -P "${IPERF_STREAMS:-1}" "${IPERF_L[@]}" "$@" \
      -J > "$f.json" 2>&1 && break
    grep -q "unable to connect\|Connection refused" "$f.json" || break
  done
  wait_last || { echo "compare p2p: iperf3 $* failed, see $f.json"; fail=1; }
}

# p2p_net FILE FLAG...: one kolo-perf net run against a server in the other namespace.
p2p_net() {
  local f=$1
  shift
  run_bg "${NS[1]}" "$f.server.log" timeout 300 "$PERF" net --server -P socket -p 18600
  ip netns exec "${NS[0]}" "$PERF" net -P socket "$@" --json "$f.json" $B:18600 > "$f.txt" 2>&1 ||
    { echo "compare p2p: kolo-perf net $* failed:"; cat "$f.txt"; fail=1; }
  wait_last || { echo "compare p2p: its server failed:"; cat "$f.server.log"; fail=1; }
}

# p2p_ar FILE: the 2-rank all-reduce, rank r in namespace NS[r].
p2p_ar() {
  local f=$1 r
  for r in 0 1; do
    run_bg "${NS[$r]}" "$f.r$r.txt" env KOLO_ROOT=$A:29500 KOLO_RANK=$r KOLO_WORLD_SIZE=2 \
      KOLO_SECRET="$SECRET" KOLO_SOCKET_IFNAME==eth0 KOLO_NET=socket "${HOSTS[$r]}" KOLO_TIMEOUT_MS=60000 \
      timeout 600 "$PERF" all_reduce -b "$SIZE" -e "$SIZE" -n "${AR_ITERS:-10}" -w "${AR_WARMUP:-3}" -c 1 \
      --json "$f.r$r.json"
  done
  for r in 1 0; do
    wait_last || { echo "compare p2p: all_reduce rank $r failed:"; cat "$f.r$r.txt"; fail=1; }
  done
}

p2p_run() {
  local f=$OUT/$1.$2
  echo "# round $2/$REPEATS: $1"
  case $1 in
    iperf3) p2p_iperf "$f" 5201 ;;
    iperf3-bidir) p2p_iperf "$f" 5202 --bidir ;;
    net-bw) p2p_net "$f" --bw -s "$SIZE" -n "$NET_ITERS" ;;
    net-bidir) p2p_net "$f" --bidir -s "$SIZE" -n "$NET_ITERS" ;;
    net-lat) p2p_net "$f" --lat -s "$LAT_SIZE" ;;
    ar) p2p_ar "$f" ;;
  esac
}

mode_p2p() {
  set +e
  REPEATS=${REPEATS:-3} SIZE=${SIZE:-64M} LAT_SIZE=${LAT_SIZE:-8} PERF=${PERF_BIN:-$BUILD/bin/kolo-perf}
  SIZE_BYTES=$(numfmt --from=iec "$SIZE" 2> /dev/null) || die "SIZE=$SIZE is not a size (e.g. 128K, 64M)"
  local per=$(((1 << 30) / SIZE_BYTES)) IPERF_L=()
  NET_ITERS=${NET_ITERS:-$((per < 8 ? 8 : per > 20000 ? 20000 : per))}
  [ -z "${IPERF_LEN:-}" ] || IPERF_L=(-l "$IPERF_LEN")
  [ "$(id -u)" = 0 ] || die "network namespaces need root (running as uid $(id -u))"
  need_cmds ip python3
  command -v iperf3 > /dev/null || scripts/setup.sh
  need_cmds iperf3
  [ -x "$PERF" ] || die "$PERF is missing (scripts/build.sh $BUILD)"
  p2p_netns
  header "# kolo's socket path beside iperf3 on one veth pair between 2 namespaces; ${HOSTS[0]%%=*} tells them apart" \
    "# SIZE=$SIZE LAT_SIZE=$LAT_SIZE REPEATS=$REPEATS NET_ITERS=$NET_ITERS IPERF_LEN=${IPERF_LEN:-} BUSY=$BUSY"
  fail=0
  start_busy "$BUSY"
  alternate "$REPEATS" p2p_run iperf3 iperf3-bidir net-bw net-bidir net-lat ar
  stop_busy
  python3 perf/compare/net_summary.py "$OUT" "$REPEATS" "$SIZE" "$LAT_SIZE" skip 1 | tee "$OUT/summary.txt" || fail=1
  return $fail
}
