#!/usr/bin/env bash
# tests/check_docs.sh [BUILD] - the docs check (tests/check_docs.py says what
# it checks): links, sh blocks, KOLO_* variables, versions, no issue numbers
# in user text; then the README's example and commands, and the two-host
# recipe, run as written.  KOLO_DOCS_STATIC_ONLY=1: the checks that need no build.
cd "$(dirname "$0")/.." || exit 1
exec timeout -k 10 170 python3 tests/check_docs.py "${1:-build}"
