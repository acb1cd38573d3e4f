#!/usr/bin/env bash
# tests/perf/perf_topo.sh KOLO_PERF [model] - kolo-perf topo prints every
# section; where this machine has no GPU or RDMA device it says "none
# found" for them (on kolo's CUDA model, "model": the model's GPUs and
# their peer matrix); the rings of a 2x2 layout are kolo's; a bad layout
# or channel count is refused with a sentence.
set -u
BIN=${1:?usage: perf_topo.sh path/to/kolo-perf [model]}
MODE=${2:-host}
WORK=$(mktemp -d /tmp/kolo-perf-topo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -40; exit 1; }
has() { grep -q -- "$1" "$WORK/out.txt" || fail "no line says '$1'"; }

"$BIN" topo --layout 2x2 > "$WORK/out.txt" 2>&1 || fail "kolo-perf topo failed"
for s in "^# host" "#   CPUs: [0-9]* online" "NUMA" "^# GPUs" "^# RDMA devices" "^# socket interfaces" \
         "kolo would use: " "^# rings kolo builds for layout 2x2: 4 ranks on 2 host"; do
  has "$s"
done
# The rings, as ring/topology.c builds them: channel c starts each host's run at c mod 2.
has "channel 0: 0 1 | 2 3  (then back to 0)"
has "channel 1: 1 0 | 3 2  (then back to 1)"
has "host 1: 2 3  (then back to 2)"
has "local 1: 1 | 3  (then back to 1)"
if [ "$MODE" = model ]; then
  has "GPU 0: kolo CPU model of an H100 (not a GPU)"
  has "model devices, not GPUs"
  has "peer access"
elif [ ! -e /dev/nvidiactl ] && ! ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
  grep -A1 "^# GPUs" "$WORK/out.txt" | grep -q "none found" || fail "no GPU here, and topo does not say 'none found'"
fi
if [ "$MODE" != model ] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  grep -A1 "^# RDMA" "$WORK/out.txt" | grep -q "none found" || fail "no RDMA device, and topo does not say 'none found'"
fi
"$BIN" topo --layout 2x > "$WORK/out.txt" 2>&1 && fail "--layout 2x was taken"
has "expected HxR"
"$BIN" topo --channels 3x > "$WORK/out.txt" 2>&1 && fail "--channels 3x was taken"
has "channels 3x: expected 1..64"
echo "ok: kolo-perf topo: every section; 'none found' where there is nothing; kolo's 2x2 rings"
