#!/usr/bin/env bash
# Installs the Debian packages kolo needs, skipping what is already there.
# Run as root (CI is); uses sudo otherwise.
#   scripts/setup.sh          everything: build, tests, benchmarks (what tests/run_all.sh needs)
#   scripts/setup.sh --user   what a user of the library needs: the compilers and CMake, and the
#                             libraries kolo builds against (ibverbs, PMIx) and its tools use
#                             (gnuplot for kolo-perf plot)
set -euo pipefail
mode=${1:-all}
case "$mode" in
  all | --all) mode=all ;;
  --user) mode=user ;;
  *) echo "usage: scripts/setup.sh [--user]" >&2; exit 2 ;;
esac
# The library and its tools.
pkgs=(cmake make gcc g++ pkgconf libibverbs-dev rdma-core libpmix-dev)
pkgs+=(gnuplot-nox python3) # kolo-perf plot: perf/plot.py reads the runs' JSON, gnuplot draws
if [ "$mode" = all ]; then
  pkgs+=(libgtest-dev iproute2 openmpi-bin libopenmpi-dev ibverbs-utils perftest iperf3 python3-torch)
  pkgs+=(python3-cffi python3-venv python3-setuptools python3-wheel) # python/ (kolo.torch): tests/torch/setup_venv.sh
  pkgs+=(clang libclang-rt-14-dev) # clang and libFuzzer (libclang_rt.fuzzer): tests/fuzz/run.sh
  pkgs+=(universal-ctags) # scripts/code_graph.py: the function definitions of the call graph
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: installed ${missing[*]}"
fi
