#!/usr/bin/env bash
# setup_venv.sh [BUILD] - kolo's Python package as a user installs it:
# `cmake --install` of BUILD (already built) into BUILD/torch-prefix, a venv
# over Debian's python3 and its torch (--system-site-packages, PEP 668), and
# `pip install ./python` into it, which finds libkolo through pkg-config.
# Prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(realpath "${1:-build}")
PREFIX=$BUILD/torch-prefix
VENV=$BUILD/venv-torch
cmake --install "$BUILD" --prefix "$PREFIX" > "$BUILD/torch-install.log" 2>&1 ||
  { tail -5 "$BUILD/torch-install.log"; exit 1; }
[ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$VENV"
rm -rf python/build python/*.egg-info
# No index: cffi and setuptools are Debian's (scripts/setup.sh), seen through --system-site-packages.
PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig "$VENV/bin/pip" install -q --no-index --no-build-isolation ./python \
  > "$BUILD/torch-pip.log" 2>&1 || { tail -20 "$BUILD/torch-pip.log"; exit 1; }
rm -rf python/build python/*.egg-info
echo "$VENV/bin/python"
