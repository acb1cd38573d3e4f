#!/usr/bin/env bash
# tests/perf/perf_tune.sh KOLO_PERF - kolo-perf tune --quick writes a
# tuning file with positive shm and socket constants, overrides and
# channels lines of the all-reduce, the broadcast, the reduce and the all-gather
# covering every size (for host memory) within a host, and overrides
# covering every size across hosts over TCP, which
# KOLO_TUNING_FILE loads at init (said at INFO, with each all-reduce
# choice once per size bucket); the lines of each link steer the
# communicators that take it; a file with a bad line is refused at init
# with FILE:LINE; -P that is not a whole number from 2 to 64 is refused;
# the tune writes a chunk line for TCP, and a chunk line sets the rounds of
# communicators across hosts in host memory (KOLO_NET_CHUNK_BYTES before it);
# the file's comment keeps the load average.  No timing is asserted: the
# figures only have to exist.
set -u
BIN=${1:?usage: perf_tune.sh path/to/kolo-perf}
WORK=$(mktemp -d /tmp/kolo-perf-tune.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/    /' "$WORK/out.txt" | tail -30; exit 1; }

for bad in 3x 1 65; do
  "$BIN" tune --quick -P "$bad" -o "$WORK/t.tune" > "$WORK/out.txt" 2>&1 && fail "tune -P $bad was taken"
  grep -q -- "-P $bad: ranks are a whole number from 2 to 64" "$WORK/out.txt" || fail "tune -P $bad: no sentence"
done
"$BIN" tune --quick -P 2 -o "$WORK/t.tune" > "$WORK/out.txt" 2>&1 || fail "kolo-perf tune --quick"
head -1 "$WORK/t.tune" | grep -qx "kolo-tuning 1" || fail "no header line in $(cat "$WORK/t.tune")"
sed -n 2p "$WORK/t.tune" | grep -Eq "; load average [0-9]+[.][0-9]{2}, [0-9]+ CPUs$" ||
  fail "the comment does not keep the load average: $(sed -n 2p "$WORK/t.tune")"
for l in shm socket; do
  grep -Eq "^link $l [0-9.e+-]+ [0-9.e+-]+$" "$WORK/t.tune" || fail "no $l line in $(cat "$WORK/t.tune")"
done
# the crossovers: for each of the all-reduce, the broadcast, the reduce
# and the all-gather, overrides and channels lines for 2 ranks in host
# memory on shm, and overrides on socket, that cover every size once, in order
covers() {  # covers KIND LINK: the KIND lines of the four collectives on LINK
  awk -v k="$1" -v l="$2" '$1 == k && $NF == l {
       ok = $2 == "allreduce" && (k == "channels" || $3 ~ /^(ring|rd|rabenseifner|direct|oneshot)$/)
       ok = ok || ($2 == "broadcast" && (k == "channels" || $3 ~ /^(ring|tree|dbtree)$/))
       ok = ok || ($2 == "reduce" && (k == "channels" || $3 ~ /^(ring|tree|dbtree)$/))
       ok = ok || ($2 == "allgather" && (k == "channels" || $3 ~ /^(ring|bruck)$/))
       if (k == "channels" && $3 !~ /^(1|2|4)$/) ok = 0
       if (l != "shm" && $2 == "allreduce" && $3 ~ /^(direct|oneshot)$/) ok = 0
       if (!ok || $6 != "ranks" || $7 != 2 || $8 != "mem" || $9 != "host" || $10 != "link" || NF != 11) bad = 1
       if ($4 != next_lo[$2] + 0) bad = 1
       next_lo[$2] = $5 + 1; n++ }
     END { for (c in next_lo) if (next_lo[c] != 4611686018427387904) bad = 1
           exit !(n > 0 && !bad && length(next_lo) == 4) }' "$WORK/t.tune"
}
for kind in "override shm" "channels shm" "override socket"; do
  covers $kind || fail "the ${kind% *}s on ${kind#* } do not cover 0 .. 2^62-1 once per collective for 2 ranks: $(cat "$WORK/t.tune")"
done
grep -q "^channels .* link socket$" "$WORK/t.tune" && fail "channels lines across hosts: $(cat "$WORK/t.tune")"
want=$(awk '/^override allreduce/ && $4 == 0 && $NF == "shm" { print $3 }' "$WORK/t.tune")

KOLO_TUNING_FILE="$WORK/t.tune" KOLO_DEBUG=INFO "$BIN" -P 2 -b 8 -e 4K -f 8 -n 1 -w 0 all_reduce > "$WORK/out.txt" 2>&1 ||
  fail "kolo-perf all_reduce with the tuned file"
grep -q "KOLO_TUNING_FILE=$WORK/t.tune" "$WORK/out.txt" || fail "the file was not loaded"
n=$(grep -c "all-reduce of 8 B on 2 ranks" "$WORK/out.txt")
[ "$n" -eq 1 ] || fail "the 8 B choice was logged $n times, not once"
grep -q "all-reduce of 8 B on 2 ranks: $want (.*a KOLO_TUNING_FILE override), " "$WORK/out.txt" ||
  fail "8 B did not run the override's $want"
