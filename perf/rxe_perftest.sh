# rxe_perftest.sh - sourced by the soft-RoCE guest scripts (POSIX sh): the
# GIDs perftest needs and a perftest pair on rxe0 / rxe1.
#   . "$(dirname "$0")/rxe_perftest.sh"      then: perftest NAME CMD ARGS...
# PT_TIMEOUT: seconds for each side (default 120).

# The GIDs perftest needs (-x): the RoCEv2 IPv4 ones, as kolo finds them.
gid() { ibv_devinfo -v -d "$1" | sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:.*RoCE v2.*/\1/p' | head -n 1; }
G0=$(gid rxe0); G1=$(gid rxe1)
[ -n "$G0" ] || G0=1; [ -n "$G1" ] || G1=1 # index 1 with the CI kernel (tests/rdma/README.md)

# perftest NAME CMD ARGS...: server on rxe0, client on rxe1 (retried while
# the server is not listening yet); the first result row into /tmp/NAME.row.
perftest() {
  name=$1; shift
  timeout -k 2 "${PT_TIMEOUT:-120}" "$@" -d rxe0 -x "$G0" -p 18515 > /tmp/$name.srv 2>&1 & sp=$!
  for try in 1 2 3 4 5; do
    sleep 1
    timeout -k 2 "${PT_TIMEOUT:-120}" "$@" -d rxe1 -x "$G1" -p 18515 10.77.0.1 > /tmp/$name.cli 2>&1; cr=$?
    [ $cr = 0 ] || ! grep -q "Couldn't connect" /tmp/$name.cli || continue
    break
  done
  wait $sp; sr=$?
  echo "----- $* ($name): client rc $cr, server rc $sr"; cat /tmp/$name.cli
  awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ && NF >= 5 {print; exit}' /tmp/$name.cli > /tmp/$name.row
  [ $cr = 0 ] && [ $sr = 0 ] && [ -s /tmp/$name.row ]
}
