#!/usr/bin/env bash
# kolo's ib provider beside perftest in the soft-RoCE guest (tests/rdma), one
# boot: perf/rxe_guest.sh (MODE=frames) says what runs.  Prints every figure per
# repeat, then the medians over repeats and the ratios: 2-rank 8 B
# all-reduce (median call) / ib_write_lat (typical); bandwidth / ib_write_bw
# (kolo-perf net one way at 64 KiB; kolo-perf sendrecv, both ways at once,
# against ib_write_bw -b).
# Soft-RoCE under software emulation: compare within one boot only.
#   perf/run_ib_frames.sh [OUT_DIR]        (needs tests/rdma/setup.sh done; root)
# Env: BUILD (build), REPEATS (3), AR_N (1000), SR_N (10), LAT_N (2000),
#      BW_N (200), SIZES, RXE_TIMEOUT (1800 s), BASE_BIN (an older build's
#      bin/: its 8 B all-reduce runs beside, in every repeat).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
OUT=${1:-$(mktemp -d /tmp/kolo-ib-frames.XXXXXX)}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/kolo-ibf.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/rxe.env" <<ENV
MODE=frames
BIN=$ROOT/$BUILD/bin
REPEATS=${REPEATS:-3}
AR_N=${AR_N:-1000}
SR_N=${SR_N:-10}
LAT_N=${LAT_N:-2000}
BW_N=${BW_N:-200}
SIZES="${SIZES:-8 512 32768 65536 262144 2097152}"
BASE_BIN=${BASE_BIN:-}
ENV
chmod -R a+rX "$WORK"
{ echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(uname -n), host load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# BUILD=$BUILD $(tr '\n' ' ' < "$WORK/rxe.env")"; } > "$OUT/run.txt"
tests/rdma/vm.sh -t "${RXE_TIMEOUT:-1800}" -C "$WORK" -l "$OUT/console.log" perf/rxe_guest.sh; rc=$?
tr -d '\r' < "$OUT/console.log" | sed -n 's/^KOLO-IBF: //p' > "$OUT/figures.txt"
echo "# guest rc $rc" >> "$OUT/run.txt"
# The summary: medians over repeats, and the ratios of figures taken in the
# same repeat.
awk '
  $1 == "repeat" { r = $2; next }
  # a figure measured twice in a repeat (perftest before and after kolo): their mean
  $3 != "" && $3 != "?" { key = $1 " " $2; sum[key, r] += $3; cnt[key, r]++; v[key, r] = sum[key, r] / cnt[key, r]
    if ($1 == "ib_write_lat_us" && $2 == 8) { lat[r] += $3; nl[r]++ }
    keys[key] = 1; if (r > R) R = r }
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return n ? a[int((n + 1) / 2)] : 0 }
  END {
    for (k in keys) { n = 0; for (i = 1; i <= R; i++) if ((k, i) in v) x[++n] = v[k, i]; m[k] = med(x, n); delete x }
    printf "%-34s %10s\n", "figure (median over repeats)", "value"
    for (k in keys) printf "%-34s %10s\n", k, m[k] | "sort"
    close("sort")
    n = 0; for (i = 1; i <= R; i++) if (nl[i] && ("kolo_allreduce_p50_us 8", i) in v) x[++n] = v["kolo_allreduce_p50_us 8", i] / (lat[i] / nl[i])
    printf "\nall-reduce 8 B (median call) / ib_write_lat 8 B (typical), same repeat: median %.2f\n", med(x, n); delete x
    n = 0; for (i = 1; i <= R; i++) if (nl[i] && ("base_allreduce_p50_us 8", i) in v) x[++n] = v["base_allreduce_p50_us 8", i] / (lat[i] / nl[i])
    if (n) printf "BASE_BIN all-reduce 8 B (median call) / ib_write_lat 8 B: median %.2f\n", med(x, n); delete x
    n = 0; for (i = 1; i <= R; i++) if (nl[i] && ("kolo_ib_pingpong_p50_us 8", i) in v) x[++n] = v["kolo_ib_pingpong_p50_us 8", i] / (lat[i] / nl[i])
    printf "provider ping-pong 8 B / ib_write_lat 8 B: median %.2f\n", med(x, n); delete x
    n = 0; for (i = 1; i <= R; i++) if (("kolo_net_bw_MBps 65536", i) in v && v["ib_write_bw_MBps 65536", i]) x[++n] = v["kolo_net_bw_MBps 65536", i] / v["ib_write_bw_MBps 65536", i]
    printf "kolo-perf net --bw 64 KiB / ib_write_bw 64 KiB: median %.2f\n", med(x, n); delete x
    n = 0; for (i = 1; i <= R; i++) if (("kolo_ib_bw_MBps 65536", i) in v && v["ib_write_bw_MBps 65536", i]) x[++n] = v["kolo_ib_bw_MBps 65536", i] / v["ib_write_bw_MBps 65536", i]
    printf "provider alone (IbBench) 64 KiB / ib_write_bw 64 KiB: median %.2f\n", med(x, n); delete x
    # perftest -b reports both directions together: a direction is half
    for (k in keys) if (k ~ /^kolo_sendrecv_MBps/) { split(k, p, " "); s = p[2]; n = 0; nu = 0
      for (i = 1; i <= R; i++) {
        if ((k, i) in v && v["ib_write_bw_bidir_MBps " s, i]) x[++n] = v[k, i] / (v["ib_write_bw_bidir_MBps " s, i] / 2)
        if ((k, i) in v && v["ib_write_bw_MBps " s, i]) y[++nu] = v[k, i] / v["ib_write_bw_MBps " s, i] }
      if (n) printf "sendrecv %s B, one direction / (ib_write_bw -b %s B / 2): median %.2f; / ib_write_bw one way: %.2f\n", s, s, med(x, n), med(y, nu)
      delete x; delete y }
  }' "$OUT/figures.txt" | tee "$OUT/summary.txt"
echo "raw figures: $OUT/figures.txt; console: $OUT/console.log"
exit $rc
