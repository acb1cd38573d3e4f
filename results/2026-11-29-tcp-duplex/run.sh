#!/usr/bin/env bash
# Alternates the three modes of swap.c ROUNDS times (default 9), with the TCP
# segments the host sent during each run (/proc/net/snmp OutSegs).
set -euo pipefail
cd "$(dirname "$0")"
BIN=${BIN:-/tmp/kolo-swap}
gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$BIN" swap.c
segs() { awk '/^Tcp:/ { getline; print $12 }' /proc/net/snmp; }
ITERS=${ITERS:-50000}
for r in $(seq 1 "${ROUNDS:-9}"); do
  for m in 1 2 3; do
    a=$(segs); line=$("$BIN" "$m" "$ITERS"); b=$(segs)
    echo "round $r $line, $(awk -v d=$((b - a)) -v n="$ITERS" 'BEGIN { printf "%.2f", d / n }') segments per swap"
  done
done
