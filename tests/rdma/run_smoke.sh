#!/usr/bin/env bash
# kolo's soft-RoCE smoke test: real ibverbs without RDMA hardware.
#   1. setup.sh: QEMU, rdma-core, perftest, Debian's kernel (cached, quick once done)
#   2. builds verbs_smoke on the host (the guest runs the host's files)
#   3. vm.sh boots the guest (rdma_rxe: rxe0 on veth0, rxe1 on veth1) and runs
#      smoke_guest.sh: verbs_smoke rxe1 -> rxe0 across the veth and on rxe0
#      loopback, then ib_write_bw -s 65536 / ib_write_lat on the same pairs
#   4. prints the summary; exit 1 on any failed check.
# When the VM cannot be had (no apt network, no root, QEMU/kernel failing to
# boot, no time left) it says "FAIL: <reason>" and exits 1, the reason naming
# the machine's fact (common.sh); KOLO_RXE_OPTIONAL=1: "SKIP: <reason>", exit 0.
# Env: KOLO_RXE_TIMEOUT (s, whole run, default 150), KOLO_RXE_N (verbs_smoke
#      messages per size, 16), KOLO_RXE_BW_N / KOLO_RXE_LAT_N (perftest -n, 500),
#      KOLO_RXE_VERBOSE=1 (print the whole console), plus vm.sh's.
# Leaves nothing behind but the cache and the console log in it.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${KOLO_RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-rxe-vm}
BUDGET=${KOLO_RXE_TIMEOUT:-150}
T0=$SECONDS
# shellcheck source=tests/rdma/common.sh
. "$HERE/common.sh"

echo "rdma smoke: setup"
rxe_setup "$HERE" "$CACHE"

WORK=$(mktemp -d /tmp/kolo-rxe.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$WORK/verbs_smoke" "$HERE/verbs_smoke.c" -libverbs ||
  { echo "FAIL: verbs_smoke does not build"; exit 1; }
cat > "$WORK/smoke.env" <<ENV
N=${KOLO_RXE_N:-16}
BW_N=${KOLO_RXE_BW_N:-500}
LAT_N=${KOLO_RXE_LAT_N:-500}
ENV
chmod -R a+rX "$WORK"

left=$((BUDGET - (SECONDS - T0)))
rxe_budget_left $left "$BUDGET" $((SECONDS - T0))
LOG=$CACHE/smoke-console.log
echo "rdma smoke: booting the guest (software emulation, limit ${left}s; console: $LOG)"
"$HERE/vm.sh" -t "$left" -C "$WORK" -l "$LOG" "$HERE/smoke_guest.sh"; rc=$?
[ "${KOLO_RXE_VERBOSE:-0}" = 1 ] && tr -d '\r' < "$LOG"
echo "rdma smoke summary:"
tr -d '\r' < "$LOG" | sed -n 's/^KOLO-RXE: /  /p; s/^KOLO-RXE-STAGE2: \(.*\) uptime=\(.*\)/  guest \1 at \2 s/p'
echo "  total $((SECONDS - T0)) s (guest rc $rc)"
case $rc in
  0) echo "rdma smoke: PASS"; exit 0;;
  125 | 126) rxe_vm_failed $rc "$LOG";;
  124) echo "rdma smoke: FAIL: the guest script hit the time limit; end of the console:";;
  *) echo "rdma smoke: FAIL ($rc failed checks); end of the console:";;
esac
tr -d '\r' < "$LOG" | grep -v '^KOLO-RXE:' | tail -n 40
exit 1
