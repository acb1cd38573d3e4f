#!/usr/bin/env bash
# mpirun_pmix.sh PROGRAM - 4 ranks under Open MPI's real mpirun, with no
# KOLO_ROOT: the rendezvous must go through PMIx (rank 0's root id published
# in the launcher's store), not through a secret derived from the job id.
# Exit 77 (ctest: skipped) where mpirun is missing.
set -uo pipefail
prog=$1
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin)"; exit 77; }
root_opt=; [ "$(id -u)" = 0 ] && root_opt=--allow-run-as-root
# the sanitizers' settings reach the ranks (ASan's leak check, libpmix's suppressions)
for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do [ -n "${!v:-}" ] && root_opt+=" -x $v"; done
out=$(env -u KOLO_ROOT -u KOLO_SECRET -u KOLO_SECRET_FILE -u MASTER_ADDR -u MASTER_PORT \
      timeout 300 mpirun --oversubscribe $root_opt -np 4 -x KOLO_DEBUG=INFO -x KOLO_SOCKET_IFNAME=lo \
      "$prog" 2>&1)
rc=$?
echo "$out" | grep -v " INFO " | head -40
fail() { echo "FAIL: $*"; exit 1; }
[ $rc = 0 ] || fail "mpirun exited with $rc"
n=$(echo "$out" | grep -c "all-reduce checked")
[ "$n" = 4 ] || fail "$n of 4 ranks checked their all-reduce"
n=$(echo "$out" | grep -c "rendezvous through PMIx")
[ "$n" = 4 ] || fail "$n of 4 ranks said 'rendezvous through PMIx'"
echo "$out" | grep -q "derived from the launcher" && fail "a rank derived its secret from the job id"
echo "PASS: 4 ranks under mpirun met through PMIx and checked their all-reduce"
