#!/usr/bin/env bash
# kolo's network path beside the reference tools, on the same devices in one
# run:
#
#   socket: two network namespaces joined by one veth pair (10.78.0.1 <->
#   10.78.0.2), and on them, REPEATS times each:
#     iperf3 -c (IPERF_STREAMS streams, IPERF_TIME s,         the ceiling
#       IPERF_LEN bytes a write)
#     iperf3 -c --bidir                                      both ways at once: the
#                                                            ceiling of a 2-rank ring, whose
#                                                            ranks each send and receive
#     kolo-perf net -P socket --bw -s SIZE                   kolo's provider, point to point
#     kolo-perf net -P socket --bidir -s SIZE                the same both ways at once
#     kolo-perf net -P socket --lat -s LAT_SIZE              its half round trip
#     kolo-perf all_reduce -b SIZE -e SIZE, 2 ranks, one in each namespace
#   then the medians and the ratios: socket p2p bandwidth / iperf3, all-reduce
#   busbw / socket p2p bandwidth.
#
#   ib (RDMA=auto|1|0, default auto): the soft-RoCE guest of tests/rdma
#   (rxe0 <-> rxe1 over a veth pair, software emulation) runs ib_write_bw
#   -s 65536 and ib_write_lat (and, for reference, ib_send_lat: completions on
#   both sides, as kolo's receiver) beside kolo-perf net -P ib at the same sizes,
#   REPEATS times (perf/rxe_guest.sh, MODE=net), and the ratios to
#   ib_write_bw and ib_write_lat.  Skipped with the reason
#   when kolo was built without libibverbs or the VM is not set up
#   (tests/rdma/setup.sh); RDMA=1 makes a skip an error.
#
#   sudo perf/run_net.sh                  # needs root (namespaces); builds kolo-perf in $BUILD if missing
#   BUILD=build-net REPEATS=5 RDMA=0 perf/run_net.sh
#   SOCKET=0 RDMA=1 REPEATS=5 perf/run_net.sh          # the ib half alone (no root needed)
#   SOCKET=0 RDMA=1 BASE_PERF_BIN=old/bin/kolo-perf perf/run_net.sh
#                                         # ib: an older kolo-perf too, interleaved in the same boot
#
# Environment: BUILD (build), PERF_BIN (a kolo-perf to use instead of
# $BUILD/bin/kolo-perf), REPEATS (3), SIZE (64M), NET_ITERS (messages of
# kolo-perf net's bandwidth runs: 1 GiB worth, 8..20000, so that a run
# lasts about as long at every SIZE, as iperf3's IPERF_TIME does),
# LAT_SIZE (8), AR_ITERS (10), AR_WARMUP (3), IPERF_TIME (5),
# IPERF_STREAMS (1), IPERF_LEN (iperf3's own: 128K over TCP; at most 1M in
# iperf3 3.12; set it to SIZE to compare at one message size), SOCKET (1; 0 leaves out the socket half), RDMA (auto),
# BASE_PERF_BIN (ib: a second kolo-perf, e.g. a build of an older commit, run
# right after $PERF_BIN in every repeat: before/after in the same boot),
# RXE_BW_N (2000), RXE_LAT_N (1000),
# RXE_TIMEOUT (600 s for the guest), OUT (raw results and summary.txt; default a temp dir),
# plus KOLO_* variables for kolo (e.g. KOLO_SOCKET_NSTREAMS).
# Exit status: 0 when everything ran and no byte was wrong, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
REPEATS=${REPEATS:-3}
SIZE=${SIZE:-64M}
SIZE_BYTES=$(numfmt --from=iec "$SIZE" 2>/dev/null) || { echo "run_net: SIZE=$SIZE is not a size (e.g. 128K, 64M)" >&2; exit 1; }
NET_ITERS=${NET_ITERS:-$(( (1 << 30) / SIZE_BYTES < 8 ? 8 : (1 << 30) / SIZE_BYTES > 20000 ? 20000 : (1 << 30) / SIZE_BYTES ))}
LAT_SIZE=${LAT_SIZE:-8}
AR_ITERS=${AR_ITERS:-10}
AR_WARMUP=${AR_WARMUP:-3}
IPERF_TIME=${IPERF_TIME:-5}
IPERF_STREAMS=${IPERF_STREAMS:-1}
IPERF_LEN=${IPERF_LEN:-}
IPERF_L=()
[ -z "$IPERF_LEN" ] || IPERF_L=(-l "$IPERF_LEN")
RDMA=${RDMA:-auto}
SOCKET=${SOCKET:-1}
PERF=${PERF_BIN:-$ROOT/$BUILD/bin/kolo-perf}
BASE_PERF=${BASE_PERF_BIN:-}
[ -z "$BASE_PERF" ] || BASE_PERF=$(realpath "$BASE_PERF")

