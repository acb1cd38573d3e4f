#!/usr/bin/env bash
# tests/fault/netns.sh BUILD [--netem] [--no-faults] [kolo-fault flags...] - kolo over TCP
# between "hosts": 3 network namespaces <tag>r0..r2, each with eth0 at
# 10.78.0.(i+1)/24 on a veth pair whose other end, v<i>, sits on a bridge in
# the namespace <tag>hub (so `ip -n <tag>hub link set v<i> down` cuts rank
# i off).  Then:
#   a checked all-reduce and all-gather (kolo-perf -c 1, 8 B .. 4 MiB, the
#     ranks joined as a launcher's job) must complete with every element
#     right; with --netem every eth0 first gets `netem delay 5ms 1ms loss 1%
#     reorder 5%` (that part SKIPs where the kernel has no sch_netem);
#   unless --no-faults: kolo-fault --netns <tag> --ranks 3 with the flags
#     given (the default kinds plus link-down).
# Where namespaces cannot be made it prints "FAIL: fault/netns: <what is
# missing>" (no CAP_NET_ADMIN, no ip, no veth or bridge in the kernel) and
# exits 1; with KOLO_NETNS_OPTIONAL=1 that is "SKIP: ..." and exit 0.  A
# kernel without sch_netem only SKIPs the netem part (the rest runs on plain
# veth).  Everything it made is deleted on exit.
set -u
BUILD=${1:?usage: netns.sh BUILD [--netem] [kolo-fault flags]}
shift
NETEM=0 FAULTS=1
if [ "${1:-}" = --netem ]; then NETEM=1; shift; fi
if [ "${1:-}" = --no-faults ]; then FAULTS=0; shift; fi
TAG="kf$$"
NSS=()
WORK=$(mktemp -d /tmp/kolo-fault-netns.XXXXXX)
cleanup() {
  local ns
  for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
# Namespaces that cannot be made: a failure unless KOLO_NETNS_OPTIONAL=1.
missing() {
  if [ "${KOLO_NETNS_OPTIONAL:-0}" = 1 ]; then echo "SKIP: fault/netns: $*"; exit 0; fi
  echo "FAIL: fault/netns: $* (KOLO_NETNS_OPTIONAL=1 makes it a skip)"; exit 1
}
# A step of the setup; its error says which fact is missing: the kernel's
# module (veth, bridge) or the permission.
try() {
  local what=$1 err; shift
  "$@" >"$WORK/err" 2>&1 && return 0
  err=$(tr '\n' ' ' <"$WORK/err")
  case $err in
    *"Unknown device type"* | *"not supported"*) missing "the kernel has no $what: $*: $err";;
    *) missing "$what is not permitted here: $*: $err";;
  esac
}
# CAP_NET_ADMIN (bit 12 of the effective set) is what namespaces, veth and
# bridges need; root without it (a container, setpriv) fails the same way.
cap_net_admin() {
  local eff
  eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
  (( (16#${eff:-0} >> 12) & 1 )) || missing "no CAP_NET_ADMIN (CapEff=$eff, uid $(id -u)): network namespaces, veth and bridges need it"
}

cap_net_admin
command -v ip >/dev/null 2>&1 || missing "no 'ip' command (iproute2)"
try "ip netns add" ip netns add "${TAG}hub"
NSS+=("${TAG}hub")
try "bridge" ip -n "${TAG}hub" link add br0 type bridge
try "bringing up the bridge" ip -n "${TAG}hub" link set br0 up
for i in 0 1 2; do
  ns="${TAG}r$i"
  try "ip netns add" ip netns add "$ns"
  NSS+=("$ns")
  try "veth" ip -n "${TAG}hub" link add "v$i" type veth peer name eth0 netns "$ns"
  try "attaching the veth" ip -n "${TAG}hub" link set "v$i" master br0 up
  try "an address" ip -n "$ns" addr add "10.78.0.$((i + 1))/24" dev eth0
  try "bringing up eth0" ip -n "$ns" link set eth0 up
  try "bringing up lo" ip -n "$ns" link set lo up
done
# netem may be missing from the kernel: then that part skips, the rest runs.
for i in 0 1 2; do
  [ $NETEM = 1 ] || break
  if ! ip netns exec "${TAG}r$i" tc qdisc add dev eth0 root netem delay 5ms 1ms loss 1% reorder 5% >"$WORK/err" 2>&1; then
    echo "SKIP: fault/netns: the netem part: tc netem is not available here: $(tr '\n' ' ' <"$WORK/err")"
    NETEM=0
  fi
done

status=0
# A checked collective across the 3 namespaces: every rank must exit 0.
checked_coll() { # checked_coll COLL PORT
  local pids=() i
  for i in 0 1 2; do
    ip netns exec "${TAG}r$i" env KOLO_ROOT="10.78.0.1:$2" KOLO_RANK=$i KOLO_WORLD_SIZE=3 \
      KOLO_SECRET=00112233445566778899aabbccddeeff KOLO_SOCKET_IFNAME==eth0 KOLO_TIMEOUT_MS=30000 \
      timeout 300 "$BUILD/bin/kolo-perf" "$1" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 >"$WORK/$1-r$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    if ! wait "${pids[$i]}"; then
      echo "FAIL: $1 over netem: rank $i exited non-zero; its output:"
      sed 's/^/    /' "$WORK/$1-r$i.log" | tail -15
      status=1
    fi
  done
  [ $status = 0 ] && { echo "ok: checked $1 (8 B .. 4 MiB) across 3 namespaces, $LINK"; grep -E "^ +[0-9]+ " "$WORK/$1-r0.log" | tail -2; }
}
LINK="plain veth"
[ $NETEM = 1 ] && LINK="netem delay 5ms 1ms loss 1% reorder 5% on every eth0"
checked_coll all_reduce 29571
checked_coll all_gather 29572
if [ $FAULTS = 1 ]; then
  "$BUILD/bin/kolo-fault" --netns "$TAG" --ranks 3 --kinds kill,stop,stop+cont-early,stop+cont-late,cut,link-down "$@" || status=1
fi
exit $status
