# perf/compare/hop.sh - perf/compare.sh hop: system calls and context
# switches per 8-byte all-reduce and rank, 2 processes over loopback TCP,
# kolo and Open MPI: the difference of two runs of ITERS_LO and ITERS_HI
# calls, so that init and teardown cancel out.

# hop_count TOOL ITERS: "syscalls ctxsw" of one 2-process run of ITERS calls.
hop_count() {
  local f=$OUT/$1.$2 args=(-b 8 -e 8 -n "$2" -w 0 -c 0 --inplace 0)
  local cmd=(env "${KOLO_TCP[@]}" "$BUILD/bin/kolo-perf" all_reduce -P 2 "${args[@]}")
  [ "$1" = kolo ] ||
    cmd=("${MPIRUN[@]}" -np 2 "${MPI_TCP[@]}" --mca btl_tcp_if_include lo "$BUILD/bin/kolo-mpi-ref" all_reduce "${args[@]}")
  strace -f -c -o "$f.strace" "${cmd[@]}" > /dev/null 2>&1
  perf stat -x, -e context-switches -o "$f.perf" "${cmd[@]}" > /dev/null 2>&1
  echo "$(awk '$NF == "total" {print $4}' "$f.strace") $(awk -F, '/context-switches/ {print $1}' "$f.perf")"
}

mode_hop() {
  local lo=${ITERS_LO:-2000} hi=${ITERS_HI:-6000} tool s0 s1
  if ! command -v strace > /dev/null || ! command -v perf > /dev/null; then
    header "## hop: SKIP: needs strace and perf"
    return 0
  fi
  need_bins kolo-perf kolo-mpi-ref
  header "## hop: one 8-byte all-reduce, 2 processes, loopback TCP, per call and rank" \
    "#   (runs of $lo and $hi calls, difference / $((hi - lo)) / 2; strace -f -c, perf stat)"
  {
    printf '%-10s %12s %12s\n' tool syscalls ctx_switches
    for tool in kolo mpi; do
      read -r -a s0 <<< "$(hop_count "$tool" "$lo")"
      read -r -a s1 <<< "$(hop_count "$tool" "$hi")"
      awk -v t="$tool" -v a0="${s0[0]}" -v a1="${s1[0]}" -v c0="${s0[1]}" -v c1="${s1[1]}" -v d=$((hi - lo)) \
        'BEGIN {printf "%-10s %12.2f %12.3f\n", t, (a1 - a0) / d / 2, (c1 - c0) / d / 2}'
    done
    echo "# kolo's system calls by name ($hi calls):"
    sed -n '1,12p' "$OUT/kolo.$hi.strace"
    echo "# Open MPI's:"
    sed -n '1,12p' "$OUT/mpi.$hi.strace"
  } | tee "$OUT/summary.txt"
}