die() { echo "run_net: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "needs python3"
if [ "$SOCKET" != 0 ]; then
  [ "$(id -u)" = 0 ] || die "network namespaces need root (running as uid $(id -u); SOCKET=0 runs the ib half alone)"
  command -v ip >/dev/null || die "needs ip"
  command -v iperf3 >/dev/null || scripts/setup.sh
  command -v iperf3 >/dev/null || die "no iperf3 (scripts/setup.sh installs it)"
fi
[ -z "$BASE_PERF" ] || [ -x "$BASE_PERF" ] || die "BASE_PERF_BIN=$BASE_PERF is not an executable"
if [ ! -x "$PERF" ]; then
  [ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target kolo-perf > /dev/null || die "kolo-perf does not build"
fi

OUT=${OUT:-$(mktemp -d -t kolo-net.XXXXXX)}
mkdir -p "$OUT"
TAG="knp$$"
NSA="${TAG}a" NSB="${TAG}b"
A=10.78.0.1 B=10.78.0.2
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ "$SOCKET" = 0 ] && return
  ip netns del "$NSA" 2>/dev/null
  ip netns del "$NSB" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail=0
# ---- socket: two network namespaces ----------------------------------------------
if [ "$SOCKET" != 0 ]; then
ip netns add "$NSA" && ip netns add "$NSB" || die "cannot create network namespaces"
ip -n "$NSA" link add eth0 type veth peer name eth0 netns "$NSB" || die "cannot create a veth pair"
ip -n "$NSA" addr add $A/24 dev eth0 && ip -n "$NSB" addr add $B/24 dev eth0 || die "cannot set addresses"
for ns in "$NSA" "$NSB"; do
  ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || die "cannot bring up $ns's links"
done
inA() { ip netns exec "$NSA" "$@"; }
inB() { ip netns exec "$NSB" "$@"; }

# Ranks in two namespaces of one machine share its hostname and boot id:
# tell them apart (KOLO_HOSTID where bootstrap has it), else force the net
# transport for every peer in another process, as tests/netns/run.sh does.
# (grep reads all: with pipefail, grep -q's early exit would fail the pipe.)
if "$PERF" --params 2>/dev/null | grep KOLO_HOSTID > /dev/null; then
  HOSTS=(KOLO_HOSTID=nsA KOLO_HOSTID=nsB)
else
  HOSTS=(KOLO_NET_FORCE=1 KOLO_NET_FORCE=1)
fi
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# run_bg NS LOG CMD...: a background job in namespace NS, remembered for cleanup.
run_bg() { local ns=$1 log=$2; shift 2; ip netns exec "$ns" "$@" > "$log" 2>&1 & PIDS+=($!); }
wait_last() { local p=${PIDS[-1]}; wait "$p"; local rc=$?; unset 'PIDS[-1]'; return $rc; }

echo "# kolo socket path vs iperf3 on one veth pair between 2 namespaces ($(nproc) cores); raw results in $OUT"
echo "# ${HOSTS[0]%%=*} tells the namespaces apart; SIZE=$SIZE, REPEATS=$REPEATS"
for i in $(seq 1 "$REPEATS"); do
  echo "# run $i/$REPEATS: iperf3 ($IPERF_STREAMS stream(s), ${IPERF_TIME}s${IPERF_LEN:+, -l $IPERF_LEN})"
  # Servers wait for one client: bounded, in case their client never comes.
  run_bg "$NSB" "$OUT/iperf3-server.$i.log" timeout 120 iperf3 -s -1 -B $B -p 5201
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    inA iperf3 -c $B -p 5201 -t "$IPERF_TIME" -P "$IPERF_STREAMS" "${IPERF_L[@]}" -J > "$OUT/iperf3.$i.json" 2>&1 && break
    grep -q "unable to connect\|Connection refused" "$OUT/iperf3.$i.json" || break
  done
  wait_last || { echo "run_net: iperf3 failed, see $OUT/iperf3.$i.json"; fail=1; }
  echo "# run $i/$REPEATS: iperf3 --bidir"
  run_bg "$NSB" "$OUT/iperf3-bidir-server.$i.log" timeout 120 iperf3 -s -1 -B $B -p 5202
  for try in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    inA iperf3 -c $B -p 5202 -t "$IPERF_TIME" -P "$IPERF_STREAMS" "${IPERF_L[@]}" --bidir -J > "$OUT/iperf3-bidir.$i.json" 2>&1 && break
    grep -q "unable to connect\|Connection refused" "$OUT/iperf3-bidir.$i.json" || break
  done
  wait_last || { echo "run_net: iperf3 --bidir failed, see $OUT/iperf3-bidir.$i.json"; fail=1; }

  echo "# run $i/$REPEATS: kolo-perf net -P socket --bw and --bidir -s $SIZE, --lat -s $LAT_SIZE"
  for t in bw bidir lat; do
    case $t in
      bw) args=(--bw -s "$SIZE" -n "$NET_ITERS");;
      bidir) args=(--bidir -s "$SIZE" -n "$NET_ITERS");;
      lat) args=(--lat -s "$LAT_SIZE");;
    esac
    run_bg "$NSB" "$OUT/net-$t-server.$i.log" timeout 300 "$PERF" net --server -P socket -p 18600
    inA "$PERF" net -P socket "${args[@]}" --json "$OUT/net-$t.$i.json" $B:18600 > "$OUT/net-$t.$i.txt" 2>&1 ||
      { echo "run_net: kolo-perf net ($t) failed:"; cat "$OUT/net-$t.$i.txt"; fail=1; }
    wait_last || { echo "run_net: its server failed:"; cat "$OUT/net-$t-server.$i.log"; fail=1; }
  done

  echo "# run $i/$REPEATS: kolo-perf all_reduce -b $SIZE, rank 0 in $NSA, rank 1 in $NSB"
  for r in 0 1; do
    ns=$NSA; [ $r = 1 ] && ns=$NSB
    run_bg "$ns" "$OUT/ar.$i.r$r.txt" env KOLO_ROOT=$A:29500 KOLO_RANK=$r KOLO_WORLD_SIZE=2 \
      KOLO_SECRET="$SECRET" KOLO_SOCKET_IFNAME==eth0 KOLO_NET=socket "${HOSTS[$r]}" KOLO_TIMEOUT_MS=60000 \
      timeout 600 "$PERF" all_reduce -b "$SIZE" -e "$SIZE" -n "$AR_ITERS" -w "$AR_WARMUP" -c 1 \
      --json "$OUT/ar.$i.r$r.json"
  done
  for r in 1 0; do
    wait_last || { echo "run_net: all_reduce rank $r failed:"; cat "$OUT/ar.$i.r$r.txt"; fail=1; }
  done
