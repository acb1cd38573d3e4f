#!/usr/bin/env bash
# perf/gpu_kit.sh - packs into .gpukit/ (git-ignored) what the lent GPU
# machine lacks to build kolo with its tests (GoogleTest's sources,
# libibverbs), so that perf/run_cuda.sh there is one command: run it here,
# then carry .gpukit along.  docs/dev/gpu-check.md says what the kit holds.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
GTEST_SRC=${GTEST_SRC:-/usr/src/googletest}
KIT=$ROOT/.gpukit  # perf/run_cuda.sh looks for it there
TRAVEL_LIMIT_MIB=64  # the device tool's limit on the working tree that travels

die() { echo "gpu_kit: $*" >&2; exit 1; }

# Debian package that owns FILE, with its version ("pkg version"), or "?".
# /lib is /usr/lib here (merged /usr), and dpkg may know either name.
owner_of() {
  local pkg
  pkg=$({ dpkg-query -S "$1" || dpkg-query -S "/usr$1"; } 2> /dev/null | head -n 1 | cut -d: -f1)
  [ -n "$pkg" ] || { echo "?"; return; }
  echo "$pkg $(dpkg-query -W -f='${Version}' "$pkg" 2> /dev/null)"
}

# GoogleTest: the top-level CMakeLists.txt (which sets the version) and the
# googletest/ project, without its tests, samples and docs.
pack_gtest() {
  if [ ! -f "$GTEST_SRC/CMakeLists.txt" ] || [ ! -d "$GTEST_SRC/googletest/src" ]; then
    die "no GoogleTest sources in $GTEST_SRC (apt-get install googletest, or scripts/setup.sh)"
  fi
  local dst=$KIT/googletest lic version
  mkdir -p "$dst/googletest"
  cp "$GTEST_SRC/CMakeLists.txt" "$dst/"
  cp -r "$GTEST_SRC/googletest/CMakeLists.txt" "$GTEST_SRC/googletest/cmake" \
    "$GTEST_SRC/googletest/include" "$GTEST_SRC/googletest/src" "$dst/googletest/"
  # The licence travels with the sources (BSD-3-Clause: keep the notice).
  for lic in "$GTEST_SRC/LICENSE" /usr/share/doc/googletest/copyright; do
    [ -f "$lic" ] && { cp "$lic" "$dst/LICENSE"; break; }
  done
  version=$(sed -n 's/^ *set(GOOGLETEST_VERSION \([0-9.]*\)).*/\1/p' "$dst/CMakeLists.txt")
  echo "googletest/  GoogleTest $version sources from $GTEST_SRC ($(owner_of "$GTEST_SRC/CMakeLists.txt"))" \
    >> "$KIT/MANIFEST"
}

# ibverbs: the headers verbs.h pulls in (as the compiler resolves them), and
# the shared libraries with their runtime dependencies outside glibc.
pack_ibverbs() {
  local dst=$KIT/ibverbs lib hdr rel headers dep glibc
  lib=$(ldconfig -p | awk '$1 == "libibverbs.so.1" && /x86-64/ { print $NF; exit }')
  [ -n "$lib" ] || die "no libibverbs.so.1 here (apt-get install libibverbs-dev, or scripts/setup.sh)"
  mkdir -p "$dst/lib" "$dst/include"
  # Headers: every file under .../include/{infiniband,rdma}/ that verbs.h
  # includes, as the compiler finds them (-H lists each on stderr).
  headers=$(echo '#include <infiniband/verbs.h>' | cc -H -fsyntax-only -x c - 2>&1 |
    grep -oE '/[^ ]*/include/(infiniband|rdma)/[^ ]*\.h' | sort -u) ||
    die "cannot compile against infiniband/verbs.h (libibverbs-dev)"
  for hdr in $headers; do
    rel=${hdr#*/include/}
    mkdir -p "$dst/include/$(dirname "$rel")"
    cp "$hdr" "$dst/include/$rel"
  done
  # Libraries: libibverbs.so.1 itself, and what ldd resolves for it except
  # glibc's own (libc, the loader, linux-vdso), which the GPU machine has.
  cp -L "$lib" "$dst/lib/libibverbs.so.1"
  ln -sf libibverbs.so.1 "$dst/lib/libibverbs.so"  # the name the linker looks for
  for dep in $(ldd "$lib" | awk '$3 ~ /^\// { print $3 }'); do
    case $(basename "$dep") in
      libc.so.* | ld-linux* | libm.so.* | libpthread.so.* | libdl.so.*) ;;
      *) cp -L "$dep" "$dst/lib/$(basename "$dep")" ;;
    esac
  done
  glibc=$(objdump -T "$dst"/lib/*.so.* 2> /dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
  echo "ibverbs/     $(cd "$dst/lib" && find . -name '*.so*' | sed 's|^\./||' | sort | tr '\n' ' ')from $(owner_of "$lib"); needs ${glibc:-?}" \
    >> "$KIT/MANIFEST"
  echo "             headers: $(cd "$dst/include" && find . -name '*.h' | sed 's|^\./||' | sort | tr '\n' ' ')" \
    >> "$KIT/MANIFEST"
}

# What the device call sends: tracked and untracked-not-ignored files, plus
# the carried kit; it must stay under the tool's limit.
check_travel_size() {
  local tree kit total
  tree=$(git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2> /dev/null | awk '{ s += $1 } END { print s + 0 }')
  kit=$(du -sb "$KIT" | cut -f1)
  total=$((tree + kit))
  awk -v k="$kit" -v t="$total" -v lim="$TRAVEL_LIMIT_MIB" -v name="$(basename "$KIT")" 'BEGIN {
    printf "gpu_kit: %s: %.1f MiB; with the working tree, %.1f MiB travel (limit %d MiB)\n", name, k / 1048576, t / 1048576, lim }'
  [ "$total" -lt $((TRAVEL_LIMIT_MIB << 20)) ] || die "too large to travel: leave something out"
}

rm -rf "$KIT"
mkdir -p "$KIT"
echo "# made by perf/gpu_kit.sh on $(hostname), $(date -u +%Y-%m-%dT%H:%MZ), $(sed -n 's/^PRETTY_NAME="*\([^"]*\)"*/\1/p' /etc/os-release)" \
  > "$KIT/MANIFEST"
pack_gtest
pack_ibverbs
sed 's/^/gpu_kit: /' "$KIT/MANIFEST"
check_travel_size
echo "gpu_kit: done; device call: run(command=\"perf/run_cuda.sh\", carry=[\"$(basename "$KIT")\"])"
