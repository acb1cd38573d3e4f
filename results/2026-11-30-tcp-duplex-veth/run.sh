#!/usr/bin/env bash
# results/2026-11-29-tcp-duplex/swap.c's modes 1 and 3 alternated ROUNDS
# times (default 9) between two network namespaces on one veth pair (root,
# its DIAL and CHILD_NS); medians.
set -euo pipefail
cd "$(dirname "$0")"
BIN=${BIN:-/tmp/kolo-swap}
gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$BIN" ../2026-11-29-tcp-duplex/swap.c
A=kswa$$ B=kswb$$
trap 'ip netns del $A 2> /dev/null; ip netns del $B 2> /dev/null' EXIT
ip netns add $A && ip netns add $B
ip link add va$$ type veth peer name vb$$
ip link set va$$ netns $A && ip link set vb$$ netns $B
ip -n $A addr add 10.79.0.1/24 dev va$$ && ip -n $B addr add 10.79.0.2/24 dev vb$$
for ns in $A $B; do ip -n $ns link set lo up; done
ip -n $A link set va$$ up && ip -n $B link set vb$$ up
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, $(uname -r); us per swap of 48-byte frames, ${ITERS:-30000} swaps a run"
declare -A t
for r in $(seq 1 "${ROUNDS:-9}"); do
  for m in 1 3; do
    x=$(ip netns exec $A env DIAL=10.79.0.1 CHILD_NS=/var/run/netns/$B "$BIN" $m "${ITERS:-30000}" | awk '{print $3}')
    echo "round $r mode $m: $x"
    t[$m]+=" $x"
  done
done
for m in 1 3; do
  echo "mode $m: median $(echo ${t[$m]} | tr ' ' '\n' | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
done
