#!/bin/bash
# mpi_algos.sh ROUNDS ALG... - Open MPI's all-reduce over its TCP transport,
# 4 processes pinned as perf/compare.sh's BIND=core pins them, with
# coll_tuned's algorithm ALG (0: its own choice, 3 recursive doubling, 4 ring,
# 6 Rabenseifner) in turn, ROUNDS rounds; prints the median time (us) per size.
set -eu
R=$1; shift
BUILD=${BUILD:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=("$@")
for _ in $(seq "$R"); do
  for alg in "$@"; do
    mpirun --allow-run-as-root --oversubscribe --bind-to core:overload-allowed --map-by core -np 4 \
      --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo \
      --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$alg" \
      "$BUILD/bin/kolo-mpi-ref" all_reduce -b "${MINBYTES:-1M}" -e "${MAXBYTES:-4M}" -f 2 -n "${ITERS:-40}" -w 20 -c 1 \
      | awk -v a="$alg" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print "alg" a, $1, $6 }' >> "$out/all"
  done
done
python3 "$(dirname "$0")/medians.py" "$out/all" "${names[@]/#/alg}"
