# Runs inside the soft-RoCE guest (vm.sh), in run_smoke.sh's work directory,
# which holds the host-built ./verbs_smoke and smoke.env.  Lines starting
# with "KOLO-RXE:" are the summary that run_smoke.sh prints.
# Exit status: the number of failed checks.
[ -f ./smoke.env ] && . ./smoke.env
N=${N:-16} BW_N=${BW_N:-500} LAT_N=${LAT_N:-500}
B=./verbs_smoke
fail=0
up() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v s="$1" -v e="$(up)" 'BEGIN{printf "%.1f", e-s}'; }
say() { echo "KOLO-RXE: $*"; }

# The GID each device uses (the RoCEv2 IPv4 one), also handed to perftest.
G0=$($B -d rxe0 -G) && G1=$($B -d rxe1 -G) || { say "FAIL: no usable GID on rxe0/rxe1"; ibv_devinfo; exit 1; }

# smoke NAME RECV_DEV SEND_DEV TCPPORT: two processes, receiver listens on
# 10.77.0.1 (veth0).  -t: per-wait limit, -T: whole-run limit.
smoke() {
  s=$(up)
  timeout -k 2 100 $B -d $2 -p $4 -t 30 -T 90 > /tmp/$1.recv 2>&1 & rp=$!
  timeout -k 2 100 $B -d $3 -p $4 -t 30 -T 90 -n $N 10.77.0.1 > /tmp/$1.send 2>&1; sr=$?
  wait $rp; rr=$?
  echo "----- verbs_smoke $1: receiver $2 (rc $rr), sender $3 (rc $sr)"; cat /tmp/$1.recv /tmp/$1.send
  if [ $rr = 0 ] && [ $sr = 0 ]; then
    say "PASS verbs_smoke $1 ($3 -> $2, $(since $s)s):$(sed -n 's/.*);\(.*\)/\1/p' /tmp/$1.send)"
  else
    say "FAIL verbs_smoke $1 ($3 -> $2): receiver rc $rr, sender rc $sr"; fail=$((fail+1))
    grep -h "verbs_smoke .*:" /tmp/$1.recv /tmp/$1.send | grep -v "GID\[" | sed 's/^/KOLO-RXE:   /'
  fi
}

# perf_once NAME SERVER_DEV SERVER_GID CLIENT_DEV CLIENT_GID PORT CMD ARGS...:
# perftest's server, then its client (retried while the server is not
# listening yet); prints the result row; 1 when either side failed.
perf_once() {
  name=$1 sdev=$2 sg=$3 cdev=$4 cg=$5 port=$6; shift 6
  timeout -k 2 60 "$@" -d $sdev -x $sg -p $port > /tmp/$name.srv 2>&1 & sp=$!
  for try in 1 2 3 4 5; do
    sleep 1
    timeout -k 2 60 "$@" -d $cdev -x $cg -p $port 10.77.0.1 > /tmp/$name.cli 2>&1; cr=$?
    [ $cr = 0 ] || ! grep -q "Couldn't connect" /tmp/$name.cli || continue
    break
  done
  wait $sp; sr=$?
  row=$(awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ && NF >= 5 {print; exit}' /tmp/$name.cli)
  echo "----- $* ($name): server $sdev rc $sr, client $cdev rc $cr"; cat /tmp/$name.cli
  [ $cr = 0 ] && [ $sr = 0 ] && [ -n "$row" ]
}

# perf NAME ...: perf_once, retried once on a fresh port.  perftest is a
# reference (the ceiling kolo is quoted against), never a verdict on kolo:
# when it fails twice (ib_write_bw's loopback run exits 1 under load) it is
# reported as unavailable and the step still passes.
perf() {
  pname=$1 pport=$6 pcmd=$7
  if ! perf_once "$@"; then
    first="client rc $cr, server rc $sr"
    a1=$1 a2=$2 a3=$3 a4=$4 a5=$5; shift 6
    if ! perf_once "$a1" "$a2" "$a3" "$a4" "$a5" $((pport + 100)) "$@"; then
      say "UNAVAILABLE $pname: $pcmd failed twice ($first; then client rc $cr, server rc $sr): no reference figure"
      return
    fi
  fi
  case $pcmd in
    ib_write_bw) say "$(echo "$row" | awk -v n="$pname" '{printf "%-14s ib_write_bw  %7d B x %d: %.2f MB/s average (peak %.2f)", n, $1, $2, $4, $3}')";;
    ib_write_lat) say "$(echo "$row" | awk -v n="$pname" '{printf "%-14s ib_write_lat %7d B x %d: typical %.2f us, avg %.2f us, 99%% %.2f us", n, $1, $2, $5, $6, $8}')";;
  esac
}

say "devices: rxe0 (veth0 10.77.0.1, GID index $G0), rxe1 (veth1 10.77.0.2, GID index $G1)"
smoke cross rxe0 rxe1 18515
smoke loopback rxe0 rxe0 18516
perf bw-cross    rxe0 $G0 rxe1 $G1 18517 ib_write_bw -s 65536 -n $BW_N
perf bw-loopback rxe0 $G0 rxe0 $G0 18518 ib_write_bw -s 65536 -n $BW_N
perf lat-cross    rxe0 $G0 rxe1 $G1 18519 ib_write_lat -n $LAT_N
perf lat-loopback rxe0 $G0 rxe0 $G0 18520 ib_write_lat -n $LAT_N
[ $fail -le 100 ] || fail=100   # 124-126 mean other things to vm.sh
exit $fail
