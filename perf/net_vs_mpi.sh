#!/usr/bin/env bash
# kolo's net transport beside Open MPI's TCP transport on this machine, in
# one run, alternating kolo / Open MPI REPEATS times; per size the median
# time of each and their ratio (perf/compare.sh, perf/compare_median.py).
# Parts (PARTS):
#
#   lo    float32 all-reduce, out of place, N in NPROCS processes, 8 B ..
#         MAXBYTES (x FACTOR), over loopback TCP: kolo-perf -P N with
#         KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket, against
#         kolo-mpi-ref under mpirun --mca pml ob1 --mca btl tcp,self
#         (perf/compare.sh tcp).
#   ns    the same with every rank in a network namespace of its own (veth
#         pairs on a bridge, 10.78.0.0/24, as tests/netns/run.sh): kolo's
#         ranks from the launcher's variables (KOLO_ROOT ...), Open MPI's
#         through an rsh agent that enters each rank's namespace.  Needs root.
#   hop   what one 8-byte all-reduce costs each rank between 2 processes over
#         loopback TCP: system calls (strace -f -c) and context switches
#         (perf stat), from two runs of ITERS_LO and ITERS_HI calls, the
#         difference divided by the extra calls and the ranks (init and
#         teardown cancel out); kolo and Open MPI alike.
#   load  4 processes, 8-byte all-reduce over shared memory (kolo's default
#         transport, Open MPI's vader), quiet and beside LOAD busy loops at
#         nice 19 (a fixed stand-in for a low-priority compile), alternating
#         (perf/compare.sh mpi, BUSY=0 then BUSY=LOAD).
#
#   perf/net_vs_mpi.sh                                  # every part
#   PARTS="lo hop" NPROCS=2 REPEATS=5 perf/net_vs_mpi.sh
#   OUT=out/net-frames perf/net_vs_mpi.sh   # keep everything there
#
# Environment: BUILD (build), PARTS ("lo ns hop load"), NPROCS ("2 4"),
# REPEATS (5), ITERS (50), WARMUP (10), MAXBYTES (64M), FACTOR (8), ITERS_LO
# (2000), ITERS_HI (6000), LOAD (2), OUT (a directory; default a temporary
# one).  Every collective run checks its results (-c 1): a wrong element
# fails the script.  Timings decide nothing here: the script reports them.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
PARTS=${PARTS:-lo ns hop load}
NPROCS=${NPROCS:-2 4}
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
MAXBYTES=${MAXBYTES:-64M}
FACTOR=${FACTOR:-8}
ITERS_LO=${ITERS_LO:-2000}
ITERS_HI=${ITERS_HI:-6000}
LOAD=${LOAD:-2}
export BUILD NPROCS REPEATS ITERS WARMUP MAXBYTES FACTOR # perf/compare.sh's
for b in kolo-perf kolo-mpi-ref; do
  [ -x "$BUILD/bin/$b" ] || { echo "net_vs_mpi: $BUILD/bin/$b is missing (scripts/build.sh $BUILD)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "net_vs_mpi: no mpirun (scripts/setup.sh)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d -t kolo-net-vs-mpi.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
KOLO_TCP=(env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket)
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
MPI_TCP=(--mca pml ob1 --mca btl tcp,self)
sweep=(-b 8 -e "$MAXBYTES" -f "$FACTOR" -n "$ITERS" -w "$WARMUP" -c 1 --inplace 0)
{
  echo "# perf/net_vs_mpi.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)"
  echo "# PARTS='$PARTS' NPROCS='$NPROCS' REPEATS=$REPEATS ITERS=$ITERS MAXBYTES=$MAXBYTES FACTOR=$FACTOR"
  echo "# kolo $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); $(mpirun --version 2>&1 | head -1)"
} | tee "$OUT/README.txt"

# ---- lo: loopback TCP (perf/compare.sh tcp) -----------------------------------------------
part_lo() {
  OUT=$OUT/lo perf/compare.sh tcp
}

# ---- ns: network namespaces --------------------------------------------------------------
NS_TAG="knv$$"
NS_LIST=()
ns_cleanup() {
  local ns
  for ns in "${NS_LIST[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap ns_cleanup EXIT

# N namespaces NS_TAG r0 .. r(N-1) on a bridge in NS_TAG hub: 10.78.0.(i+1).
ns_make() {
  local n=$1 i ns
  ip netns add "${NS_TAG}hub" && NS_LIST+=("${NS_TAG}hub")
  ip -n "${NS_TAG}hub" link add br0 type bridge && ip -n "${NS_TAG}hub" link set br0 up
  for ((i = 0; i < n; i++)); do
    ns="${NS_TAG}r$i"
    ip netns add "$ns" && NS_LIST+=("$ns")
    ip -n "${NS_TAG}hub" link add "v$i" type veth peer name eth0 netns "$ns"
    ip -n "${NS_TAG}hub" link set "v$i" master br0 up
    ip -n "$ns" addr add "10.78.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# kolo: rank i in namespace i, joined from the launcher's variables.
ns_kolo() {
  local n=$1 out=$2 label=$3 i pids=() rc=0
  for ((i = 0; i < n; i++)); do
    ip netns exec "${NS_TAG}r$i" env KOLO_ROOT="10.78.0.1:29511" KOLO_RANK=$i KOLO_WORLD_SIZE=$n \
      KOLO_SECRET=00112233445566778899aabbccddeeff KOLO_SOCKET_IFNAME==eth0 KOLO_NET_FORCE=1 KOLO_NET=socket \
      KOLO_SHM_DISABLE=1 "$BUILD/bin/kolo-perf" all_reduce "${sweep[@]}" --label "$label" \
      $([ "$i" = 0 ] && echo "--json $out.json") > "$out.r$i.txt" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=1; done
  cp "$out.r0.txt" "$out.txt"
  return $rc
}

# Open MPI: mpirun in the hub's first rank namespace; its rsh agent starts
# each host's daemon in the namespace that host names.
ns_mpi() {
  local n=$1 out=$2 label=$3 agent=$OUT/ns/netns-agent.sh hosts=$OUT/ns/hosts i
  printf '#!/bin/sh\n# rsh agent: HOST CMD... -> CMD in namespace %s<HOST>\nh=$1; shift\nexec ip netns exec "%s$h" sh -c "$*"\n' \
    "${NS_TAG}" "${NS_TAG}" > "$agent"
  chmod +x "$agent"
  : > "$hosts"
  for ((i = 0; i < n; i++)); do echo "r$i slots=1" >> "$hosts"; done
  # The "hosts" share this machine's CPUs, which mpirun cannot see from the
  # hostfile: with more ranks than CPUs its ranks must yield as they do
  # when mpirun knows they are oversubscribed (the lo part).
  local yield=0
  [ "$n" -gt "$(nproc)" ] && yield=1
  # mpirun's launch through the agent now and then never starts one
  # daemon: bound each try and try once more.
  local try
  for try in 1 2; do
    ns_mpi_once "$n" "$out" "$label" "$agent" "$hosts" "$yield" && return 0
    [ $? -ne 124 ] && return 1
    pkill -f "orted.*$agent" 2>/dev/null || true
    echo "# Open MPI's launch in namespaces hung (try $try)" >&2
  done
  return 1
}

ns_mpi_once() {
  local n=$1 out=$2 label=$3 agent=$4 hosts=$5 yield=$6
  timeout "${MPI_TIMEOUT:-300}" ip netns exec "${NS_TAG}r0" "${MPI[@]}" -np "$n" --hostfile "$hosts" --mca plm_rsh_agent "$agent" \
    --mca mpi_yield_when_idle "$yield" \
    --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 "${MPI_TCP[@]}" \
    "$BUILD/bin/kolo-mpi-ref" all_reduce "${sweep[@]}" --label "$label" --json "$out.json" > "$out.txt" 2>&1
}

part_ns() {
  local n i dir=$OUT/ns
  mkdir -p "$dir"
  if [ "$(id -u)" != 0 ] || ! ip netns add "${NS_TAG}probe" 2>/dev/null; then
    echo "## ns: SKIP: network namespaces need root and CAP_NET_ADMIN" | tee "$dir/summary.txt"
    return 0
  fi
  ip netns del "${NS_TAG}probe"
  for n in $NPROCS; do
    ns_cleanup
    NS_LIST=()
    ns_make "$n"
    mkdir -p "$dir/n$n"
    for i in $(seq 1 "$REPEATS"); do
      ns_kolo "$n" "$dir/n$n/kolo.$i" "kolo TCP, $n namespaces" || { echo "ns: kolo failed: $dir/n$n/kolo.$i.r*.txt"; exit 1; }
      ns_mpi "$n" "$dir/n$n/mpi.$i" "Open MPI TCP, $n namespaces" || { echo "ns: Open MPI failed: $dir/n$n/mpi.$i.txt"; exit 1; }
    done
    echo "## ns: one network namespace per rank, veth + bridge"
    python3 perf/compare_median.py "$dir/n$n" "$REPEATS" kolo mpi | tee "$dir/n$n/summary.txt"
  done
}

# ---- hop: system calls and context switches per call ---------------------------------------
# count TOOL ITERS: "syscalls ctxsw" of one 2-process run of ITERS 8-byte calls.
count() {
  local tool=$1 iters=$2 f=$OUT/hop/$1.$2 args=(-b 8 -e 8 -n "$2" -w 0 -c 0 --inplace 0) cmd
  if [ "$tool" = kolo ]; then cmd=("${KOLO_TCP[@]}" "$BUILD/bin/kolo-perf" all_reduce -P 2 "${args[@]}")
  else cmd=("${MPI[@]}" -np 2 "${MPI_TCP[@]}" --mca btl_tcp_if_include lo "$BUILD/bin/kolo-mpi-ref" all_reduce "${args[@]}")
  fi
  strace -f -c -o "$f.strace" "${cmd[@]}" > /dev/null 2>&1
  perf stat -x, -e context-switches -o "$f.perf" "${cmd[@]}" > /dev/null 2>&1
  local calls ctx
  calls=$(awk '$NF == "total" {print $4}' "$f.strace")
  ctx=$(awk -F, '/context-switches/ {print $1}' "$f.perf")
  echo "$calls $ctx"
}

part_hop() {
  mkdir -p "$OUT/hop"
  command -v strace >/dev/null && command -v perf >/dev/null || {
    echo "## hop: SKIP: needs strace and perf" | tee "$OUT/hop/summary.txt"; return 0; }
  {
    echo "## hop: one 8-byte all-reduce, 2 processes, loopback TCP, per call and rank"
    echo "#   (runs of $ITERS_LO and $ITERS_HI calls, difference / $((ITERS_HI - ITERS_LO)) / 2; strace -f -c, perf stat)"
    printf '%-10s %12s %12s\n' tool syscalls ctx_switches
    local tool lo hi
    for tool in kolo mpi; do
      read -r -a lo <<< "$(count "$tool" "$ITERS_LO")"
      read -r -a hi <<< "$(count "$tool" "$ITERS_HI")"
      awk -v t="$tool" -v s0="${lo[0]}" -v s1="${hi[0]}" -v c0="${lo[1]}" -v c1="${hi[1]}" -v d=$((ITERS_HI - ITERS_LO)) \
        'BEGIN {printf "%-10s %12.2f %12.3f\n", t, (s1 - s0) / d / 2, (c1 - c0) / d / 2}'
    done
    echo "# kolo's system calls by name ($ITERS_HI calls):"
    sed -n '1,12p' "$OUT/hop/kolo.$ITERS_HI.strace"
    echo "# Open MPI's:"
    sed -n '1,12p' "$OUT/hop/mpi.$ITERS_HI.strace"
  } | tee "$OUT/hop/summary.txt"
}

# ---- load: shared memory beside busy loops (perf/compare.sh mpi, quiet then BUSY) -----------------
part_load() {
  local busy
  for busy in 0 "$LOAD"; do
    echo "## load: 4 processes, 8-byte all-reduce over shared memory, $busy busy loops at nice 19"
    OUT=$OUT/load/busy$busy NPROCS=4 MAXBYTES=8 ITERS=2000 WARMUP=200 BUSY=$busy perf/compare.sh mpi
  done
}

for part in $PARTS; do "part_$part"; done
echo "# results in $OUT"