done
fi

# ---- ib: the soft-RoCE guest -------------------------------------------------------
rxe=skip
rxe_why=
if [ "$RDMA" = 0 ]; then
  rxe_why="RDMA=0"
elif ! "$PERF" net --list | grep -x ib > /dev/null; then
  rxe_why="kolo was built without libibverbs (kolo-perf net --list has no ib)"
elif ! tests/rdma/setup.sh > "$OUT/rxe-setup.log" 2>&1; then
  rxe_why="the soft-RoCE VM cannot be set up here (see $OUT/rxe-setup.log)"
else
  rxe=run
fi
if [ $rxe = run ]; then
  echo "# ib: booting the soft-RoCE guest (rxe0 <-> rxe1; software emulation, limit ${RXE_TIMEOUT:-600}s)"
  WORK=$(mktemp -d /tmp/kolo-net-rxe.XXXXXX)
  cat > "$WORK/rxe.env" <<ENV
MODE=net
KOLO_PERF=$PERF
KOLO_PERF_BASE=$BASE_PERF
REPEATS=$REPEATS
BW_N=${RXE_BW_N:-2000}
LAT_N=${RXE_LAT_N:-1000}
LAT_SIZE=$LAT_SIZE
ENV
  chmod -R a+rX "$WORK"
  tests/rdma/vm.sh -t "${RXE_TIMEOUT:-600}" -C "$WORK" -l "$OUT/rxe-console.log" perf/rxe_guest.sh
  vrc=$?
  rm -rf "$WORK"
  tr -d '\r' < "$OUT/rxe-console.log" | sed -n 's/^KOLO-NET: //p' > "$OUT/rxe.txt"
  if [ $vrc != 0 ]; then
    echo "run_net: the soft-RoCE guest failed (rc $vrc); console: $OUT/rxe-console.log"
    tr -d '\r' < "$OUT/rxe-console.log" | grep -v "^KOLO-NET: " | tail -n 20
    fail=1
  fi
else
  echo "# ib: SKIP: $rxe_why"
  [ "$RDMA" = 1 ] && fail=1
fi

