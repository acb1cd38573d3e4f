#!/usr/bin/env bash
# Boots Debian's kernel under QEMU with the host's / as the guest's root and
# soft-RoCE devices rxe0/rxe1 on a veth pair (guest-init.sh), runs SCRIPT in
# the guest (in DIR, default /tmp), powers off.  Run setup.sh first.
#   usage: vm.sh [-t SECS] [-C DIR] [-l LOG] SCRIPT
# Exit: SCRIPT's exit code; 124 = time limit hit after the guest booted;
#       125 = the guest never reached stage 2 (boot failed or too slow);
#       126 = not set up.  The console goes to LOG (default: a temp file).
#       For 125 and 126 the console's last "KOLO-VM-WHY: <reason>" line says why.
# Env: KOLO_RXE_VM_CACHE, KOLO_RXE_ACCEL=tcg|kvm (tcg: works everywhere; kvm
#      needs real VT-x/SVM), KOLO_RXE_SMP (2), KOLO_RXE_MEM (MiB, 2048).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${KOLO_RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-rxe-vm}
TMO=300 DIR=/tmp LOG=
while getopts t:C:l: o; do case $o in t) TMO=$OPTARG;; C) DIR=$OPTARG;; l) LOG=$OPTARG;; *) exit 2;; esac; done
shift $((OPTIND-1))
[ $# = 1 ] || { echo "usage: vm.sh [-t SECS] [-C DIR] [-l LOG] SCRIPT" >&2; exit 2; }
SCRIPT=$(realpath "$1"); DIR=$(realpath "$DIR")
LOG=${LOG:-$(mktemp /tmp/kolo-rxe-vm.XXXXXX.log)}
: > "$LOG"
# Why the VM could not run, on stderr and as the console's last
# "KOLO-VM-WHY:" line (run_smoke.sh / run_kolo.sh name it when they fail).
why() { # exit code, reason
  echo "vm.sh: $2" >&2
  echo "KOLO-VM-WHY: $2" >> "$LOG"
  exit "$1"
}
K=$(cat "$CACHE/KVER" 2>/dev/null) || why 126 "not set up: no $CACHE/KVER (run tests/rdma/setup.sh)"
KERNEL=$CACHE/linux-image-$K/boot/vmlinuz-$K
for f in "$KERNEL" "$CACHE/initramfs.gz"; do [ -f "$f" ] || why 126 "missing $f (run setup.sh)"; done
command -v qemu-system-x86_64 >/dev/null || why 126 "no qemu-system-x86_64 on PATH (run setup.sh)"
# Paths travel on the kernel command line, which splits at spaces.
case "$HERE$SCRIPT$DIR$CACHE" in *[[:space:]]*) why 126 "paths with spaces are not supported";; esac
case ${KOLO_RXE_ACCEL:-tcg} in
  kvm) ACC=(-accel kvm -cpu host) ACCEL="KVM";;
  *) ACC=(-accel tcg,thread=multi -cpu max) ACCEL="software emulation (TCG)";;   # slow but needs nothing
esac
# The machine's side of a boot that did not happen: QEMU's or the kernel's
# own words when the console has them, else what this host gave the guest.
boot_fact() {
  local said host
  host="$(nproc) CPUs, $(awk '/MemAvailable/{print int($2/1024)}' /proc/meminfo) MiB available"
  said=$(tr -d '\r' < "$LOG" | grep -m1 -E "^qemu[-a-z0-9_]*: |Kernel panic|not syncing|Out of memory")
  if [ -n "$said" ]; then echo "$said ($KERNEL; $host)"; return; fi
  [ "$qrc" = 124 ] || { echo "QEMU exited before stage 2, saying nothing ($host)"; return; }
  echo "no stage 2 within ${TMO}s under $ACCEL ($host, /dev/kvm $([ -e /dev/kvm ] && echo present || echo absent));" \
       "console: $(tr -d '\r' < "$LOG" | wc -l) lines"
}
APPEND="console=ttyS0 panic=-1 quiet loglevel=4 kolo_stage2=$HERE/guest-init.sh kolo_script=$SCRIPT"
APPEND+=" kolo_cwd=$DIR kolo_moddir=$CACHE/linux-image-$K/lib/modules/$K"
start=$(date +%s.%N)
# --foreground: qemu stays in our process group, so whoever times *us* out
# (run_all.sh) reaches it too.  -no-reboot + panic=-1: a kernel panic ends
# QEMU instead of looping.  No NIC: the guest's network is its own veth pair.
timeout --foreground -k 5 "$TMO" qemu-system-x86_64 "${ACC[@]}" -smp "${KOLO_RXE_SMP:-2}" -m "${KOLO_RXE_MEM:-2048}" \
  -nodefaults -no-reboot -nographic -serial stdio -monitor none -nic none \
  -kernel "$KERNEL" -initrd "$CACHE/initramfs.gz" -append "$APPEND" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  </dev/null >"$LOG" 2>&1 &
qpid=$!
sig=
trap 'sig=1; kill -TERM $qpid 2>/dev/null' TERM INT HUP   # never leave QEMU behind
while :; do wait $qpid; qrc=$?; kill -0 $qpid 2>/dev/null || break; done   # again after a trapped signal
trap - TERM INT HUP
wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
rc=$(tr -d '\r' < "$LOG" | sed -n 's/^KOLO-RXE-EXIT=\([0-9]*\).*/\1/p' | tail -1)
echo "vm.sh: qemu rc=$qrc, ${wall}s wall, console log $LOG"
[ -n "$rc" ] && exit "$rc"
[ -n "$sig" ] && { echo "vm.sh: interrupted by a signal, QEMU stopped" >&2; exit 124; }
if grep -q "KOLO-RXE-STAGE2: start" "$LOG"; then
  echo "vm.sh: the guest booted but $SCRIPT did not finish (time limit ${TMO}s)" >&2; exit 124
fi
echo "vm.sh: the guest did not boot (qemu rc=$qrc); end of the console:" >&2
tr -d '\r' < "$LOG" | tail -n 20 >&2
why 125 "qemu rc=$qrc: $(boot_fact)"
