#!/usr/bin/env bash
# results/2026-11-30-tune-links/run.sh: 4 ranks in network namespaces beside
# Open MPI's TCP transport, kolo without a tuning file and with the one
# `kolo-perf tune -P 4` wrote on this VM (vm-4.tune), two rounds of each in turn.
# Run from the repository root as root, with build/ a release build.
set -eu
here=results/2026-11-30-tune-links
for round in 1 2; do
  for how in auto tuned; do
    file=""; [ "$how" = tuned ] && file="$PWD/$here/vm-4.tune"
    env ${file:+KOLO_TUNING_FILE=$file} BIND=core NPROCS=4 MINBYTES=64K MAXBYTES=4M FACTOR=4 REPEATS=5 \
      OUT="$here/ns-$how-$round" perf/compare.sh ns > "$here/ns-$how-$round.txt" 2>&1
  done
done