# The summary, also kept beside the raw results.
python3 - "$OUT" "$REPEATS" "$SIZE" "$LAT_SIZE" "$rxe" "$SOCKET" <<'PY' | tee "$OUT/summary.txt" || fail=1
import json, math, os, statistics, sys
out, repeats, size, lat_size, rxe = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
socket = sys.argv[6] != "0"
def load(name):
    runs = []
    for i in range(1, repeats + 1):
        try:
            runs.append(json.load(open(f"{out}/{name}.{i}.json")))
        except (OSError, ValueError):
            pass
    return runs
def med(v):
    return statistics.median(v) if v else float("nan")

iperf = [r["end"]["sum_received"]["bits_per_second"] / 8e9 for r in load("iperf3") if "end" in r]
# --bidir: the mean of the two directions' received rates (each direction's share)
bidir = [(r["end"]["sum_received"]["bits_per_second"] + r["end"]["sum_received_bidir_reverse"]["bits_per_second"])
         / 2 / 8e9 for r in load("iperf3-bidir") if "sum_received_bidir_reverse" in r.get("end", {})]
nbw = [r["results"][0]["bw_GBps"] for r in load("net-bw")]
nbidir = [r["results"][0]["bw_GBps"] for r in load("net-bidir")]
nlat = [(r["results"][0]["lat_p50_us"], r["results"][0]["lat_p99_us"]) for r in load("net-lat")]
wrong = sum(x["wrong"] for r in load("net-bw") + load("net-bidir") + load("net-lat") for x in r["results"])
ar = [json.load(open(f"{out}/ar.{i}.r0.json")) for i in range(1, repeats + 1) if os.path.exists(f"{out}/ar.{i}.r0.json")]
arbus = [x["busbw"] for r in ar for x in r["results"] if not x.get("in_place", False)]
arbus_ip = [x["busbw"] for r in ar for x in r["results"] if x.get("in_place", False)]
wrong += sum(x["wrong"] for r in ar for x in r["results"])

fmt = lambda v: ", ".join(f"{x:.3f}" for x in v)
# The same ratios within each run (a busy machine moves every figure of a
# run together): the median of the per-run ratios.
def paired(num, den):
    return med([a / b for a, b in zip(num, den) if b > 0]) if len(num) == len(den) and num else float("nan")
if socket:
    print()
    print(f"# socket path, veth pair between 2 namespaces: medians of {repeats} runs (GB = 1e9 bytes)")
    print(f"#   iperf3                               {med(iperf):8.3f} GB/s   runs: {fmt(iperf)}")
    print(f"#   iperf3 --bidir, per direction        {med(bidir):8.3f} GB/s   runs: {fmt(bidir)}")
    print(f"#   kolo-perf net -P socket, {size:>4} bw     {med(nbw):8.3f} GB/s   runs: {fmt(nbw)}")
    print(f"#   kolo-perf net -P socket, {size:>4} bidir  {med(nbidir):8.3f} GB/s   runs: {fmt(nbidir)}   (per direction)")
    print(f"#   kolo-perf net -P socket, {lat_size:>4} B lat  {med([l[0] for l in nlat]):8.2f} us p50, "
          f"{med([l[1] for l in nlat]):.2f} us p99 (half round trip)")
    print(f"#   kolo all_reduce 2 ranks, {size:>4} busbw  {med(arbus):8.3f} GB/s   runs: {fmt(arbus)}"
          f"   (in place {med(arbus_ip):.3f})")
    r1 = med(nbw) / med(iperf) if iperf and nbw else float("nan")
    r2 = med(arbus) / med(nbw) if arbus and nbw else float("nan")
    print(f"# ratio socket p2p / iperf3          = {r1:5.2f}")
    print(f"# ratio all-reduce busbw / socket p2p = {r2:5.2f}")
    r3 = med(arbus) / med(bidir) if arbus and bidir else float("nan")
    r4 = med(arbus) / med(nbidir) if arbus and nbidir else float("nan")
    r5 = med(nbidir) / med(bidir) if nbidir and bidir else float("nan")
    print(f"#   the same within each run, median: {paired(nbw, iperf):5.2f} and {paired(arbus, nbw):5.2f}")
    print(f"# for reference (a 2-rank ring moves {size} each way at once, so both-ways figures are its ceiling):")
    print(f"#   all-reduce busbw / kolo-perf net --bidir  = {r4:5.2f}   (within each run: {paired(arbus, nbidir):5.2f})")
    print(f"#   all-reduce busbw / iperf3 --bidir         = {r3:5.2f}")
    print(f"#   kolo-perf net --bidir / iperf3 --bidir    = {r5:5.2f}")

