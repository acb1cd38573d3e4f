# perf/compare/ns.sh - perf/compare.sh ns: tcp mode's sweep with every rank
# in a network namespace of its own (veth pairs on a bridge, 10.78.0.0/24).
# Needs root; without it the mode says SKIP.

NS_TAG="knv$$"
NS_LIST=()
ns_cleanup() { local ns; for ns in "${NS_LIST[@]}"; do ip netns del "$ns" 2> /dev/null || true; done; NS_LIST=(); }

ns_about() { echo "one network namespace per rank, veth + bridge; both over TCP on eth0"; }

# 0 when namespaces can be made here; else a SKIP line and 1.
ns_ready() {
  [ -z "$BASE" ] || die "BASE is not run in namespaces"
  if [ "$(id -u)" != 0 ] || ! ip netns add "${NS_TAG}probe" 2> /dev/null; then
    header "## ns: SKIP: network namespaces need root and CAP_NET_ADMIN"
    return 1
  fi
  ip netns del "${NS_TAG}probe"
  at_exit ns_cleanup
}

# N namespaces NS_TAG r0 .. r(N-1) on a bridge in NS_TAG hub: 10.78.0.(i+1).
ns_make() {
  local n=$1 i ns
  ns_cleanup
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

# ns_kolo N FILE: rank i in namespace i, joined from the launcher's variables.
ns_kolo() {
  local n=$1 out=$2 i pids=() rc=0
  for ((i = 0; i < n; i++)); do
    local pin=()
    [ "$BIND" = core ] && pin=(taskset -c "$(cpu_of "$i")")
    ip netns exec "${NS_TAG}r$i" "${pin[@]}" env KOLO_ROOT="10.78.0.1:29511" KOLO_RANK=$i KOLO_WORLD_SIZE=$n \
      KOLO_SECRET=00112233445566778899aabbccddeeff KOLO_SOCKET_IFNAME==eth0 "${KOLO_TCP[@]}" \
      "$BUILD/bin/kolo-perf" "$COLL" "${sweep[@]}" --label "kolo TCP, $n namespaces" \
      $([ "$i" = 0 ] && echo "--json $out.json") > "$out.r$i.txt" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=1; done
  cp "$out.r0.txt" "$out.txt"
  [ $rc = 0 ] || die "kolo failed: $out.r*.txt"
}

# ns_mpi N FILE: mpirun in the first rank's namespace; its rsh agent starts
# each host's daemon in the namespace that host names.
ns_mpi() {
  local n=$1 out=$2 agent=$OUT/netns-agent.sh hosts=$OUT/hosts i pin="" r0=() yield=0 try
  # BIND=core: host rI's daemon, and the rank it starts, on CPU I (mod);
  # mpirun starts host r0's rank itself.
  if [ "$BIND" = core ]; then
    pin="taskset -c \$(echo ${CPUS[*]} | cut -d' ' -f\$((\${h#r} % ${#CPUS[@]} + 1))) "
    r0=(taskset -c "$(cpu_of 0)")
  fi
  printf '#!/bin/sh\n# rsh agent: HOST CMD... -> CMD in namespace %s<HOST>\nh=$1; shift\nexec ip netns exec "%s$h" %ssh -c "$*"\n' \
    "${NS_TAG}" "${NS_TAG}" "$pin" > "$agent"
  chmod +x "$agent"
  for ((i = 0; i < n; i++)); do echo "r$i slots=1"; done > "$hosts"
  # The "hosts" share this machine's CPUs, which mpirun cannot see from the
  # hostfile: with more ranks than CPUs its ranks must yield as they do
  # when mpirun knows they are oversubscribed (tcp mode).
  [ "$n" -gt "$(nproc)" ] && yield=1
  # mpirun's launch through the agent now and then never starts one
  # daemon: bound each try and try once more.
  for try in 1 2; do
    timeout "${MPI_TIMEOUT:-300}" ip netns exec "${NS_TAG}r0" "${r0[@]}" "${MPIRUN[@]}" -np "$n" --hostfile "$hosts" \
      --mca plm_rsh_agent "$agent" --mca mpi_yield_when_idle "$yield" --mca plm_rsh_no_tree_spawn 1 \
      --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 "${MPI_TCP[@]}" \
      "$BUILD/bin/kolo-mpi-ref" "$COLL" "${sweep[@]}" --label "Open MPI TCP, $n namespaces" --json "$out.json" \
      > "$out.txt" 2>&1 && return 0
    [ $? -ne 124 ] && die "Open MPI failed: $out.txt"
    pkill -f "orted.*$agent" 2> /dev/null || true
    echo "# Open MPI's launch in namespaces hung (try $try)" >&2
  done
  die "Open MPI's launch hung twice: $out.txt"
}
