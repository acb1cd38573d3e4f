#!/usr/bin/env bash
# tests/perf/perf_bind.sh KOLO_PERF - kolo-perf -P N --bind core pins
# process i to the i-th CPU the launch may use (modulo their number), as
# mpirun --bind-to core --map-by core does: read back from each running
# child's /proc status, with every CPU allowed and under taskset; and
# --bind is refused where it cannot mean that.
set -u
BIN=${1:?usage: perf_bind.sh path/to/kolo-perf}
WORK=$(mktemp -d /tmp/kolo-perf-bind.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

refused() { # refused SENTENCE ARGS...: kolo-perf ARGS exits 2 saying SENTENCE
  local want=$1; shift
  "$BIN" "$@" > "$WORK/out.txt" 2>&1 && fail "kolo-perf $* ran"
  grep -qF -- "$want" "$WORK/out.txt" || fail "kolo-perf $* did not say '$want': $(cat "$WORK/out.txt")"
}
refused "--bind core needs -P" all_reduce --bind core -b 8 -e 8 -n 1
refused "bad value 'socket' for --bind: expected none or core" all_reduce -P 2 --bind socket -b 8 -e 8 -n 1
refused "--bind is not a flag of prims" prims --bind core

# The CPUs of the running children, one per line, sorted; after the 3
# children are up (each has its own /proc entry) and bound.
child_cpus() {
  local t kids
  for t in $(seq 200); do
    kids=$(pgrep -P "$pid" | sort -n)
    if [ "$(echo "$kids" | grep -c .)" = 3 ]; then
      local k cpus=()
      for k in $kids; do cpus+=("$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$k/status" 2> /dev/null)"); done
      printf '%s\n' "${cpus[@]}" | sort -n
      return
    fi
    sleep 0.05
  done
}

# check PREFIX...: 3 children under PREFIX, until stopped (-N 0), each on
# the CPU --bind core names for it among those PREFIX leaves.
check() {
  local allowed want got
  allowed=($("$@" python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))'))
  want=$(for i in 0 1 2; do echo "${allowed[$((i % ${#allowed[@]}))]}"; done | sort -n)
  "$@" "$BIN" all_reduce -P 3 --bind core -b 8 -e 8 -n 20 -w 1 -N 0 > "$WORK/run.txt" 2>&1 &
  pid=$!
  sleep 0.5 # the children bind themselves right after the fork
  got=$(child_cpus)
  kill "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  pid=
  [ "$got" = "$want" ] || fail "under '$*': children on CPUs [$(echo $got)], want [$(echo $want)]"
  echo "ok: under '$*': 3 processes on CPUs [$(echo $got)]"
}
check env  # every CPU this test may use
check taskset -c "$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')"
echo "ok: --bind core pins -P's processes; refused without -P, with another value, and in prims"