ch=$(awk '/^channels allreduce/ && $4 == 0 && $NF == "shm" { print $3 }' "$WORK/t.tune")
grep -Eq "all-reduce of 8 B on 2 ranks: .*, $ch channels? \(a KOLO_TUNING_FILE channels line\)" "$WORK/out.txt" ||
  fail "8 B did not run on the channels line's $ch"

# the broadcast's override at 8 B runs too (the log calls the ring "chain")
wantb=$(awk '/^override broadcast/ && $4 == 0 && $NF == "shm" { print ($3 == "ring" ? "chain" : $3) }' "$WORK/t.tune")
KOLO_TUNING_FILE="$WORK/t.tune" KOLO_DEBUG=INFO "$BIN" -P 2 -b 8 -e 8 -n 1 -w 0 broadcast > "$WORK/out.txt" 2>&1 ||
  fail "kolo-perf broadcast with the tuned file"
grep -q "broadcast of 8 B on 2 ranks: $wantb (.*a KOLO_TUNING_FILE override)" "$WORK/out.txt" ||
  fail "the 8 B broadcast did not run the override's $wantb"

# each link's lines steer the communicators that take it, and only those:
# on one host the direct all-reduce and the 3 channels of the shm lines,
# across hosts (every process a host of its own, over TCP) recursive
# doubling of the socket line, on the channels it has without the file (1:
# 2 ranks on 2 CPUs over the network)
printf 'kolo-tuning 1\noverride allreduce direct 0 100 ranks 2 link shm\noverride allreduce rd 0 100 link socket\n%s\n' \
  'channels allreduce 3 0 100 ranks 2 link shm' > "$WORK/links.tune"
for how in "shm direct 3" "socket rd 1"; do
  set -- $how
  net=""; [ "$1" = socket ] && net="KOLO_NET_FORCE=1 KOLO_NET=socket"
  env $net KOLO_TUNING_FILE="$WORK/links.tune" KOLO_DEBUG=INFO "$BIN" -P 2 -b 8 -e 8 -n 1 -w 0 all_reduce \
    > "$WORK/out.txt" 2>&1 || fail "kolo-perf all_reduce over $1 with a file of lines per link"
  grep -q "all-reduce of 8 B on 2 ranks: $2 (.*a KOLO_TUNING_FILE override)" "$WORK/out.txt" ||
    fail "over $1 the 8 B all-reduce did not run its link's $2"
  grep -q "rank 0: $3 channel(s)" "$WORK/out.txt" || fail "over $1 the communicator does not have $3 channel(s)"
done

# the chunk: one of the two --quick tries for 2 ranks over TCP; a file's
# line for this rank count sets a communicator's rounds over the network,
# KOLO_NET_CHUNK_BYTES wins over it, and a line for another count or link
# leaves kolo's rule
grep -Eqx "chunk socket (262144|2097152) ranks 2" "$WORK/t.tune" || fail "no chunk line for TCP: $(cat "$WORK/t.tune")"
printf 'kolo-tuning 1\nchunk socket 12288 ranks 2\n' > "$WORK/chunk.tune"
printf 'kolo-tuning 1\nchunk socket 12288 ranks 3\nchunk ib 8192\n' > "$WORK/other.tune"
for how in "chunk.tune 0 rounds of 12288-byte chunks (a KOLO_TUNING_FILE chunk line)" \
           "chunk.tune 8192 rounds of 8192-byte chunks (KOLO_NET_CHUNK_BYTES)" \
           "other.tune 0 at most 1 per CPU on a host: rounds of 524288-byte chunks"; do
  set -- $how
  file=$1 env=$2; shift 2
  KOLO_NET_FORCE=1 KOLO_NET=socket KOLO_HOST_CPUS=2 KOLO_NET_CHUNK_BYTES=$env KOLO_TUNING_FILE="$WORK/$file" \
    KOLO_DEBUG=INFO "$BIN" -P 2 -b 64K -e 64K -n 2 -w 1 all_reduce > "$WORK/out.txt" 2>&1 ||
    fail "kolo-perf all_reduce over TCP with $file, KOLO_NET_CHUNK_BYTES=$env"
  grep -qF "$*" "$WORK/out.txt" || fail "with $file and KOLO_NET_CHUNK_BYTES=$env: no \"$*\""
done

printf 'kolo-tuning 1\nlink shm 1 2\nlink shm 1 nope\n' > "$WORK/bad.tune"
KOLO_TUNING_FILE="$WORK/bad.tune" "$BIN" -P 2 -b 8 -e 8 -n 1 -w 0 all_reduce > "$WORK/out.txt" 2>&1 &&
  fail "a bad tuning file was accepted"
grep -q "bad.tune:3: beta" "$WORK/out.txt" || fail "no FILE:LINE sentence for the bad file"
echo "ok: $(grep -c '^link' "$WORK/t.tune") links measured"
