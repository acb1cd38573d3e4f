#!/bin/bash
# knobs.sh NPROCS ROUNDS NAME=SETTINGS... - kolo's all-reduce over loopback TCP,
# both sides pinned (--bind core), under each NAME's environment settings in
# turn, ROUNDS rounds; prints the median time (us, out of place) per size and
# configuration, and each configuration's ratio to the first.
# Sizes: MINBYTES..MAXBYTES (1M..4M); ITERS (40) timed calls after 20 untimed.
set -eu
P=$1 R=$2; shift 2
BUILD=${BUILD:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=()
for cfg in "$@"; do names+=("${cfg%%=*}"); done
for _ in $(seq "$R"); do
  for cfg in "$@"; do
    name=${cfg%%=*} envs=${cfg#*=}
    # shellcheck disable=SC2086 # envs: space-separated VAR=VALUE words
    env KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket $envs "$BUILD/bin/kolo-perf" all_reduce -P "$P" \
      --bind core -b "${MINBYTES:-1M}" -e "${MAXBYTES:-4M}" -f 2 -n "${ITERS:-40}" -w 20 --inplace 0 -c 1 \
      | awk -v n="$name" '$1 ~ /^[0-9]+$/ { if ($9 != 0) exit 1; print n, $1, $6 }' >> "$out/all"
  done
done
python3 "$(dirname "$0")/medians.py" --ratios "$out/all" "${names[@]}"
