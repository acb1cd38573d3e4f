#!/usr/bin/env bash
# small.sh OLD NEW - 8-byte all-reduce over loopback TCP, 2 and 4 processes,
# R (15) alternating rounds of N (5000) calls; per run: processes, binary,
# the mean time (us) per call as kolo-perf prints it, TCP segments the host sent
# during the whole job (/proc/net/snmp OutSegs).
export KOLO_NET_FORCE=1 KOLO_SHM_DISABLE=1 KOLO_NET=socket
seg(){ awk '/^Tcp:/{getline; print $12}' /proc/net/snmp; }
for r in $(seq 1 ${R:-15}); do for p in 2 4; do for b in "$@"; do
  a=$(seg); t=$($b all_reduce -P $p -b ${SZ:-8} -e ${SZ:-8} -n ${N:-5000} -w 100 -c 1 --inplace 0 2>&1 | awk '/^ +[0-9]+ +[0-9]+ +float/{print $6}'); c=$(seg)
  echo $p $(basename $b) $t $(( (c-a) ))
done; done; done
