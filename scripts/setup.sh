#!/usr/bin/env bash
# One-shot set-up on a fresh Debian 12 machine: install dependencies, build (Release, 2 jobs),
# then run `kvforge run` on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
# One Python for the module and its tests: $KVF_PYTHON, else the python3 on PATH when it has
# pytest and its headers, else Debian's /usr/bin/python3 (python3-pytest, python3-dev).
PY="${KVF_PYTHON:-$(command -v python3 || true)}"
if [[ -z "$PY" ]] || ! "$PY" -c 'import pytest, sysconfig, os, sys
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' \
    2>/dev/null; then
  PY=/usr/bin/python3
fi
echo "setup: Python module for $PY"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PY"
ninja -C build -j2
./build/apps/cli/kvforge run --prompt "Once upon a time" --max-tokens 64 --temperature 0
PYTHONPATH=build/python "$PY" -c 'import kvforge; print("python: kvforge", len(kvforge.engine_options()), "engine options")'
