#!/bin/bash
# ab.sh ROUNDS - kolo built from two commits, alternating: "base" from
# BASE_BUILD, "new" from BUILD, ROUNDS rounds; prints "NAME BYTES US" per
# size and run (out-of-place time, checked).  COLL (all_reduce), P (2),
# KBIND ("--bind core" pins), MINB..MAXB (512K..16M, factor 2), ITERS (60).
#   BUILD=build-net BASE_BUILD=/tmp/base/build-net results/2026-12-02-net-chunk/ab.sh 7 > ab.txt
#   results/2026-12-02-net-chunk/rounds.py ab.txt base new
set -eu
R=$1
for _ in $(seq "$R"); do
  for name in base new; do
    B=${BUILD:-build}/bin
    [ "$name" = base ] && B=$BASE_BUILD/bin
    # shellcheck disable=SC2086 # KBIND: space-separated words
    env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket "$B/kolo-perf" "${COLL:-all_reduce}" -P "${P:-2}" \
      ${KBIND:-} -b "${MINB:-512K}" -e "${MAXB:-16M}" -f 2 -n "${ITERS:-60}" -w 20 --inplace 0 -c 1 |
      awk -v n="$name" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }'
  done
done
