#!/bin/sh
# check_spills.sh BUILD_LOG - the ptxas report of a CUDA build (-Xptxas -v).
#
# Prints every ptxas line of the log (and the stack-frame / spill lines that
# follow them), then a summary.  Exits 1 when any kernel or device function
# spills (a non-zero "bytes spill stores" or "bytes spill loads"), or when
# the log has no ptxas lines at all (the report was not printed, so nothing
# was checked); 2 on bad usage.
if [ $# -ne 1 ] || [ ! -r "$1" ]; then
  echo "usage: $0 BUILD_LOG" >&2
  exit 2
fi

awk '
  /ptxas/ { print; nptxas++ }
  /Compiling entry function/ { nentry++ }
  /Used [0-9]+ registers/ {
    for (i = 1; i <= NF; i++) if ($i == "Used") { r = $(i + 1) + 0; if (r > maxreg) maxreg = r }
  }
  /bytes spill stores/ || /bytes spill loads/ {
    if ($0 !~ /ptxas/) print
    line = $0
    st = line; sub(/ bytes spill stores.*/, "", st); sub(/.*[^0-9]/, "", st)
    ld = line; sub(/ bytes spill loads.*/, "", ld); sub(/.*[^0-9]/, "", ld)
    if (st + 0 != 0 || ld + 0 != 0) { spills++; bad = bad "\n  " line }
    nreports++
  }
  END {
    if (nptxas == 0) {
      print "check_spills: no ptxas lines in the log (was it built with -Xptxas -v?)"
      exit 1
    }
    printf "check_spills: %d entry functions, %d spill reports, at most %d registers, %d with spills\n", nentry, nreports, maxreg, spills
    if (spills > 0) { print "check_spills: spills found:" bad; exit 1 }
  }
' "$1"
