#!/bin/bash
# What a larger point-to-point ring would buy over TCP: kolo's sendrecv
# (2 processes) and all-to-all (4 processes), loopback TCP, both pinned,
# with the default KOLO_P2P_BUFFSIZE (1 MiB: 8 slots of 128 KiB) and with
# 4 MiB (8 of 512 KiB, the collectives' ring), alternating, ROUNDS rounds
# (default 7); median time per size and the 4 MiB ring's over the default's.
# From the repository root, after perf/run_main.sh.
set -eu
R=${ROUNDS:-7}
BUILD=${BUILD:-build}
D=$(dirname "$0")
run() { # COLL NPROCS MIN MAX OUTFILE
  local out
  out=$(mktemp)
  for _ in $(seq "$R"); do
    for cfg in default= ring4M=KOLO_P2P_BUFFSIZE=4194304; do
      # shellcheck disable=SC2086 # ${cfg#*=}: one VAR=VALUE word or none
      env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket ${cfg#*=} "$BUILD/bin/kolo-perf" "$1" -P "$2" \
        --bind core -b "$3" -e "$4" -f 4 -n 20 -w 5 --inplace 0 -c 1 \
        | awk -v n="${cfg%%=*}" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }' >> "$out"
    done
  done
  python3 "$D/../2026-12-02-mid-sizes/medians.py" --ratios "$out" default ring4M > "$5"
  rm -f "$out"
}
run sendrecv 2 256K 64M "$D/sendrecv2.txt"
run alltoall 4 64K 4M "$D/alltoall4.txt"
