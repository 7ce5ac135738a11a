#!/usr/bin/env bash
# One-shot set-up on a fresh Debian 12 machine: install dependencies, build (Release, 2 jobs),
# then run `kvforge run` on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
ninja -C build -j2
./build/apps/cli/kvforge run --prompt "Once upon a time" --max-tokens 64 --temperature 0
