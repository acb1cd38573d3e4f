#!/usr/bin/env bash
# Prepares the soft-RoCE VM (tests/rdma/vm.sh) on a Debian host; idempotent and
# quick once done.  Everything it produces lives in the cache, not the repo:
#   $KOLO_RXE_VM_CACHE (default ~/.cache/kolo-rxe-vm)/
#     KVER                      kernel version in use, e.g. 6.1.0-56-amd64
#     linux-image-$KVER/        Debian's kernel package, unpacked (not installed)
#     initramfs.gz              stage 1: static busybox + virtio/9p/overlay modules
# Why Debian's kernel: it ships rdma_rxe (soft-RoCE) as a module, and the
# guest runs the host's own userland (rdma-core, perftest) over 9p, so the
# kernel must come from the same distribution.  Needs root or sudo only when
# packages are missing.  Exit 0 = ready; anything else = cannot be set up.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${KOLO_RXE_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-rxe-vm}
mkdir -p "$CACHE"
LOG=$CACHE/setup.log; : > "$LOG"
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
# Fail fast without a network instead of hanging on the mirror.
APT_OPTS=(-o Acquire::http::Timeout=20 -o Acquire::Retries=1 -o DPkg::Lock::Timeout=60)
export DEBIAN_FRONTEND=noninteractive
fail() { echo "rdma setup: $*" >&2; tail -n 15 "$LOG" >&2; exit 1; }
T= T2=; trap 'rm -rf $T $T2' EXIT
apt_updated=0
apt_update() { [ $apt_updated = 1 ] && return 0; apt_updated=1
  $SUDO apt-get "${APT_OPTS[@]}" update -qq >>"$LOG" 2>&1 || fail "apt-get update failed (no network?)"; }

# 1. Host packages.  qemu: the VM (software emulation, no KVM needed);
#    busybox-static + cpio: the initramfs; kmod: modprobe/depmod for the
#    unpacked kernel; iproute2: ip + rdma (veth, rxe links); rdma-core,
#    ibverbs-providers (librxe), libibverbs-dev, gcc: build and run verbs_smoke;
#    ibverbs-utils + perftest: ibv_devinfo, ib_write_bw/ib_write_lat.
pkgs=(qemu-system-x86 busybox-static kmod cpio gzip iproute2 rdma-core ibverbs-providers
      ibverbs-utils libibverbs-dev perftest gcc libc6-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || fail "not a Debian host (no apt-get); missing: ${missing[*]}"
  [ -z "$SUDO" ] || command -v sudo >/dev/null || fail "not root and no sudo: cannot install ${missing[*]}"
  apt_update
  $SUDO apt-get "${APT_OPTS[@]}" install -y -qq --no-install-recommends "${missing[@]}" >>"$LOG" 2>&1 ||
    fail "apt-get install ${missing[*]} failed"
  echo "rdma setup: installed ${missing[*]}"
fi
ldd /bin/busybox >/dev/null 2>&1 && fail "/bin/busybox is dynamically linked: the initramfs needs busybox-static"

# 2. The kernel: the version linux-image-amd64 points at now (old ABIs leave
#    the mirror), downloaded as a .deb and unpacked into the cache.
K=$(cat "$CACHE/KVER" 2>/dev/null || true)
if [ -z "$K" ] || [ ! -f "$CACHE/linux-image-$K/boot/vmlinuz-$K" ]; then
  apt_update
  PKG=${KOLO_RXE_KPKG:-$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')}
  [ -n "$PKG" ] || fail "cannot find Debian's kernel package (apt-cache depends linux-image-amd64)"
  K=${PKG#linux-image-}
  T=$(mktemp -d)
  chmod 755 "$T"; chown _apt "$T" 2>/dev/null || true   # apt downloads as user _apt
  (cd "$T" && $SUDO apt-get "${APT_OPTS[@]}" download -qq "$PKG" >>"$LOG" 2>&1) || fail "apt-get download $PKG failed"
  rm -rf "$CACHE/linux-image-$K" "$T/x"
  dpkg-deb -x "$T"/"$PKG"_*.deb "$T/x" || fail "cannot unpack $PKG"
  depmod -b "$T/x" "$K" || fail "depmod for $K failed"
  [ -e "$T/x/lib/modules/$K/kernel/drivers/infiniband/sw/rxe" ] || fail "$PKG has no rdma_rxe module"
  mv "$T/x" "$CACHE/linux-image-$K"                   # only complete trees land in the cache
  echo "$K" > "$CACHE/KVER"
  rm -f "$CACHE/initramfs.gz"
  echo "rdma setup: kernel $K unpacked into $CACHE"
fi

# 3. Stage-1 initramfs: the kernel needs virtio-pci, 9p and overlayfs before
#    it can mount the host's / (these are modules in Debian's kernel).
R=$CACHE/linux-image-$K
if [ ! -f "$CACHE/initramfs.gz" ] || [ "$HERE/initramfs-init" -nt "$CACHE/initramfs.gz" ]; then
  T2=$(mktemp -d)
  mkdir -p "$T2/bin" "$T2/modules" "$T2/proc" "$T2/sys" "$T2/dev"
  cp /bin/busybox "$T2/bin/busybox"
  cp "$HERE/initramfs-init" "$T2/init"; chmod 755 "$T2/init"
  for m in virtio_pci 9p 9pnet_virtio overlay; do
    modprobe -d "$R" -S "$K" --show-depends "$m" || fail "module $m not found in $K"
  done | awk '$1=="insmod"{print $2}' | awk '!seen[$0]++' | while read -r f; do
    cp "$f" "$T2/modules/"; basename "$f"               # in load order, deduplicated
  done > "$T2/modules.list"
  (cd "$T2" && find . | cpio -o -H newc --quiet | gzip -1) > "$CACHE/initramfs.gz.tmp"
  mv "$CACHE/initramfs.gz.tmp" "$CACHE/initramfs.gz"
  echo "rdma setup: initramfs.gz with modules $(tr '\n' ' ' < "$T2/modules.list")"
fi
