# perf/compare/ibframes.sh - perf/compare.sh ibframes: kolo's collectives
# over ib beside perftest in the soft-RoCE guest, one boot (perf/rxe_guest.sh,
# MODE=frames), then the medians over rounds and the ratios of figures taken
# in the same round.  Settings: docs/benchmarking.md.
. perf/compare/ib.sh

mode_ibframes() {
  set +e
  local work fail=0
  rxe_ready "$BUILD/bin/kolo-perf" || return 1
  work=$(mktemp -d /tmp/kolo-ibf.XXXXXX)
  printf '%s\n' MODE=frames "BIN=$BUILD/bin" "REPEATS=${REPEATS:-3}" "AR_N=${AR_N:-1000}" "SR_N=${SR_N:-10}" \
    "LAT_N=${LAT_N:-2000}" "BW_N=${BW_N:-200}" "SIZES=\"${SIZES:-8 512 32768 65536 262144 2097152}\"" \
    "BASE_BIN=${BASE_BIN:-}" > "$work/rxe.env"
  header "# BUILD=$BUILD $(tr '\n' ' ' < "$work/rxe.env"); host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  rxe_boot "$work" KOLO-IBF "${RXE_TIMEOUT:-1800}" || fail=1
  ibframes_summary "$OUT/rxe.txt" | tee "$OUT/summary.txt"
  return $fail
}

# The medians over rounds, and the ratios of figures taken in the same round.
ibframes_summary() {
  awk '
    $1 == "repeat" { r = $2; next }
    # a figure measured twice in a repeat (perftest before and after kolo): their mean
    $3 != "" && $3 != "?" { key = $1 " " $2; sum[key, r] += $3; cnt[key, r]++; v[key, r] = sum[key, r] / cnt[key, r]
      if ($1 == "ib_write_lat_us" && $2 == 8) { lat[r] += $3; nl[r]++ }
      keys[key] = 1; if (r > R) R = r }
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return n ? a[int((n + 1) / 2)] : 0 }
    # rat(a, b, h): the median over repeats of a / (b / h) in one repeat, their number in n; b "lat":
    # the mean ib_write_lat 8 B of that repeat
    function rat(a, b, h,   i, t) { n = 0; for (i = 1; i <= R; i++) if ((b == "lat" ? nl[i] : 1) && (a, i) in v && (b == "lat" ? 1 : v[b, i]))
        x[++n] = v[a, i] / (b == "lat" ? lat[i] / nl[i] : v[b, i] / (h ? h : 1))
      t = med(x, n); delete x; return t }
    END {
      for (k in keys) { n = 0; for (i = 1; i <= R; i++) if ((k, i) in v) x[++n] = v[k, i]; m[k] = med(x, n); delete x }
      printf "%-34s %10s\n", "figure (median over repeats)", "value"
      for (k in keys) printf "%-34s %10s\n", k, m[k] | "sort"
      close("sort")
      printf "\nall-reduce 8 B (median call) / ib_write_lat 8 B (typical), same repeat: median %.2f\n", rat("kolo_allreduce_p50_us 8", "lat")
      t = rat("base_allreduce_p50_us 8", "lat"); if (n) printf "BASE_BIN all-reduce 8 B (median call) / ib_write_lat 8 B: median %.2f\n", t
      printf "provider ping-pong 8 B / ib_write_lat 8 B: median %.2f\n", rat("kolo_ib_pingpong_p50_us 8", "lat")
      printf "kolo-perf net --bw 64 KiB / ib_write_bw 64 KiB: median %.2f\n", rat("kolo_net_bw_MBps 65536", "ib_write_bw_MBps 65536")
      printf "provider alone (IbBench) 64 KiB / ib_write_bw 64 KiB: median %.2f\n", rat("kolo_ib_bw_MBps 65536", "ib_write_bw_MBps 65536")
      # perftest -b reports both directions together: a direction is half
      for (k in keys) if (k ~ /^kolo_sendrecv_MBps/) { split(k, p, " "); s = p[2]; t = rat(k, "ib_write_bw_bidir_MBps " s, 2)
        if (n) printf "sendrecv %s B, one direction / (ib_write_bw -b %s B / 2): median %.2f; / ib_write_bw one way: %.2f\n", s, s, t, rat(k, "ib_write_bw_MBps " s) }
    }' "$1"
}
