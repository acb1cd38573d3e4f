#!/usr/bin/env bash
# allgather_rounds.sh ROUNDS COLL P: kolo over shared memory (default, and
# KOLO_NCHANNELS=1) and Open MPI (vader) in turn, 256 KiB..16 MiB, ROUNDS
# rounds; prints "NAME BYTES US" per run (kolo's checked: a wrong element
# stops it).  From the repository root:
#   BUILD=build-net results/2026-12-03-copy-alias/allgather_rounds.sh 5 all_gather 4 \
#     > shm-allgather-p4-rounds.txt
#   results/2026-12-02-net-chunk/rounds.py shm-allgather-p4-rounds.txt def ch1 mpi
set -euo pipefail
R=$1 COLL=$2 P=$3
B=${BUILD:-build}/bin
for _ in $(seq "$R"); do
  for cfg in def= ch1=KOLO_NCHANNELS=1 mpi=; do
    name=${cfg%%=*} envs=${cfg#*=}
    if [ "$name" = mpi ]; then
      mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$P" "$B/kolo-mpi-ref" "$COLL" \
        -b 256K -e 16M -f 4 -n 20 -w 5 2> /dev/null | awk -v n="$name" '$1 ~ /^[0-9]+$/ { print n, $1, $6 }'
    else
      # shellcheck disable=SC2086 # envs: one VAR=VALUE word or none
      env $envs "$B/kolo-perf" "$COLL" -P "$P" -b 256K -e 16M -f 4 -n 20 --inplace 0 |
        awk -v n="$name" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }'
    fi
  done
done
