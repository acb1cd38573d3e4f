#!/bin/sh
# nccl_symbols.sh KOLO_LIBNCCL TOOLKIT_NCCL_H [TOOLKIT_LIBNCCL]
# Every function of the toolkit's nccl.h, and its pnccl* twin, must be
# exported by kolo's libnccl.so.2; with the toolkit's libnccl.so.2 given,
# every nccl*/pnccl* name it exports for nccl.h's functions must be there
# too (the host functions of NCCL's device API, nccl_device.h, are not in
# nccl.h and not in scope).  Exits 1 naming each missing symbol.
set -eu
ours=$1
header=$2
theirs=${3:-}
want=$(mktemp)
have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
# Functions declared in the header: "ncclResult_t  ncclX(" / "const char* ncclX(" / "void ncclX(".
grep -oE '\bp?nccl[A-Z][A-Za-z0-9]*\(' "$header" | tr -d '(' | sort -u > "$want"
if [ -n "$theirs" ] && [ -r "$theirs" ]; then
  nm -D --defined-only "$theirs" | awk '{print $NF}' | grep -E '^p?nccl[A-Z]' | sort -u > "$have"
  # keep the toolkit library's names that nccl.h declares (its device-API host functions are not)
  comm -12 "$want" "$have" > "$want.lib" && mv "$want.lib" "$want"
fi
nm -D --defined-only "$ours" | awk '{print $NF}' | sort -u > "$have"
missing=$(comm -23 "$want" "$have")
n=$(wc -l < "$want")
if [ -n "$missing" ]; then
  echo "kolo's $(basename "$ours") lacks $(echo "$missing" | wc -l) of the $n nccl.h symbols:"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
extra=$(comm -13 "$want" "$have" | grep -vE '^p?nccl' || true)
if [ -n "$extra" ]; then
  echo "kolo's $(basename "$ours") exports names that are not NCCL's:"
  echo "$extra" | sed 's/^/  /' | head -20
  exit 1
fi
echo "kolo's $(basename "$ours") exports all $n nccl.h symbols (nccl* and pnccl*) and nothing else"
