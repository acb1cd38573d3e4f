# perf/compare/ib.sh - perf/compare.sh ib: kolo-perf net -P ib beside
# perftest in the soft-RoCE guest of tests/rdma, one boot (perf/rxe_guest.sh,
# MODE=net), then the medians and the ratios (perf/compare/net_summary.py).
# Settings: docs/benchmarking.md.

# rxe_boot WORK TAG TIMEOUT: boots the guest on the work directory WORK,
# which holds rxe.env (perf/rxe_guest.sh reads it); the guest's TAG lines
# into $OUT/rxe.txt.
rxe_boot() {
  local work=$1 tag=$2 limit=$3 rc name v
  # KOLO_* settings of this shell reach kolo in the guest, as in every mode.
  for name in $(compgen -e | grep '^KOLO_'); do
    v=${!name}
    printf "export %s='%s'\n" "$name" "${v//\'/\'\\\'\'}" >> "$work/rxe.env"
  done
  chmod -R a+rX "$work"
  tests/rdma/vm.sh -t "$limit" -C "$work" -l "$OUT/rxe-console.log" perf/rxe_guest.sh
  rc=$?
  rm -rf "$work"
  tr -d '\r' < "$OUT/rxe-console.log" | sed -n "s/^$tag: //p" > "$OUT/rxe.txt"
  if [ $rc != 0 ]; then
    echo "compare $MODE: the soft-RoCE guest failed (rc $rc); console: $OUT/rxe-console.log"
    tr -d '\r' < "$OUT/rxe-console.log" | grep -v "^$tag: " | tail -n 20
  fi
  return $rc
}

# 0 when the guest can run kolo's ib provider here; else the reason, and 1.
rxe_ready() {
  "$1" net --list | grep -x ib > /dev/null ||
    { header "## $MODE: SKIP: kolo was built without libibverbs (kolo-perf net --list has no ib)"; return 1; }
  tests/rdma/setup.sh > "$OUT/rxe-setup.log" 2>&1 ||
    { header "## $MODE: SKIP: the soft-RoCE VM cannot be set up here (see $OUT/rxe-setup.log)"; return 1; }
}

mode_ib() {
  set +e
  local perf=${PERF_BIN:-$BUILD/bin/kolo-perf} base=${BASE_PERF_BIN:-} work fail=0
  REPEATS=${REPEATS:-3} LAT_SIZE=${LAT_SIZE:-8}
  [ -x "$perf" ] || die "$perf is missing (scripts/build.sh $BUILD)"
  [ -z "$base" ] || base=$(realpath "$base")
  [ -z "$base" ] || [ -x "$base" ] || die "BASE_PERF_BIN=$base is not an executable"
  rxe_ready "$perf" || return 1
  header "# ib: the soft-RoCE guest (rxe0 <-> rxe1; software emulation), REPEATS=$REPEATS LAT_SIZE=$LAT_SIZE" \
    "# kolo-perf: $perf${base:+; beside it: $base}"
  work=$(mktemp -d /tmp/kolo-net-rxe.XXXXXX)
  printf '%s\n' MODE=net "KOLO_PERF=$perf" "KOLO_PERF_BASE=$base" "REPEATS=$REPEATS" "BW_N=${RXE_BW_N:-2000}" \
    "LAT_N=${RXE_LAT_N:-1000}" "LAT_SIZE=$LAT_SIZE" > "$work/rxe.env"
  rxe_boot "$work" KOLO-NET "${RXE_TIMEOUT:-600}" || fail=1
  python3 perf/compare/net_summary.py "$OUT" "$REPEATS" - "$LAT_SIZE" run 0 | tee "$OUT/summary.txt" || fail=1
  return $fail
}