if rxe == "run":
    # name -> {repeat: value}.  A figure that is not a finite number (perftest
    # prints "inf" when its clock misreads) is left out, and said.
    vals, byrep, dropped, rep = {}, {}, [], 0
    for line in open(f"{out}/rxe.txt"):
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "repeat":
            rep = int(parts[1]) if parts[1].isdigit() else rep + 1
            continue
        if len(parts) >= 2:
            try:
                x = float(parts[1])
            except ValueError:
                continue
            if math.isfinite(x):
                byrep.setdefault(parts[0], {})[rep] = x
                vals.setdefault(parts[0], []).append(x)
            else:
                dropped.append(f"{parts[0]} (repeat {rep}): {parts[1]}")
    g = lambda k: med(vals.get(k, []))
    v = lambda k: vals.get(k, [])
    def paired_rep(num, den):  # per-repeat ratios, over the repeats that have both figures
        a, b = byrep.get(num, {}), byrep.get(den, {})
        return med([a[r] / b[r] for r in sorted(a) if r in b and b[r] > 0])
    f2 = lambda x: ", ".join(f"{y:.2f}" for y in x)
    print()
    print(f"# ib, soft-RoCE rxe1 -> rxe0 in the QEMU guest: medians of {len(v('ib_write_bw_MBps'))} runs")
    print(f"#   ib_write_bw -s 65536                 {g('ib_write_bw_MBps'):9.2f} MB/s (1e6; perftest's 2^20 figure converted)   runs: {f2(v('ib_write_bw_MBps'))}")
    print(f"#   kolo-perf net -P ib --bw -s 65536    {g('kolo_ib_bw_MBps'):9.2f} MB/s   runs: {f2(v('kolo_ib_bw_MBps'))}")
    if v('base_ib_bw_MBps'):
        print(f"#   the same, BASE_PERF_BIN              {g('base_ib_bw_MBps'):9.2f} MB/s   runs: {f2(v('base_ib_bw_MBps'))}")
    print(f"#   ib_write_lat -s {lat_size:<5}                {g('ib_write_lat_us'):9.2f} us typical   runs: {f2(v('ib_write_lat_us'))}")
    print(f"#   kolo-perf net -P ib --lat -s {lat_size:<5}   {g('kolo_ib_lat_us'):9.2f} us median   runs: {f2(v('kolo_ib_lat_us'))}")
    if v('base_ib_lat_us'):
        print(f"#   the same, BASE_PERF_BIN              {g('base_ib_lat_us'):9.2f} us median   runs: {f2(v('base_ib_lat_us'))}")
    if v('ib_send_lat_us'):
        print(f"#   ib_send_lat -s {lat_size:<5}                 {g('ib_send_lat_us'):9.2f} us typical   runs: {f2(v('ib_send_lat_us'))}"
              "   (completions on both sides, as kolo)")
    b = g('kolo_ib_bw_MBps') / g('ib_write_bw_MBps') if v('ib_write_bw_MBps') else float("nan")
    l = g('kolo_ib_lat_us') / g('ib_write_lat_us') if v('ib_write_lat_us') else float("nan")
    print(f"# ratio ib bw / ib_write_bw   = {b:5.2f};"
          f" within each run, median: {paired_rep('kolo_ib_bw_MBps', 'ib_write_bw_MBps'):5.2f}")
    print(f"# ratio ib lat / ib_write_lat = {l:5.2f};"
          f" within each run, median: {paired_rep('kolo_ib_lat_us', 'ib_write_lat_us'):5.2f}")
    if v('ib_send_lat_us'):
        print(f"#   for reference: ib_send_lat / ib_write_lat = {paired_rep('ib_send_lat_us', 'ib_write_lat_us'):5.2f},"
              f" kolo lat / ib_send_lat = {paired_rep('kolo_ib_lat_us', 'ib_send_lat_us'):5.2f} (within each run, median)")
    if v('base_ib_bw_MBps') or v('base_ib_lat_us'):
        print(f"# BASE_PERF_BIN, the same ratios: bw {med(v('base_ib_bw_MBps')) / g('ib_write_bw_MBps'):5.2f}"
              f" (within each run {paired_rep('base_ib_bw_MBps', 'ib_write_bw_MBps'):5.2f}),"
              f" lat {med(v('base_ib_lat_us')) / g('ib_write_lat_us'):5.2f}"
              f" (within each run {paired_rep('base_ib_lat_us', 'ib_write_lat_us'):5.2f})")
    if dropped:
        print(f"# left out (not finite): {'; '.join(dropped)}")
    wrong += int(sum(vals.get("kolo_ib_wrong", [])))
print(f"# #wrong bytes over all kolo runs: {wrong}")
sys.exit(1 if wrong else 0)
PY
exit $fail
