#!/bin/bash
# ns.sh ROUNDS NAME=SETTINGS... - kolo's all-reduce over TCP with each of P
# (2) ranks in a network namespace of its own (veth pairs on a bridge,
# 10.79.0.0/24), under each NAME's settings in turn; the name "base" runs
# the kolo-perf of BASE_BUILD, the others BUILD's.  Prints "NAME BYTES US"
# per size and run, as knobs.sh; PIN=1 puts rank i on CPU i mod 2.  Root.
#   BUILD=build-net BASE_BUILD=/tmp/base/build-net results/2026-12-02-net-chunk/ns.sh 7 base= new=
set -eu
R=$1
shift
P=${P:-2} T=kchunk
cleanup() {
  local i
  for ((i = 0; i < P; i++)); do ip netns del "${T}r$i" 2> /dev/null || true; done
  ip netns del "${T}hub" 2> /dev/null || true
}
trap cleanup EXIT
cleanup
ip netns add "${T}hub"
ip -n "${T}hub" link add br0 type bridge
ip -n "${T}hub" link set br0 up
for ((i = 0; i < P; i++)); do
  ip netns add "${T}r$i"
  ip -n "${T}hub" link add "v$i" type veth peer name eth0 netns "${T}r$i"
  ip -n "${T}hub" link set "v$i" master br0 up
  ip -n "${T}r$i" addr add "10.79.0.$((i + 1))/24" dev eth0
  ip -n "${T}r$i" link set eth0 up
  ip -n "${T}r$i" link set lo up
done
out=$(mktemp -d)
port=29600
for _ in $(seq "$R"); do
  for cfg in "$@"; do
    name=${cfg%%=*} envs=${cfg#*=} port=$((port + 1)) B=${BUILD:-build}/bin pids=()
    [ "$name" = base ] && B=$BASE_BUILD/bin
    for ((i = 0; i < P; i++)); do
      pin=()
      [ -n "${PIN:-}" ] && pin=(taskset -c $((i % 2)))
      # shellcheck disable=SC2086 # envs: space-separated words
      ip netns exec "${T}r$i" "${pin[@]}" env KOLO_ROOT="10.79.0.1:$port" KOLO_RANK="$i" KOLO_WORLD_SIZE="$P" \
        KOLO_SECRET=00112233445566778899aabbccddeeff KOLO_SOCKET_IFNAME==eth0 KOLO_NET_FORCE=1 \
        KOLO_SHM_DISABLE=1 KOLO_NET=socket $envs "$B/kolo-perf" all_reduce -b "${MINB:-1M}" -e "${MAXB:-16M}" \
        -f 2 -n "${ITERS:-40}" -w 10 --inplace 0 -c 1 > "$out/r$i.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    awk -v n="$name" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }' "$out/r0.txt"
  done
done
rm -rf "$out"
