#!/bin/sh
# Stage 2 of the soft-RoCE VM: PID 1 in the guest, on the host's filesystem
# (9p, read-only, tmpfs overlay), so host-built programs run as they are.
# Loads soft-RoCE, cables two rxe devices together, runs $kolo_script in
# $kolo_cwd, prints its exit code as a marker for vm.sh and powers off.
# Kernel command line (environment here): kolo_script, kolo_cwd, kolo_moddir.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
up() { cut -d' ' -f1 /proc/uptime; }
echo "KOLO-RXE-STAGE2: start uptime=$(up)"
mount -t tmpfs tmpfs /run
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
# Modules come from the unpacked kernel package in the host's cache.
K=$(uname -r)
mkdir -p /lib/modules/$K && mount --bind "$kolo_moddir" /lib/modules/$K
echo /sbin/modprobe > /proc/sys/kernel/modprobe
modprobe -q crc32_generic; modprobe -q crc32-pclmul   # rxe's ICRC; either is enough
rc=0
modprobe -a veth rdma_rxe ib_uverbs rdma_ucm || { echo "KOLO-RXE-STAGE2: modprobe failed"; rc=3; }
ulimit -l unlimited   # ibv_reg_mr pins memory
ip link set lo up
# Two "hosts": a veth pair (veth0 10.77.0.1, veth1 10.77.0.2), one rxe on each end.
ip link add veth0 type veth peer name veth1
ip addr add 10.77.0.1/24 dev veth0; ip addr add 10.77.0.2/24 dev veth1
ip link set veth0 up; ip link set veth1 up
# Both addresses are local, so by default the kernel would deliver
# 10.77.0.1 <-> 10.77.0.2 over lo and each rxe would see its own packets.
# Policy routing sends them out of the other end's veth instead, so rxe1 ->
# rxe0 really crosses the wire (accept_local + no rp_filter let them in).
for k in all/accept_local veth0/accept_local veth1/accept_local; do echo 1 > /proc/sys/net/ipv4/conf/$k; done
for k in all/rp_filter veth0/rp_filter veth1/rp_filter; do echo 0 > /proc/sys/net/ipv4/conf/$k; done
ip rule add pref 100 lookup local; ip rule del pref 0 lookup local
ip rule add pref 10 iif lo to 10.77.0.2 lookup 10
ip rule add pref 11 iif lo to 10.77.0.1 lookup 11
ip route add 10.77.0.2 dev veth0 src 10.77.0.1 table 10
ip route add 10.77.0.1 dev veth1 src 10.77.0.2 table 11
# (A second network namespace does not work with this kernel's rxe: its QPs
# fail.  Two devices on one veth pair model two nodes instead.)
rdma link add rxe0 type rxe netdev veth0 || rc=3
rdma link add rxe1 type rxe netdev veth1 || rc=3
echo "KOLO-RXE-STAGE2: rxe ready uptime=$(up)"
if [ $rc = 0 ]; then
  cd "${kolo_cwd:-/tmp}" && /bin/sh "$kolo_script" 2>&1; rc=$?
else
  rdma link show; echo "KOLO-RXE-STAGE2: soft-RoCE setup failed"
fi
echo "KOLO-RXE-STAGE2: done uptime=$(up)"
echo "KOLO-RXE-EXIT=$rc"
sync
busybox poweroff -f
