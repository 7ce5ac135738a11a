#!/usr/bin/env bash
# Runs the whole test suite (unit + integration) of the Release build made by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -d build ]] || { echo "test: run scripts/setup.sh first" >&2; exit 1; }
ninja -C build -j2
ctest --test-dir build --output-on-failure -j2
