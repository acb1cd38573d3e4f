#!/usr/bin/env bash
# Installs what kolo's build, tests and benchmarks need (Debian packages),
# skipping what is already there.  Run as root (CI is); uses sudo otherwise.
set -euo pipefail
pkgs=(cmake make gcc g++ libgtest-dev iproute2 openmpi-bin libopenmpi-dev
      libibverbs-dev rdma-core ibverbs-utils perftest iperf3 pkgconf
      libpmix-dev python3-torch)
pkgs+=(python3-cffi python3-venv python3-setuptools python3-wheel) # python/ (kolo.torch): tests/torch/setup_venv.sh
pkgs+=(gnuplot-nox libjson-c-dev) # kolo-perf plot: gnuplot draws, json-c reads the runs' JSON
missing=()
pkgs+=(clang libclang-rt-14-dev) # clang and libFuzzer (libclang_rt.fuzzer): tests/fuzz/run.sh
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
