# shellcheck shell=bash
# common.sh - sourced by run_smoke.sh and run_kolo.sh: how the soft-RoCE
# runs end when the VM cannot be had.  KOLO_RXE_OPTIONAL=1 makes that a SKIP
# (exit 0); otherwise (run_all.sh's default) it fails.  Either way the line
# names the fact of this machine that stops the VM, so a CI log says what
# to fix without a rerun.

# SKIP or FAIL with REASON, and exit.
rxe_unavailable() { # reason
  if [ "${KOLO_RXE_OPTIONAL:-0}" = 1 ]; then echo "SKIP: $1"; exit 0; fi
  echo "FAIL: $1 (KOLO_RXE_OPTIONAL=1 makes it a skip)"; exit 1
}

# setup.sh, its messages shown; when it fails, its own reason ("apt-get
# update failed (no network?)", "not root and no sudo", ...).
rxe_setup() { # here, cache
  local err rc why
  err=$(mktemp /tmp/kolo-rxe-setup.XXXXXX)
  "$1/setup.sh" 2> "$err"; rc=$?
  cat "$err" >&2
  why=$(sed -n 's/^rdma setup: //p' "$err" | tail -1)
  [ -n "$why" ] || why=$(grep -v '^ *$' "$err" | tail -1)  # set -e stopped it: the failing command's words
  rm -f "$err"
  [ $rc = 0 ] && return 0
  rxe_unavailable "the soft-RoCE VM cannot be set up here: ${why:-setup.sh exit $rc} (log: $2/setup.log)"
}

# The budget is spent before the guest could boot (setup downloading the
# kernel on a slow mirror, a loaded host).
rxe_budget_left() { # left, budget, spent
  [ "$1" -ge 60 ] && return 0
  rxe_unavailable "setup used $3 s of the $2 s budget: under 60 s left to boot the guest"
}

# vm.sh exit 125 (no boot) or 126 (not usable): its reason from the console
# log (KOLO-VM-WHY, written by vm.sh).
rxe_vm_failed() { # rc, console log
  local why
  why=$(tr -d '\r' < "$2" 2>/dev/null | sed -n 's/^KOLO-VM-WHY: //p' | tail -1)
  case $1 in
    125) rxe_unavailable "the soft-RoCE guest did not boot: ${why:-no reason recorded} (console: $2)";;
    *) rxe_unavailable "the soft-RoCE VM is not usable: ${why:-vm.sh exit $1}";;
  esac
}
