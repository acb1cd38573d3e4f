#!/bin/bash
# knobs.sh ROUNDS NAME=SETTINGS... - kolo's all-reduce over loopback TCP under
# each NAME's environment settings and, for the name "mpi", Open MPI's TCP
# transport, in turn, ROUNDS rounds; prints "NAME BYTES US" per size and run
# (out-of-place time; kolo's runs are checked, a wrong element stops it).
#   P (2) processes; MINB..MAXB (512K..4M), factor 2; ITERS (100) timed calls
#   after 20; KBIND="--bind core" and MPIBIND=core:overload-allowed pin them;
#   NETENV (kolo over TCP by default; empty: shared memory).
# From the repository root: BUILD=build-net results/2026-12-02-net-chunk/knobs.sh 7 mpi= default= \
#   n2b1M="KOLO_NSLOTS=2 KOLO_BUFFSIZE=1048576" > run.txt; rounds.py run.txt default mpi n2b1M
set -eu
R=$1
shift
B=${BUILD:-build}/bin
for _ in $(seq "$R"); do
  for cfg in "$@"; do
    name=${cfg%%=*} envs=${cfg#*=}
    if [ "$name" = mpi ]; then
      # shellcheck disable=SC2086 # envs: space-separated words
      mpirun --allow-run-as-root --oversubscribe --bind-to "${MPIBIND:-none}" --map-by core -np "${P:-2}" \
        --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo $envs "$B/kolo-mpi-ref" all_reduce \
        -b "${MINB:-512K}" -e "${MAXB:-4M}" -f 2 -n "${ITERS:-100}" -w 20 -c 1 2> /dev/null |
        awk -v n="$name" '$1 ~ /^[0-9]+$/ { print n, $1, $6 }'
    else
      # shellcheck disable=SC2086 # NETENV, envs, KBIND: space-separated words
      env ${NETENV-KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket} $envs "$B/kolo-perf" all_reduce \
        -P "${P:-2}" ${KBIND:-} -b "${MINB:-512K}" -e "${MAXB:-4M}" -f 2 -n "${ITERS:-100}" -w 20 --inplace 0 -c 1 |
        awk -v n="$name" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }'
    fi
  done
done
