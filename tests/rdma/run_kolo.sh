#!/usr/bin/env bash
# kolo's own net provider on soft-RoCE: test_net_ib and a 2-"host"
# all-reduce / all-gather / send/recv over KOLO_NET=ib inside the QEMU guest
# (kolo_guest.sh), with host-built binaries (the guest sees the host's /).
#   usage: tests/rdma/run_kolo.sh [BUILD_DIR]     (default: build)
# Like run_smoke.sh: setup.sh first; "FAIL: <reason>" and exit 1 when the VM
# cannot be had ("SKIP: <reason>" and exit 0 with KOLO_RXE_OPTIONAL=1).  The
# same when BUILD_DIR has no test_net_ib built with ibverbs.
# Env: KOLO_RXE_KOLO_TIMEOUT (s, whole run, default 170), KOLO_RXE_KOLO_BENCH=1
#      (also measure kolo's ib point to point beside ib_write_bw/ib_write_lat;
#      give it ~300 s), plus vm.sh's.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(realpath "${1:-$ROOT/build}")
CACHE=${KOLO_RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-rxe-vm}
BUDGET=${KOLO_RXE_KOLO_TIMEOUT:-170}
T0=$SECONDS
# shellcheck source=tests/rdma/common.sh
. "$HERE/common.sh"
[ -x "$BUILD/bin/test_net_ib" ] || rxe_unavailable "$BUILD/bin/test_net_ib is not built"
{ grep -q "^KOLO_IBVERBS_LIB:FILEPATH=/" "$BUILD/CMakeCache.txt" && ! grep -q "^KOLO_IBVERBS:BOOL=OFF" "$BUILD/CMakeCache.txt"; } 2>/dev/null ||
  rxe_unavailable "$BUILD was not built with libibverbs (see KOLO_IBVERBS and KOLO_IBVERBS_LIB in its CMakeCache.txt)"

echo "rdma kolo: setup"
rxe_setup "$HERE" "$CACHE"
WORK=$(mktemp -d /tmp/kolo-rxe-kolo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
left=$((BUDGET - (SECONDS - T0)))
rxe_budget_left $left "$BUDGET" $((SECONDS - T0))
cat > "$WORK/kolo.env" <<ENV
BIN=$BUILD/bin
T1=$(((left - 30) * 3 / 5))
T2=$(((left - 30) * 2 / 5))
BENCH=${KOLO_RXE_KOLO_BENCH:-0}
ENV
chmod -R a+rX "$WORK"
LOG=$CACHE/kolo-console.log
echo "rdma kolo: booting the guest (software emulation, limit ${left}s; console: $LOG)"
"$HERE/vm.sh" -t "$left" -C "$WORK" -l "$LOG" "$HERE/kolo_guest.sh"; rc=$?
[ "${KOLO_RXE_VERBOSE:-0}" = 1 ] && tr -d '\r' < "$LOG"
echo "rdma kolo summary:"
tr -d '\r' < "$LOG" | sed -n 's/^KOLO-RXE: /  /p; s/^KOLO-RXE-STAGE2: \(.*\) uptime=\(.*\)/  guest \1 at \2 s/p'
echo "  total $((SECONDS - T0)) s (guest rc $rc)"
case $rc in
  0) echo "rdma kolo: PASS"; exit 0;;
  125 | 126) rxe_vm_failed $rc "$LOG";;
  124) echo "rdma kolo: FAIL: the guest script hit the time limit; end of the console:";;
  *) echo "rdma kolo: FAIL ($rc failed checks); end of the console:";;
esac
tr -d '\r' < "$LOG" | grep -v '^KOLO-RXE:' | tail -n 60
exit 1
