#!/usr/bin/env bash
# ab.sh ROUNDS COLL SIZE...: two kolo-perf builds in alternation (BASE_PERF, the
# one before the change; NEW_PERF, after it), 2 processes (P), buffers on a
# 4 KiB boundary and 16 bytes past one; one line per run: round, build,
# offset, size, time (us).  NETENV: the environment of both (default: TCP
# over loopback; NETENV=KOLO_X=1 for shared memory).  Checked runs.
#   BASE_PERF=/tmp/base/build-net/bin/kolo-perf NEW_PERF=build-net/bin/kolo-perf \
#     results/2026-12-03-copy-alias/ab.sh 5 all_reduce 1M 4M 16M > ab-tcp.txt
set -euo pipefail
R=$1 COLL=$2
shift 2
NETENV=${NETENV-KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket}
for r in $(seq 1 "$R"); do
  for b in base new; do
    bin=$NEW_PERF
    [ "$b" = base ] && bin=$BASE_PERF
    for off in 0 16; do
      for s in "$@"; do
        # shellcheck disable=SC2086 # NETENV is words
        t=$(env $NETENV "$bin" "$COLL" -P "${P:-2}" -b "$s" -e "$s" -n "${N:-40}" --offset "$off" --inplace 0 |
          awk '/^ +[0-9]/ {print $6}')
        echo "$r $b off$off $s $t"
      done
    done
  done
done
