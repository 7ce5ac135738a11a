#!/usr/bin/env bash
# Runs the whole test suite (unit + integration) of the Release build made by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -d build ]] || { echo "test: run scripts/setup.sh first" >&2; exit 1; }
ninja -C build -j2
# A redis-server for the tests that use a shared one (KVF_REDIS_URL); the Redis unit tests start
# and kill their own.
bash scripts/with_redis.sh ctest --test-dir build --output-on-failure -j2
