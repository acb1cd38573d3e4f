#!/usr/bin/env bash
# tests/netns/run.sh TEST_NET - ranks on separate "hosts": network namespaces.
#
# For N = 2 and N = 3: N namespaces, each with one veth pair to a bridge in a
# hub namespace and a real address 10.77.N.(i+1)/24 on eth0; rank i runs
# `TEST_NET --gtest_filter=NetNsRank.Run` in namespace i with the launcher's
# variables (KOLO_ROOT on rank 0's address, KOLO_RANK, KOLO_WORLD_SIZE,
# KOLO_SECRET), KOLO_SOCKET_IFNAME=eth0 and KOLO_NET_FORCE=1 (namespaces of
# one machine share its hostname and boot id, so the ranks would otherwise
# count as one host and use shared memory).  Every rank must exit 0.
#
# Where namespaces cannot be made (not root, no CAP_NET_ADMIN / mount
# rights, no veth or bridge support) it prints a line starting with SKIP and
# exits 0.  Everything it made is deleted on exit.
set -u
BIN=${1:?usage: run.sh path/to/test_net}
TAG="kn$$"
HUB="${TAG}hub"
NSS=()
WORK=$(mktemp -d /tmp/kolo-netns.XXXXXX)

cleanup() {
  local ns
  for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

skip() { echo "SKIP: netns test: $*"; exit 0; }

[ "$(id -u)" = 0 ] || skip "network namespaces need root (running as uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
[ -x "$BIN" ] || { echo "FAIL: $BIN is not an executable"; exit 1; }

try() { # try WHAT CMD...: runs CMD, skips with WHAT and its error on failure
  local what=$1; shift
  if ! "$@" >"$WORK/err" 2>&1; then skip "$what is not permitted here: $(tr '\n' ' ' <"$WORK/err")"; fi
}

try "ip netns add" ip netns add "$HUB"
NSS+=("$HUB")
try "ip netns exec" ip netns exec "$HUB" true
try "a bridge" ip -n "$HUB" link add br0 type bridge
try "bringing up the bridge" ip -n "$HUB" link set br0 up

SECRET=00112233445566778899aabbccddeeff
status=0
for N in 2 3; do
  for ((i = 0; i < N; i++)); do
    ns="${TAG}n${N}r$i"
    try "ip netns add" ip netns add "$ns"
    NSS+=("$ns")
    try "a veth pair" ip -n "$HUB" link add "v${N}r$i" type veth peer name eth0 netns "$ns"
    try "attaching the veth" ip -n "$HUB" link set "v${N}r$i" master br0 up
    try "an address" ip -n "$ns" addr add "10.77.$N.$((i + 1))/24" dev eth0
    try "bringing up eth0" ip -n "$ns" link set eth0 up
    try "bringing up lo" ip -n "$ns" link set lo up
  done
  start=$(date +%s%N)
  pids=()
  for ((i = 0; i < N; i++)); do
    ip netns exec "${TAG}n${N}r$i" env KOLO_NETNS_RANK=1 KOLO_ROOT="10.77.$N.1:$((29400 + N))" \
      KOLO_RANK=$i KOLO_WORLD_SIZE=$N KOLO_SECRET=$SECRET KOLO_SOCKET_IFNAME==eth0 \
      KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_TIMEOUT_MS=30000 \
      timeout 150 "$BIN" --gtest_filter=NetNsRank.Run >"$WORK/n$N-r$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < N; i++)); do
    if wait "${pids[$i]}"; then
      # exit 0 alone would pass a rank whose test skipped or matched nothing
      if ! grep -qF '[  PASSED  ] 1 test.' "$WORK/n$N-r$i.log" || grep -qF '[  SKIPPED ]' "$WORK/n$N-r$i.log"; then
        echo "FAIL: $N namespaces: rank $i (10.77.$N.$((i + 1))) exited 0 without running its test; its output:"
        sed 's/^/    /' "$WORK/n$N-r$i.log"
        status=1
      fi
    else
      rc=$?
      echo "FAIL: $N namespaces: rank $i (10.77.$N.$((i + 1))) exited with $rc; its output:"
      sed 's/^/    /' "$WORK/n$N-r$i.log"
      status=1
    fi
  done
  ms=$((($(date +%s%N) - start) / 1000000))
  [ $status = 0 ] && echo "ok: $N ranks in $N namespaces (10.77.$N.0/24, veth + bridge) in $ms ms"
  grep -h "cases passed" "$WORK"/n$N-r*.log | sed 's/^/  /'
done
exit $status
