#!/usr/bin/env bash
# check_exports.sh [--prefix P] [--node N] LIB CC HEADER... - a shared library
# of kolo's exports exactly its public API: every function the public
# headers declare (read by the compiler, so a function another change adds to
# kolo.h is expected without any list here), named P* (kolo), each at a
# version node named N* (KOLO_; cmake/libkolo.map; --node '' for none), and
# nothing else: an internal symbol that leaks fails.  Exit 0 when so, 1
# naming each difference, 2 on bad input.
set -uo pipefail
prefix=kolo node=KOLO_
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --node) node=$2; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 3 ]; then
  echo "usage: $0 [--prefix NAME_PREFIX] [--node VERSION_NODE_PREFIX] LIBRARY C_COMPILER HEADER..." >&2
  exit 2
fi
lib=$1 cc=$2
shift 2
[ -f "$lib" ] || { echo "check_exports: no library at $lib" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# The headers' function declarations, from gcc's -aux-info listing of every
# prototype in the translation unit ("/* FILE:LINE:NC */ extern T NAME (..);").
for h in "$@"; do
  [ -f "$h" ] || { echo "check_exports: no header at $h" >&2; exit 2; }
  echo "#include \"$(realpath "$h")\""
done > "$tmp/probe.c"
if ! "$cc" -std=c11 -fsyntax-only -aux-info "$tmp/decls" "$tmp/probe.c"; then
  echo "check_exports: $cc cannot list the headers' declarations (-aux-info: gcc)" >&2
  exit 2
fi
: > "$tmp/api"
for h in "$@"; do
  grep -F "/* $(realpath "$h"):" "$tmp/decls" | sed -n 's|^/\* [^*]* \*/ extern [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\) (.*|\1|p'
done | sort -u > "$tmp/api"
if [ ! -s "$tmp/api" ]; then
  echo "check_exports: found no function declared in $*" >&2
  exit 2
fi

# The library's exported definitions; the version nodes themselves show as
# absolute symbols (A KOLO_1) and are not functions.
nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u > "$tmp/exports"

fail=0
while read -r f; do
  echo "FAIL: $f is declared in the public headers but not exported by $(basename "$lib")"
  fail=1
done < <(comm -23 "$tmp/api" "$tmp/exports")
while read -r f; do
  echo "FAIL: $(basename "$lib") exports $f, which no public header declares (internal: compile it hidden)"
  fail=1
done < <(comm -13 "$tmp/api" "$tmp/exports")
while read -r f; do
  echo "FAIL: public function $f is not named $prefix*"
  fail=1
done < <(grep -v "^$prefix" "$tmp/api")
# Every export carries its ABI's version node (objdump -T: "KOLO_1  koloX").
if [ -n "$node" ]; then
  while read -r f; do
    echo "FAIL: $f is exported without a $node* version node (the version script is not applied)"
    fail=1
  done < <(objdump -T "$lib" | awk -v p="^$prefix" -v n="^$node" '$2 == "g" && $NF ~ p && $(NF-1) !~ n { print $NF }')
fi
n=$(wc -l < "$tmp/api")
[ $fail = 0 ] && echo "check_exports: $(basename "$lib") exports exactly the $n functions of the public headers${node:+, at $node* versions}"
exit $fail
