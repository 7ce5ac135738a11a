#!/usr/bin/env bash
# Installs kvforge's build and test dependencies from Debian 12 packages. Works as root or, for
# another user, through sudo. Idempotent: packages already present are left as they are.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config make python3
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev
  gnuplot-nox
  libpcre2-dev
  clang libclang-rt-14-dev
  python3-dev pybind11-dev python3-pytest python3-jsonschema
  chromium
  libzstd-dev liblz4-dev libxxhash-dev libhiredis-dev redis-server
  prometheus
  libyaml-dev libssl-dev
)

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_deps: run as root or install sudo" >&2
    exit 1
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install_deps: all packages present"
fi
