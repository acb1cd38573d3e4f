#!/usr/bin/env bash
# tests/perf/perf_overlap.sh KOLO_PERF - kolo-perf overlap runs its
# checked steps to the end: a model's gradients with threads and with
# forked ranks (3, an odd count), --small fused and separate with the
# allocator and the caller's buffers, sum and avg; every run must end with
# "every check passed" and no wrong element, and bad flags are refused
# with their sentences.
set -u
BIN=${1:?usage: perf_overlap.sh path/to/kolo-perf}
OUT=$(mktemp /tmp/kolo-perf-overlap.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT"; exit 1; }

passes() { # passes ARGS...: kolo-perf overlap ARGS exits 0, every check passed
  local small=0; [[ " $* " == *" --small "* ]] && small=1
  timeout -k 5 100 "$BIN" overlap -n 2 -w 1 "$@" > "$OUT" 2>&1 || fail "kolo-perf overlap $* exited $?"
  grep -qx '# every check passed' "$OUT" || fail "kolo-perf overlap $*: no '# every check passed'"
  ! grep -E ': [1-9][0-9]* wrong' "$OUT" || fail "kolo-perf overlap $*: wrong elements"
  # --small's rows end with the fused and the separate calls' wrong elements
  awk '$1 == "allocate" || $1 == "external" { rows++; if ($NF != 0 || $(NF - 1) != 0) bad = 1 }
       END { exit bad || (small && rows != 2) }' small="$small" "$OUT" || fail "kolo-perf overlap $*: --small rows"
  echo "ok: overlap $*"
}
refused() { # refused SENTENCE ARGS...: kolo-perf overlap ARGS exits 2 saying SENTENCE
  local want=$1; shift
  "$BIN" overlap "$@" > "$OUT" 2>&1; local rc=$?
  [ $rc = 2 ] || fail "kolo-perf overlap $* exited $rc, not 2"
  grep -qF -- "$want" "$OUT" || fail "kolo-perf overlap $* did not say '$want'"
  echo "ok: overlap $* refused"
}

passes -t 2 --model resnet50 --compute sleep --compute-ms 5
passes -P 3 -o sum --model resnet50 --compute spin --compute-ms 5 --external
passes -P 3 -o sum --small --small-count 64 --small-bytes 4K --external
passes -t 2 --small --small-count 33 --small-bytes 12
refused "bad value '6' for --small-bytes" --small --small-bytes 6
refused "--compute cuda needs --mem cuda" --compute cuda
refused "cannot open model file" --model nosuch
