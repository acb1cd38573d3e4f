#!/usr/bin/env bash
# tests/perf/perf_tune_cuda.sh KOLO_PERF - kolo-perf tune --mem cuda --quick
# (CUDA communicators; in CI on kolo's CPU model of the GPU, whose figures
# mean nothing) writes a tuning file with a cuda-p2p link line, overrides
# and channels lines covering every size for 2 ranks, and a CUDA
# communicator loads it (KOLO_DEBUG=INFO says so, with cuda-p2p's
# constants).  No timing is asserted.
set -u
BIN=${1:?usage: perf_tune_cuda.sh path/to/kolo-perf}
WORK=$(mktemp -d /tmp/kolo-perf-tune-cuda.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -30; exit 1; }

"$BIN" tune --mem cuda --quick -P 2 -o "$WORK/t.tune" > "$WORK/out.txt" 2>&1 || fail "kolo-perf tune --mem cuda --quick"
grep -Eq "^link cuda-p2p [0-9.e+-]+ [0-9.e+-]+$" "$WORK/t.tune" || fail "no cuda-p2p line in $(cat "$WORK/t.tune")"
grep -q "^link shm" "$WORK/t.tune" && fail "a shm line from a CUDA tune: $(cat "$WORK/t.tune")"
# every size once for 2 ranks in CUDA memory, per collective, in
# overrides and in channels lines (1..16 channels)
for kind in override channels; do
  awk -v k="$kind" '$1 == k {
         if ($2 !~ /^(allreduce|broadcast|reduce|allgather)$/ || $6 != "ranks" || $7 != 2 || $8 != "mem" || $9 != "cuda") bad = 1
         if (k == "channels" && $3 !~ /^(1|2|4|8|16)$/) bad = 1
         if ($4 != next_lo[$2] + 0) bad = 1
         next_lo[$2] = $5 + 1; n++ }
       END { for (c in next_lo) if (next_lo[c] != 4611686018427387904) bad = 1
             exit !(n > 0 && !bad && length(next_lo) == 4) }' "$WORK/t.tune" ||
    fail "the $kind lines do not cover 0 .. 2^62-1 once per collective for 2 ranks: $(cat "$WORK/t.tune")"
done
KOLO_TUNING_FILE="$WORK/t.tune" KOLO_DEBUG=INFO "$BIN" all_reduce --mem cuda -t 2 --devices 0 -b 8 -e 4K -f 8 -n 1 -w 0 \
  > "$WORK/out.txt" 2>&1 || fail "kolo-perf all_reduce --mem cuda with the tuned file"
grep -q "KOLO_TUNING_FILE=$WORK/t.tune: cuda-p2p" "$WORK/out.txt" || fail "the file was not loaded with cuda-p2p's constants"
echo "ok: $(grep -c '^override' "$WORK/t.tune") overrides, $(grep -c '^channels' "$WORK/t.tune") channels lines"
